"""Admin filters: the scope axes plus the two structural fields an operator drills into.

The seed's ``Facet::narrow`` turns an explore bucket back into a filter field; here the
facets are the lattice axes, ``origin`` (memory) and ``kind`` (affect: state or event). A
filter is translated to SQL per table, so counts and listings never read record content.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ratatoskr.core.filters import AFFECT, FACETS, MEMORY, PLANES, Filter
from ratatoskr.core.scope import AXES, MAX_VALUE_CHARS, Scope
from ratatoskr.sqlite.scope_sql import COLUMNS, scope_condition


@dataclass(frozen=True)
class Table:
    """One kind of record: where it lives and which structural columns it has."""

    kind: str
    name: str
    id_column: str
    has_revision: bool
    has_origin: bool = False
    has_time: bool = False


CHUNKS = Table("chunk", "memory_chunks", "chunk_id", has_revision=True, has_origin=True)
EVENTS = Table("event", "affect_events", "id", has_revision=False, has_time=True)
STATES = Table("state", "affect_states", "id", has_revision=True)
# Ordered by kind name: that is the listing order (kind, then id).
TABLES: dict[str, tuple[Table, ...]] = {MEMORY: (CHUNKS,), AFFECT: (EVENTS, STATES)}


def check_plane(plane: str) -> str:
    if plane not in PLANES:
        raise ValueError(f"plane must be one of {', '.join(PLANES)}")
    return plane


def check_facet(plane: str, facet: str) -> str:
    if facet not in FACETS[check_plane(plane)]:
        raise ValueError(f"facet of the {plane} plane must be one of {', '.join(FACETS[plane])}")
    return facet


def narrow(plane: str, base: Filter, facet: str, value: str) -> Filter:
    """The seed's narrow: replace the one field ``facet`` targets with ``value``."""
    check_facet(plane, facet)
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_VALUE_CHARS:
        raise ValueError(f"a {facet} value must be a non-blank string of 1..{MAX_VALUE_CHARS}")
    if facet == "origin":
        return replace(base, origin=value)
    if facet == "kind":
        kinds = [t.kind for t in TABLES[plane]]
        if value not in kinds:
            raise ValueError(f"kind must be one of {', '.join(kinds)}")
        return replace(base, kind=value)
    return replace(base, scope={**base.scope, facet: value})


def parse_pairs(plane: str, pairs: Iterable[str], base: Filter | None = None) -> Filter:
    """``facet=value`` pairs (the CLI's ``--scope`` and ``--narrow``) narrowed in order."""
    result = base or Filter()
    for pair in pairs:
        facet, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(
                f"expected FACET=VALUE with a facet of {', '.join(FACETS[check_plane(plane)])}"
            )
        result = narrow(plane, result, facet, value)
    return result


def parse_scope(pairs: Iterable[str]) -> Scope:
    """``axis=value`` pairs over the lattice axes only (erase takes a scope, not a filter)."""
    scope: Scope = {}
    for pair in pairs:
        axis, sep, value = pair.partition("=")
        if not sep or axis not in AXES or not value.strip():
            raise ValueError(f"--scope takes axis=value with an axis of {', '.join(AXES)}")
        scope[axis] = value
    return scope


def tables_for(plane: str, flt: Filter) -> tuple[Table, ...]:
    """The tables a filter reaches: a ``kind`` filter keeps one."""
    return tuple(t for t in TABLES[plane] if flt.kind is None or flt.kind == t.kind)


def condition(table: Table, flt: Filter) -> tuple[str, list[Any]]:
    """The filter as a SQL ``WHERE`` over ``table`` (``1`` when it admits everything)."""
    sql, params = scope_condition(flt.scope, [])
    args: list[Any] = list(params)
    if flt.origin is not None:
        if not table.has_origin:
            return "0", []
        sql = f"{sql} AND origin = ?"
        args.append(flt.origin)
    return sql, args


def facet_column(table: Table, facet: str) -> str | None:
    """The column a facet reads in ``table`` (``None`` for ``kind``, which is the table)."""
    if facet in COLUMNS:
        return COLUMNS[facet]
    if facet == "origin":
        return "origin"
    return None
