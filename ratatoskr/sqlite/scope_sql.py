"""The scope filter as SQL over indexed axis columns, shared by every plane's tables.

Each plane table keeps the four lattice axes as their own indexed columns (``group`` is an
SQL keyword, hence ``grp``), so a filter is a plain ``WHERE`` the query planner can serve
from the indexes, applied before any ``LIMIT``. ``SQLITE`` is this backend's
``core.sql_dialect.SqlDialect``, for the statements both backends share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratatoskr.core.scope import Scope
from ratatoskr.core.sql_dialect import AXIS_COLUMNS, SqlDialect

COLUMNS = AXIS_COLUMNS


def placeholders(n: int) -> str:
    """``?,?,...`` for an ``IN (...)`` of ``n`` values."""
    return ",".join("?" * n)


def scope_condition(scope_all: Scope, scope_any: Sequence[Scope]) -> tuple[str, list[str]]:
    """The composed filter as SQL over the axis columns (``1`` when it admits everything)."""
    clauses: list[str] = []
    params: list[str] = []
    for axis, value in sorted(scope_all.items()):
        clauses.append(f"{COLUMNS[axis]} = ?")
        params.append(value)
    if scope_any and all(element for element in scope_any):
        branches = []
        for element in scope_any:
            branches.append("(" + " AND ".join(f"{COLUMNS[a]} = ?" for a in sorted(element)) + ")")
            params.extend(element[a] for a in sorted(element))
        clauses.append("(" + " OR ".join(branches) + ")")
    return (" AND ".join(clauses) or "1"), params


def _stored(value: Any) -> Any:
    """SQLite keeps ids and axis values as the text itself."""
    return value


def _among(column: str, ids: Sequence[str]) -> tuple[str, list[Any]]:
    return f"{column} IN ({placeholders(len(ids))})", list(ids)


SQLITE = SqlDialect(
    param="?",
    bind=_stored,
    text=_stored,
    value=_stored,
    scope_condition=scope_condition,
    among=_among,
)
