"""How a SQL backend spells the few things the statements shared by both backends leave open.

The plane tables have the same columns on SQLite and PostgreSQL; what differs is the
parameter marker, how an id or axis value is stored (SQLite: the text; PostgreSQL: its
UTF-8 bytes, see ``postgres.scope_sql``) and how a set of ids is named. Code that runs on
either backend (``core.record_sql``, ``affect.reads``) builds its statements through a
``SqlDialect``; each backend defines its one instance (``sqlite.scope_sql.SQLITE``,
``postgres.scope_sql.POSTGRES``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ratatoskr.core.scope import Scope

# the lattice axes as columns of every plane table (``group`` is an SQL keyword, hence ``grp``)
AXIS_COLUMNS = {
    "tenant": "tenant",
    "group": "grp",
    "end_user": "end_user",
    "agent_self": "agent_self",
}

# an apsw or a psycopg connection: both answer ``execute(sql, params).fetchall()``
Connection = Any


@dataclass(frozen=True)
class SqlDialect:
    """One backend's spelling of parameters, stored values and id sets."""

    param: str  # one bound parameter: ``?`` or ``%s``
    bind: Callable[[str], Any]  # an id or axis value as the backend stores it
    text: Callable[[Any], str]  # a stored id or axis value back as text
    value: Callable[[Any], str | None]  # a stored facet value as text, None for none
    # the composed scope filter as a ``WHERE`` over the axis columns, with its parameters
    scope_condition: Callable[[Scope, Sequence[Scope]], tuple[str, list[Any]]]
    # ``column`` is one of ``ids`` (at most ``MAX_IDS``), as SQL and its parameters
    among: Callable[[str, Sequence[str]], tuple[str, list[Any]]]

    def params(self, n: int) -> str:
        """``n`` parameters for a ``VALUES (...)`` row."""
        return ", ".join([self.param] * n)
