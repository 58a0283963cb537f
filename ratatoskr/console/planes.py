"""Which planes the console serves, and telling a plane that is down from one never there.

A plane the console started on (or one a flag or an environment variable named) that cannot
be opened now (its file gone, not a SQLite file, unreadable, its database unreachable) is
down: every page that needs it answers 503 with the reason, while the other plane still
renders. A plane with no file at its default location from the start is absent (404), as
for the other admin commands.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import apsw

from ratatoskr.core.errors import Unavailable
from ratatoskr.core.filters import PLANES
from ratatoskr.ops import maintenance
from ratatoskr.ops.stores import STORE_ERRORS, PlaneStore, Stores
from ratatoskr.sqlite.database import SchemaError

# what opening a plane that is there raises when it cannot be read
OPEN_ERRORS = (SchemaError, apsw.Error, OSError, Unavailable)


class PlaneDown(Exception):
    """A plane the console serves cannot be read now: shown with the reason, answered 503
    (worth retrying once the file or the database is back)."""

    def __init__(self, plane: str, reason: str) -> None:
        super().__init__(f"the {plane} plane is down: {reason}")
        self.plane = plane
        self.reason = reason


class Absent(Exception):
    """A plane the console was never started on: 404."""


def found_at_start(stores: Stores) -> frozenset[str]:
    """The planes present when the console starts, an unreachable database counted in (it
    is down, not absent)."""
    try:
        return frozenset(stores.present(unreachable={}))
    except STORE_ERRORS:
        return frozenset(stores.paths.named)


def expected(stores: Stores, known: frozenset[str], plane: str) -> bool:
    """Whether ``plane`` should be there: seen at start, or named by a flag or variable."""
    return plane in known or plane in stores.paths.named


def _exists(stores: Stores, plane: str) -> bool:
    try:
        return stores.exists(plane)
    except Unavailable as exc:
        raise PlaneDown(plane, exc.message) from None


def open_plane(stores: Stores, known: frozenset[str], plane: str) -> PlaneStore:
    """The plane's store, or ``PlaneDown`` / ``Absent`` with the reason."""
    if not _exists(stores, plane):
        where = f"no {plane} database at {stores.paths.shown(plane)}"
        if expected(stores, known, plane):
            raise PlaneDown(plane, where)
        raise Absent(where)
    try:
        return stores.get(plane)
    except OPEN_ERRORS as exc:
        raise PlaneDown(plane, str(exc)) from None


def require_all(stores: Stores, known: frozenset[str]) -> None:
    """Every plane that should be there opens: an erase must not miss a plane that is down
    (it would leave the subject there), nor start on one and fail on the other."""
    for plane in PLANES:
        if expected(stores, known, plane) or _exists(stores, plane):
            open_plane(stores, known, plane)


def check(stores: Stores, known: frozenset[str]) -> dict[str, Any]:
    """``admin check`` on every plane; a plane whose file is gone is that plane's problem,
    and the other is still checked."""
    gone = {}
    for plane in PLANES:
        try:
            if expected(stores, known, plane) and not stores.exists(plane):
                gone[plane] = f"no {plane} database at {stores.paths.shown(plane)}"
        except Unavailable:
            pass  # check reports an unreachable database itself
    if not gone:
        return maintenance.check(stores)
    report: dict[str, Any] = {"ok": False, "planes": {}, "jti": []}
    if len(gone) < len(PLANES):
        paths = dataclasses.replace(stores.paths, named=stores.paths.named - set(gone))
        with Stores(paths, clock=stores.clock) as others, contextlib.suppress(ValueError):
            report = maintenance.check(others)  # ValueError: no other plane there either
    for plane, reason in gone.items():
        report["planes"][plane] = {"path": stores.paths.shown(plane), "problems": [reason]}
    report["planes"] = {p: report["planes"][p] for p in PLANES if p in report["planes"]}
    report["ok"] = False
    return report
