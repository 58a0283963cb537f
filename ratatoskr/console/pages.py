"""The GET pages: overview (health, stats), a plane's tree and a node's records, the erase
form, check. None of them changes a file, and none shows record content."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import psycopg
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ratatoskr.console import planes
from ratatoskr.console import tree as tree_view
from ratatoskr.console.planes import Absent, PlaneDown
from ratatoskr.console.render import page
from ratatoskr.console.state import Console, Refused
from ratatoskr.core.errors import Unavailable
from ratatoskr.core.filters import PLANES
from ratatoskr.core.scope import AXES
from ratatoskr.ops import explore as explore_ops
from ratatoskr.ops import listing, maintenance
from ratatoskr.ops.locations import describe, existing_ledger
from ratatoskr.ops.stores import STORE_ERRORS, Stores

# what reading a jti ledger raises when it cannot be read (a PostgreSQL error included: a
# ledger table dropped is not one of the stores' own errors)
LEDGER_ERRORS = (*STORE_ERRORS, Unavailable, psycopg.Error)

Handler = Callable[[Console, Request], Awaitable[Response]]


def _int(request: Request, name: str, default: int, maximum: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return listing.check_limit(int(raw), maximum, name)
    except ValueError:
        raise Refused(f"{name} must be an integer in 1..{maximum:,}") from None


def _plane(request: Request) -> str:
    plane = str(request.path_params.get("plane", ""))
    if plane not in PLANES:
        raise Refused(f"no plane {plane!r}: the planes are {', '.join(PLANES)}", 404)
    return plane


def _ledgers(stores: Stores) -> list[dict[str, Any]]:
    """Each existing jti ledger with its entries (``entries``, ``expired``), or with the
    ``problem`` that keeps it from being read: one that opens but cannot be counted (its
    pages damaged, its PostgreSQL table dropped) is listed with the reason, not left out,
    and does not hide another ledger."""
    try:
        paths = stores.paths.jti_files()
    except ValueError as exc:  # a ledger --jti-db named is not there
        return [{"path": describe(stores.paths.jti or ""), "problem": str(exc)}]
    out: list[dict[str, Any]] = []
    for path in paths:
        try:
            ledger = existing_ledger(path, clock=stores.clock)
            if ledger is None:
                continue
            try:
                out.append(
                    {"path": describe(path), "entries": ledger.count(), "expired": ledger.expired()}
                )
            finally:
                ledger.close()
        except LEDGER_ERRORS as exc:
            out.append({"path": describe(path), "problem": f"cannot be read: {exc}"})
    return out


async def overview(console: Console, request: Request) -> Response:
    def work(stores: Stores) -> dict[str, Any]:
        present: list[str] = []
        health: dict[str, dict[str, Any]] = {}
        for plane in PLANES:
            try:
                health[plane] = console.store(stores, plane).health()
            except Absent:
                continue
            except PlaneDown as exc:
                health[plane] = {"status": "down", "reason": exc.reason}
            except STORE_ERRORS as exc:
                # a plane that cannot be reached is down, with the reason; the other still shows
                health[plane] = {"status": "down", "reason": str(exc)}
            present.append(plane)
        # each part on its own: a plane that cannot be reached leaves out its stats alone
        stats: dict[str, Any] = {"planes": {}, "jti": []}
        for plane in (p for p in present if health[p].get("status") != "down"):
            with contextlib.suppress(*STORE_ERRORS):
                stats["planes"][plane] = maintenance.plane_stats(stores, plane)
        stats["jti"] = _ledgers(stores)
        return {
            "present": present,
            "missing": {p: stores.paths.shown(p) for p in PLANES if p not in present},
            "shown": {p: stores.paths.shown(p) for p in PLANES},
            "health": health,
            "stats": stats,
        }

    found = await console.run(work)
    return page(
        "overview.html", console.context(request, title="Overview", section="overview", **found)
    )


async def tree(console: Console, request: Request) -> Response:
    plane = _plane(request)
    path = tree_view.parse_path(plane, request.query_params.getlist("at"))
    go, go_by = request.query_params.get("go"), request.query_params.get("go_by")
    if go is not None and go_by:  # a value typed beside a level whose buckets are cut
        return RedirectResponse(tree_view.go_to(plane, path, go_by, go), status_code=303)
    by = request.query_params.get("by") or None
    limit = _int(request, "limit", explore_ops.DEFAULT_BUCKETS, explore_ops.MAX_BUCKETS)
    size = _int(request, "size", listing.DEFAULT_LIST_LIMIT, listing.MAX_LIST_LIMIT)
    cursor = request.query_params.get("cursor") or None

    def work(stores: Stores) -> dict[str, Any]:
        store = console.store(stores, plane)
        drawn = tree_view.build(store, plane, path, by=by, limit=limit)
        flt = tree_view.filter_of(plane, path)
        records = listing.list_records(store, plane, flt, limit=size, cursor=cursor)
        return {"tree": drawn, "records": records}

    found = await console.run(work)
    records = found["records"]["records"]
    keep = {k: request.query_params.get(k) for k in ("by", "limit", "size")}
    next_cursor = found["records"]["next_cursor"]
    erase_scope = [(f, v) for f, v in path if f in AXES]
    return page(
        "tree.html",
        console.context(
            request,
            title=f"{plane} plane",
            section=plane,
            plane=plane,
            axes=[a for a in AXES if any(a in r["scope"] for r in records)],
            here=path,
            erase_href="/erase?" + urlencode(erase_scope) if erase_scope else None,
            next_href=tree_view.href(plane, path, **keep, cursor=next_cursor)
            if next_cursor
            else None,
            first_href=tree_view.href(plane, path, **keep) if cursor else None,
            **found,
        ),
    )


async def erase_form(console: Console, request: Request) -> Response:
    given = {axis: request.query_params.get(axis, "") for axis in AXES}
    return page(
        "erase.html",
        console.context(request, title="Erase a subject", section="erase", given=given),
    )


async def check(console: Console, request: Request) -> Response:
    def work(stores: Stores) -> dict[str, Any]:
        return planes.check(stores, console.known)

    report = await console.run(work)
    return page(
        "check.html", console.context(request, title="Check", section="check", report=report)
    )


HANDLERS: dict[str, Handler] = {
    "overview": overview,
    "tree": tree,
    "erase_form": erase_form,
    "check": check,
}
