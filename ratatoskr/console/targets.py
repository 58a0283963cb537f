"""What a forget removes: a node of one plane, or records ticked on a node, confined to it.

The page's form names the node and, for a selection, the ticked ids; both are read again
here, and a ticked id is removed only while its record is still at that node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from starlette.datastructures import FormData

from ratatoskr.console import tree as tree_view
from ratatoskr.console import values
from ratatoskr.console.state import Refused
from ratatoskr.core.filters import KINDS, PLANES, Filter
from ratatoskr.ops import forget as forget_ops
from ratatoskr.ops import listing
from ratatoskr.ops.stores import PlaneStore


def plane_of(value: object) -> str:
    if value not in PLANES:
        raise Refused(f"the plane must be one of {', '.join(PLANES)}")
    return str(value)


@dataclass(frozen=True)
class Counted:
    """Counts per kind, and how many ticked records were left out (no longer at the node,
    or gone)."""

    counts: dict[str, int]
    left_out: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Target:
    """What a forget removes: a node of one plane (its path) or a selection of its records,
    each a kind and an id (an affect state and an event may share an id: ticking one
    removes that one)."""

    plane: str
    path: list[tuple[str, str]]
    ids: list[tuple[str, str]]

    @classmethod
    def read(cls, form: FormData) -> Target:
        plane = plane_of(form.get("plane"))
        path = tree_view.parse_path(plane, [str(v) for v in form.getlist("at")])
        if form.get("mode") == "ids":  # the node they were ticked on: only to return to
            picked = dict.fromkeys(_picked(plane, str(v)) for v in form.getlist("id") if str(v))
            if not picked:
                raise Refused("select at least one record first")
            return cls(plane, path, list(picked))
        if not path:
            raise Refused("refusing an empty filter: pick a node below the plane, or records")
        return cls(plane, path, [])

    @property
    def phrase(self) -> str:
        """The node's value as the page writes it (``" "`` for a blank one, ``""`` for the
        empty origin), so every value has a phrase that can be typed; the target comes
        from the form's other fields, never from the phrase."""
        return str(len(self.ids)) if self.ids else values.shown(self.path[-1][1])

    def title(self, counted: Counted) -> Markup:
        """What ``counted`` says is (or was) removed, its values written as the tree writes
        them: of a selection, the records removed, not the ids ticked (one no longer at the
        node is left out)."""
        if self.ids:
            ticked = len(self.ids)
            if counted.total == ticked:
                return Markup("{:,} selected {} record(s)").format(ticked, self.plane)
            return Markup("{:,} of {:,} selected {} record(s)").format(
                counted.total, ticked, self.plane
            )
        return Markup("{} node {}").format(self.plane, values.pairs_html(self.path))

    def counts(self, store: PlaneStore, *, dry_run: bool) -> Counted:
        """What is (or, with ``dry_run``, would be) removed, per kind; for a selection only
        the ticked records still at the node they were ticked on (a writer may have moved
        one to another subject since the page was drawn: it is left out and counted)."""
        flt = tree_view.filter_of(self.plane, self.path)
        if not self.ids:
            return Counted(forget_ops.forget(store, flt=flt, dry_run=dry_run), 0)
        kept = _at_node(store, flt, self.ids)
        counts: dict[str, int] = {}
        for kind in KINDS[self.plane]:  # one removal per kind ticked
            ids = [i for k, i in kept if k == kind]
            if ids:
                counts |= forget_ops.forget(store, ids=ids, kind=kind, dry_run=dry_run)
            elif any(k == kind for k, _ in self.ids):
                counts[kind] = 0
        return Counted(counts, len(self.ids) - len(kept))

    def after_href(self) -> str:
        """Where the counts are seen again: the node the records were ticked on, or a
        forgotten node's parent (the node is gone)."""
        return tree_view.href(self.plane, self.path if self.ids else self.path[:-1])


def _picked(plane: str, value: str) -> tuple[str, str]:
    """A ticked record, ``kind:id`` (the page's checkbox value)."""
    kind, sep, record_id = value.partition(":")
    if not sep or kind not in KINDS[plane] or not record_id:
        raise Refused(f"a selected record is a kind of {', '.join(KINDS[plane])}, then :id")
    return kind, record_id


def _admits(flt: Filter, hit: dict[str, Any]) -> bool:
    """Whether a stored record is at the node ``flt`` narrows to (as the store's own
    query reads it: every scope pair, the origin, the kind)."""
    record = hit["record"]
    scope = record.get("scope") or {}
    return (
        (flt.kind is None or flt.kind == hit["kind"])
        and all(scope.get(axis) == value for axis, value in flt.scope.items())
        and (flt.origin is None or record.get("origin") == flt.origin)
    )


Pick = tuple[str, str]  # (kind, id)


def _at_node(store: PlaneStore, flt: Filter, picked: list[Pick]) -> list[Pick]:
    """The ticked (kind, id) pairs whose record is still at the node."""
    ids = list(dict.fromkeys(i for _, i in picked))
    here: set[tuple[str, str]] = set()
    for start in range(0, len(ids), listing.MAX_GET_IDS):
        hits = listing.get_records(store, ids[start : start + listing.MAX_GET_IDS])
        here |= {(h["kind"], h["id"]) for h in hits if _admits(flt, dict(h))}
    return [pair for pair in picked if pair in here]
