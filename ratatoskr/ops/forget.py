"""``admin forget`` (one plane, by ids or a non-empty filter) and ``admin erase`` (a subject
across both planes, leaving no trace in the files).

Both are store methods (``AdminStore.forget`` and ``erase``): the store deletes through its
own delete path, so every server process's view follows. Erase also drops the idempotency
entries whose call wrote an erased record and whatever copy the backend keeps (SQLite: the
freed vec0 slots, the WAL; ``secure_delete`` zeroes freed cells and pages).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratatoskr.core.errors import Unavailable
from ratatoskr.core.filters import PLANES, Filter, check_scope, check_selection
from ratatoskr.ops.stores import STORE_ERRORS, PlaneStore, Stores


def forget(
    store: PlaneStore,
    *,
    ids: Sequence[str] | None = None,
    flt: Filter | None = None,
    kind: str | None = None,
    dry_run: bool = False,
) -> dict[str, int]:
    """Remove the records ``ids`` names or ``flt`` admits (``kind``: only ids of that
    kind); counts per kind of what was (or, with ``dry_run``, would be) removed. An empty
    id list or filter is refused (the seed)."""
    check_selection(ids, flt, kind)
    if dry_run:
        found = store.match(ids=ids, flt=flt, kind=kind)
        return {k: len(matched) for k, matched in found.items()}
    return store.forget(ids=ids, flt=flt, kind=kind)


class EraseRefused(Unavailable):
    """A plane could not take a write: nothing was erased (worth trying again later)."""


class EraseIncomplete(Unavailable):
    """A plane failed after another was erased: ``report`` holds what was removed, and the
    same erase run again removes what is left."""

    def __init__(self, report: dict[str, Any], plane: str, reason: str) -> None:
        done = ", ".join(report["planes"]) or "no plane"
        super().__init__(
            f"erase incomplete: {done} erased, the {plane} plane not ({reason}); run the "
            "same erase again to remove what is left"
        )
        self.report = report
        self.plane = plane
        self.reason = reason


def erase(stores: Stores, scope: dict[str, str], *, dry_run: bool = False) -> dict[str, Any]:
    """Remove everything ``scope`` admits from both planes, then the traces: idempotency
    entries that wrote it, freed index slots, and the WAL.

    The planes are separate files (or databases), so one transaction cannot hold both:
    every plane is first asked to take a write (``ready_to_write``), so a plane that is
    locked, read-only or unreachable stops the erase before anything is removed. One that
    fails after that raises ``EraseIncomplete`` with what the other removed.

    A plane with no database at its default location is not examined (``Stores.present``);
    ``not_examined`` names each such plane with where it was looked for, so the report never
    reads as the subject gone from both planes when one was not looked at."""
    if not scope:
        raise ValueError("refusing an empty scope: erase would remove everything")
    check_scope(scope)
    report: dict[str, Any] = {"scope": dict(sorted(scope.items())), "planes": {}}
    planes = stores.present()
    report["not_examined"] = {p: stores.paths.shown(p) for p in PLANES if p not in planes}
    if not dry_run:
        for plane in planes:
            try:
                stores.get(plane).ready_to_write()
            except STORE_ERRORS as exc:
                raise EraseRefused(
                    f"nothing was erased: the {plane} plane cannot take a write now ({exc})"
                ) from None
    for plane in planes:
        store = stores.get(plane)
        if dry_run:
            report["planes"][plane] = forget(store, flt=Filter(scope=dict(scope)), dry_run=True)
            continue
        try:
            report["planes"][plane] = store.erase(scope)
        except STORE_ERRORS as exc:
            report["removed"] = True
            raise EraseIncomplete(report, plane, str(exc)) from None
    report["removed"] = not dry_run
    return report


def erase_warnings(report: dict[str, Any]) -> list[str]:
    """What an erase could not remove by itself, per plane, for the operator to finish."""
    warnings = []
    for plane, counts in report["planes"].items():
        if counts.get("wal_truncated") is False:
            warnings.append(
                f"the {plane} WAL is still held by a reader; erase again when the server is "
                "idle to truncate it"
            )
        if counts.get("litestream_copies"):
            warnings.append(
                f"Litestream's local files beside the {plane} file and the replica's history "
                "still hold the erased records; see docs/operations.md, Erase means gone"
            )
    return warnings
