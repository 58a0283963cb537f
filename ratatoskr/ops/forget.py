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

from ratatoskr.core.filters import Filter, check_scope, check_selection
from ratatoskr.ops.stores import PlaneStore, Stores


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


def erase(stores: Stores, scope: dict[str, str], *, dry_run: bool = False) -> dict[str, Any]:
    """Remove everything ``scope`` admits from both planes, then the traces: idempotency
    entries that wrote it, freed index slots, and the WAL."""
    if not scope:
        raise ValueError("refusing an empty scope: erase would remove everything")
    check_scope(scope)
    report: dict[str, Any] = {"scope": dict(sorted(scope.items())), "planes": {}}
    for plane in stores.present():
        store = stores.get(plane)
        if dry_run:
            report["planes"][plane] = forget(store, flt=Filter(scope=dict(scope)), dry_run=True)
        else:
            report["planes"][plane] = store.erase(scope)
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
