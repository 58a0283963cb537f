"""The operator's filter vocabulary, the same for every backend: planes, kinds, facets.

A filter is the scope axes plus the two structural fields an operator drills into: ``origin``
(memory) and ``kind`` (affect: state or event). Each backend translates it to its own query;
nothing here reads or names storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ratatoskr.core.errors import BifrostError
from ratatoskr.core.scope import AXES, Scope, validate_scope

MEMORY = "memory"
AFFECT = "affect"
PLANES = (MEMORY, AFFECT)
# Each plane's kinds of record, by name: that is the listing order (kind, then id).
KINDS: dict[str, tuple[str, ...]] = {MEMORY: ("chunk",), AFFECT: ("event", "state")}
FACETS: dict[str, tuple[str, ...]] = {
    MEMORY: (*AXES, "origin"),
    AFFECT: (*AXES, "kind"),
}


@dataclass(frozen=True)
class Filter:
    """Records whose scope holds every pair of ``scope``, with that origin and kind if set."""

    scope: Scope = field(default_factory=dict)
    origin: str | None = None
    kind: str | None = None

    def __post_init__(self) -> None:
        # the API takes a Filter as the CLI builds one: refuse what no record can hold
        check_scope(self.scope)
        if self.origin is not None and not isinstance(self.origin, str):
            raise ValueError("origin must be a string")
        if self.kind is not None and not isinstance(self.kind, str):
            raise ValueError("kind must be a string")

    def is_empty(self) -> bool:
        """An empty filter admits everything, which forget and erase refuse (the seed)."""
        return not self.scope and self.origin is None and self.kind is None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scope": dict(sorted(self.scope.items()))}
        if self.origin is not None:
            out["origin"] = self.origin
        if self.kind is not None:
            out["kind"] = self.kind
        return out

    def pairs(self) -> list[str]:
        """The filter as ``facet=value`` pairs, the form ``--narrow`` takes."""
        out = [f"{axis}={value}" for axis, value in sorted(self.scope.items())]
        if self.origin is not None:
            out.append(f"origin={self.origin}")
        if self.kind is not None:
            out.append(f"kind={self.kind}")
        return out

    def kinds(self, plane: str) -> tuple[str, ...]:
        """The kinds of ``plane`` this filter reaches: a ``kind`` filter keeps one."""
        return tuple(k for k in KINDS[plane] if self.kind is None or self.kind == k)


def check_scope(scope: Any) -> Scope:
    """A scope as records hold one, checked as the wire checks it (lattice axes to strings
    of 1..256 characters, blanks included: a value is whatever a writer stored), refused
    with ``ValueError`` as every operator input is."""
    try:
        return validate_scope(scope, "scope")
    except BifrostError as exc:
        raise ValueError(exc.message) from None


def check_selection(ids: Sequence[str] | None, flt: Filter | None, kind: str | None = None) -> None:
    """What forget accepts: ids or a filter, never both, never an empty one (which would
    remove everything); ``kind`` narrows ids to one kind of record (an affect state and an
    event may share an id), a filter names its kind itself. Every store checks this again
    before it deletes."""
    if ids is None and flt is None:
        raise ValueError("forget takes ids or a filter: neither was given")
    if ids is not None and flt is not None:
        raise ValueError("forget takes ids or a filter, not both")
    if ids is not None and (isinstance(ids, str | bytes) or not isinstance(ids, Sequence)):
        raise ValueError("ids must be a list of ids (one string is not a list of its letters)")
    if ids is not None and not all(isinstance(i, str) for i in ids):
        raise ValueError("each id must be a string")
    if kind is not None and ids is None:
        raise ValueError("a kind narrows ids; a filter names its kind itself")
    if ids is not None and (not ids or any(not i for i in ids)):
        raise ValueError("forget needs at least one non-empty id")
    if flt is not None and flt.is_empty():
        raise ValueError("refusing an empty filter: it would remove everything")
