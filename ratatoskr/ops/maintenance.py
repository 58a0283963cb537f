"""``admin stats``, ``check``, ``backup`` and ``prune``: keeping the plane files healthy.

``check`` answers the question an operator asks after a crash, a restore or a copy: is each
store sound at the schema this build knows, with each plane's own invariants (memory: one
vector row per chunk), revisions positive (``AdminStore.check``). ``backup`` takes one
consistent snapshot per plane while the server commits (``AdminStore.backup``), then checks
the copies.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ratatoskr.core.filters import AFFECT, MEMORY, PLANES
from ratatoskr.ops.locations import (
    describe,
    existing_ledger,
    is_postgres,
    ledger_location,
    unexpired_tokens,
)
from ratatoskr.ops.stores import STORE_ERRORS, Paths, Stores
from ratatoskr.postgres.probe import unfinished_migrations
from ratatoskr.sqlite.jti import JtiLedger, ledger_beside

UNFINISHED_MIGRATION = (
    "an admin migrate into this database has not finished: run it again to the end "
    "before serving from it"
)


def _require_some(stores: Stores, unreachable: dict[str, str] | None = None) -> list[str]:
    present = stores.present(unreachable=unreachable)
    if not present:
        paths = ", ".join(stores.paths.shown(p) for p in PLANES)
        raise ValueError(f"no database found at {paths} (see --memory-db, --affect-db)")
    return present


def stats(stores: Stores) -> dict[str, Any]:
    """Records per plane and kind, file and WAL sizes, cache sizes, schema versions, and the
    durability mode (``synchronous``) this process opens the files with."""
    planes = {plane: plane_stats(stores, plane) for plane in _require_some(stores)}
    return {"planes": planes, "jti": ledger_stats(stores)}


def plane_stats(stores: Stores, plane: str) -> dict[str, Any]:
    """One plane's part of ``stats``: its location (password masked) and its store's stats."""
    return {"path": stores.paths.shown(plane), **stores.get(plane).stats()}


def ledger_stats(stores: Stores) -> list[dict[str, Any]]:
    """The jti ledgers' part of ``stats``: entries and expired entries per existing ledger,
    or why a ledger cannot be read."""
    out: list[dict[str, Any]] = []
    for path in stores.paths.jti_files():
        try:
            ledger = existing_ledger(path, clock=stores.clock)
        except STORE_ERRORS as exc:
            out.append({"path": describe(path), "problem": str(exc)})
            continue
        if ledger is not None:
            try:  # one ledger that cannot be read is reported; the others still are
                out.append(
                    {
                        "path": describe(path),
                        "entries": ledger.count(),
                        "expired": ledger.expired(),
                        # SQLite's durability mode; PostgreSQL's is the server's own
                        "synchronous": getattr(ledger.db.settings, "synchronous", None),
                    }
                )
            except STORE_ERRORS as exc:
                out.append({"path": describe(path), "problem": f"cannot read: {exc}"})
            finally:
                ledger.close()
    return out


def ledger_check(stores: Stores) -> list[dict[str, Any]]:
    """Each existing jti ledger's problems: a file that is not a ledger (a plane file put
    in its place) would make every mutating call fail; a damaged one too."""
    out: list[dict[str, Any]] = []
    for path in stores.paths.jti_files():
        try:
            ledger = existing_ledger(path, clock=stores.clock)
        except STORE_ERRORS as exc:
            out.append({"path": describe(path), "problems": [f"cannot open: {exc}"]})
            continue
        if ledger is None:
            continue
        try:  # a PostgreSQL ledger is a table the database checks itself: read it whole
            if isinstance(ledger, JtiLedger):
                problems = ledger.check()
            else:
                ledger.count()
                problems = []
        except STORE_ERRORS as exc:
            problems = [f"cannot read: {exc}"]
        finally:
            ledger.close()
        out.append({"path": describe(path), "problems": problems})
    return out


def check(stores: Stores) -> dict[str, Any]:
    """Every problem found, per plane; ``ok`` only when there is none."""
    planes: dict[str, Any] = {}
    unreachable: dict[str, str] = {}
    for plane in _require_some(stores, unreachable):
        if plane in unreachable:  # the plane's problem; the other plane is still checked
            planes[plane] = {"path": stores.paths.shown(plane), "problems": [unreachable[plane]]}
            continue
        try:
            problems = stores.get(plane).check()
        except STORE_ERRORS as exc:
            problems = [f"cannot open: {exc}"]
        location = stores.paths.of(plane)
        if is_postgres(location) and plane in unfinished_migrations(location):
            problems = [*problems, UNFINISHED_MIGRATION]
        planes[plane] = {"path": stores.paths.shown(plane), "problems": problems}
    ledgers = ledger_check(stores)
    found = [*planes.values(), *ledgers]
    return {"ok": not any(p["problems"] for p in found), "planes": planes, "jti": ledgers}


def backup(
    stores: Stores,
    dest_dir: str,
    *,
    verify: bool = True,
    on_copied: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Copy every present plane file to ``dest_dir/<plane>.db`` (owner-only permissions),
    then, with ``verify``, run ``check`` on the copies."""
    present = _require_some(stores)
    for plane in present:  # a file that cannot be opened is refused before dest_dir is made
        stores.get(plane)
    tokens = unexpired_tokens([_ledger_source(stores)], clock=stores.clock)  # so is a ledger
    targets = {plane: os.path.join(dest_dir, f"{plane}.db") for plane in present}
    ledger_copy = ledger_beside(os.path.join(dest_dir, "memory.db"))
    for target in [*targets.values(), *([ledger_copy] if tokens is not None else [])]:
        if os.path.exists(target):  # before anything is copied
            raise ValueError(f"refusing to overwrite {target}")
    _backup_directory(dest_dir)
    copied: dict[str, Any] = {}
    for plane, target in targets.items():
        size = stores.get(plane).backup(target)
        copied[plane] = {"path": target, "bytes": size}
        if on_copied is not None:
            on_copied(plane, size)
    out: dict[str, Any] = {"planes": copied, "jti": _copy_ledger(tokens, ledger_copy, stores)}
    if verify:
        copy_paths = Paths(
            targets.get(MEMORY, os.path.join(dest_dir, "memory.db")),
            targets.get(AFFECT, os.path.join(dest_dir, "affect.db")),
        )
        with Stores(copy_paths, clock=stores.clock) as copies:
            out["check"] = check(copies)
    return out


def _backup_directory(dest_dir: str) -> None:
    """``dest_dir``, made if missing; one that is a file, cannot be made or cannot be
    written to is refused by name before anything is copied."""
    if os.path.exists(dest_dir) and not os.path.isdir(dest_dir):
        raise ValueError(f"--to {dest_dir} is not a directory")
    try:
        os.makedirs(dest_dir, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--to {dest_dir} cannot be made ({exc.strerror})") from None
    if not os.access(dest_dir, os.W_OK | os.X_OK):
        raise ValueError(f"--to {dest_dir} is not writable")


def _ledger_source(stores: Stores) -> str:
    if stores.paths.jti is not None:  # a named ledger that is missing is refused, never
        return stores.paths.jti_files()[0]  # a backup that quietly lacks it
    return ledger_location(stores.paths.memory)


def _copy_ledger(entries: list[Any] | None, target: str, stores: Stores) -> dict[str, Any] | None:
    """The server's jti ledger's (or ``--jti-db``'s) unexpired ``entries`` into ``target``,
    beside the copied memory file, where a server started on the copies looks for it: a
    token used before the backup stays used on them. None when there is no ledger yet."""
    if entries is None:
        return None
    copy = JtiLedger(target, clock=stores.clock)
    try:
        copy.adopt(entries)
    finally:
        copy.close()
    os.chmod(target, 0o600)
    return {"path": target, "entries": len(entries)}


def prune(stores: Stores) -> dict[str, Any]:
    """Drop expired idempotency entries (both planes) and expired jti ledger entries."""
    out: dict[str, Any] = {"idempotency": {}, "jti": {}}
    for plane in _require_some(stores):
        out["idempotency"][plane] = stores.get(plane).prune()
    for path in stores.paths.jti_files():
        ledger = existing_ledger(path, clock=stores.clock)
        if ledger is not None:
            try:
                out["jti"][describe(path)] = ledger.prune()
            finally:
                ledger.close()
    return out
