"""The POST actions: open one record, and forget or erase behind a dry run and a typed
confirmation. Each answers with an HTML fragment the page's script puts in place.

A removal runs only when the operator typed the confirmation phrase: the value of the node
or subject (``end_user=bob`` -> ``bob``), or for a selection of ids the number of ids
selected. The phrase is worked out again here from the same inputs, never trusted from
the page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from markupsafe import Markup
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from ratatoskr.console import audit, planes, values
from ratatoskr.console.render import page
from ratatoskr.console.state import Console, Refused, read_form
from ratatoskr.console.targets import Counted, Target, plane_of
from ratatoskr.core.filters import PLANES
from ratatoskr.core.scope import AXES
from ratatoskr.ops import forget as forget_ops
from ratatoskr.ops import listing
from ratatoskr.ops.stores import Stores

Handler = Callable[[Console, Request], Awaitable[Response]]


def _client(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


async def _counts(console: Console, target: Target, *, dry_run: bool) -> Counted:
    """The target's counts, removed unless ``dry_run``, on its plane as the console opens it
    (a plane that is down answers 503)."""
    return await console.run(
        lambda s: target.counts(console.store(s, target.plane), dry_run=dry_run)
    )


def _subject(form: FormData) -> dict[str, str]:
    """The scope values as given, not stripped: `` bob`` is another subject than ``bob``
    and ``" "`` is a value a writer may have stored (as for ``admin erase --scope``); only
    an empty field names no axis (a scope value is never empty)."""
    scope = {axis: str(form.get(axis, "")) for axis in AXES}
    scope = {axis: value for axis, value in scope.items() if value != ""}
    if not scope:
        raise Refused("refusing an empty subject: give at least one scope value")
    return scope


def _subject_phrase(scope: dict[str, str]) -> str:
    """The most specific value named, as the page writes it: ``tenant=acme end_user=bob``
    is confirmed by ``bob``, ``end_user=" bob"`` by ``" bob"``."""
    return values.shown([scope[a] for a in AXES if a in scope][-1])


def _expected(form: FormData) -> int:
    """The total the dry run showed, which the confirmation carries: a removal runs only
    while the same filter still counts that many (a writer may have added or moved records
    since the operator read the counts)."""
    try:
        return int(str(form.get("expect", "")))
    except ValueError:
        raise Refused("the confirmation carries no dry-run count: count again") from None


def _changed(expected: int, now: int) -> str:
    return (
        f"nothing removed: the count changed since the dry run ({expected:,} then, {now:,} "
        "now); check the new counts and confirm again"
    )


def _confirmed(form: FormData, phrase: str) -> bool:
    """The typed phrase, blanks around it dropped (a phrase never starts or ends with one)."""
    return bool(phrase) and str(form.get("confirm", "")).strip() == phrase


async def open_record(console: Console, request: Request) -> Response:
    plane = plane_of(request.path_params.get("plane"))
    form = await read_form(request)
    record_id = str(form.get("id", ""))
    if not record_id:
        raise Refused("open needs a record id")
    hits = await console.run(lambda s: listing.get_records(console.store(s, plane), [record_id]))
    audit.record_opened(
        actor=console.operator,
        client=_client(request),
        plane=plane,
        record_id=record_id,
        found=len(hits),
    )
    return page(
        "record.html", console.context(request, plane=plane, record_id=record_id, hits=hits)
    )


def _confirm_page(
    console: Console, request: Request, context: dict[str, Any], status: int = 200
) -> Response:
    return page("confirm.html", console.context(request, **context), status)


async def forget_preview(console: Console, request: Request) -> Response:
    target = Target.read(await read_form(request))
    counts = await _counts(console, target, dry_run=True)
    return _confirm_page(console, request, _forget_context(target, counts))


def _forget_context(target: Target, counted: Counted) -> dict[str, Any]:
    return {
        "action": "/forget",
        "what": "forget",
        "title": target.title(counted),
        "planes": {target.plane: counted.counts},
        "phrase": target.phrase,
        "phrase_hint": "the number of selected records" if target.ids else "the node's value",
        "hidden": [("plane", target.plane), ("mode", "ids" if target.ids else "node")]
        + [("at", f"{f}={v}") for f, v in target.path]
        + [("id", f"{kind}:{i}") for kind, i in target.ids]
        + [("expect", str(counted.total))],
        "total": counted.total,
        "left_out": counted.left_out,
        "error": None,
    }


async def forget(console: Console, request: Request) -> Response:
    form = await read_form(request)
    target = Target.read(form)
    if not _confirmed(form, target.phrase):
        counts = await _counts(console, target, dry_run=True)
        context = _forget_context(target, counts)
        context["error"] = f"nothing removed: type {target.phrase} exactly to confirm"
        return _confirm_page(console, request, context, 400)
    expected = _expected(form)

    def work(stores: Stores) -> tuple[Counted, bool]:
        store = console.store(stores, target.plane)
        now = target.counts(store, dry_run=True)
        if now.total != expected:
            return now, False
        return target.counts(store, dry_run=False), True

    counts, removed = await console.run(work)
    if not removed:
        context = _forget_context(target, counts)
        context["error"] = _changed(expected, counts.total)
        return _confirm_page(console, request, context, 409)
    audit.removed(
        actor=console.operator,
        client=_client(request),
        what="forget",
        counts={target.plane: counts.counts},
    )
    return page(
        "removed.html",
        console.context(
            request,
            title=target.title(counts),
            planes={target.plane: counts.counts},
            after_href=target.after_href(),
            warnings=[],
        ),
    )


def _erase_context(scope: dict[str, str], report: dict[str, Any]) -> dict[str, Any]:
    planes = {
        p: {k: n for k, n in c.items() if not isinstance(n, bool)}
        for p, c in report["planes"].items()
    }
    return {
        "action": "/erase",
        "what": "erase",
        "title": Markup("subject {} from {}").format(
            values.pairs_html(list(scope.items())), _reached(report)
        ),
        "planes": planes,
        "phrase": _subject_phrase(scope),
        "phrase_hint": "the subject's value",
        "hidden": [*scope.items(), ("expect", str(_erase_total(report)))],
        "total": _erase_total(report),
        "error": None,
    }


def _reached(report: dict[str, Any]) -> str:
    """The planes an erase counted (or removed from): both, or the one there (a console
    started on one plane), or the one erased before the other failed."""
    reached = [p for p in PLANES if p in report["planes"]]
    if len(reached) == len(PLANES):
        return "both planes"
    return f"the {reached[0]} plane" if reached else "no plane"


def _erase_total(report: dict[str, Any]) -> int:
    """Records an erase counts (idempotency entries and flags such as ``wal_truncated`` are
    not records)."""
    return sum(
        n
        for counts in report["planes"].values()
        for kind, n in counts.items()
        if not isinstance(n, bool) and kind != "idempotency"
    )


def _erase(
    console: Console, stores: Stores, scope: dict[str, str], *, dry_run: bool
) -> dict[str, Any]:
    """``admin erase``, once every plane the console serves opens (a plane down answers
    503 before anything is counted or removed)."""
    planes.require_all(stores, console.known)
    return forget_ops.erase(stores, scope, dry_run=dry_run)


async def erase_preview(console: Console, request: Request) -> Response:
    scope = _subject(await read_form(request))
    report = await console.run(lambda s: _erase(console, s, scope, dry_run=True))
    return _confirm_page(console, request, _erase_context(scope, report))


async def erase(console: Console, request: Request) -> Response:
    form = await read_form(request)
    scope = _subject(form)
    phrase = _subject_phrase(scope)
    if not _confirmed(form, phrase):
        report = await console.run(lambda s: _erase(console, s, scope, dry_run=True))
        context = _erase_context(scope, report)
        context["error"] = f"nothing removed: type {phrase} exactly to confirm"
        return _confirm_page(console, request, context, 400)
    expected = _expected(form)

    def work(stores: Stores) -> tuple[dict[str, Any], bool, str | None]:
        now = _erase(console, stores, scope, dry_run=True)
        if _erase_total(now) != expected:
            return now, False, None
        try:
            return _erase(console, stores, scope, dry_run=False), True, None
        except forget_ops.EraseIncomplete as exc:  # one plane erased, the other not
            return exc.report, True, str(exc)

    report, removed, incomplete = await console.run(work)
    if not removed:
        context = _erase_context(scope, report)
        context["error"] = _changed(expected, _erase_total(report))
        return _confirm_page(console, request, context, 409)
    audit.removed(
        actor=console.operator, client=_client(request), what="erase", counts=report["planes"]
    )
    warnings = forget_ops.erase_warnings(report)
    if incomplete is not None:  # what was removed is shown, then why not all of it
        warnings.insert(0, incomplete)
    context = _erase_context(scope, report)
    return page(
        "removed.html",
        console.context(
            request,
            title=context["title"],
            planes=context["planes"],
            after_href="/",
            warnings=warnings,
        ),
        503 if incomplete is not None else 200,
    )


HANDLERS: dict[str, Handler] = {
    "open_record": open_record,
    "forget_preview": forget_preview,
    "forget": forget,
    "erase_preview": erase_preview,
    "erase": erase,
}
