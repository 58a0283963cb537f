"""Builders shared by the affect tests: a settable clock, call contexts, states and events."""

from __future__ import annotations

from typing import Any

from ratatoskr.core.context import CallContext

T1 = {"tenant": "t1"}
T2 = {"tenant": "t2"}


class FakeClock:
    """A clock the test moves by hand, so expiry is tested without sleeping."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def ctx(scope: dict[str, str] | None = None, actor: str = "worldtree") -> CallContext:
    return CallContext(actor=actor, scope=scope or {})


def state(sid: str, scope: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": sid, "scope": T1 if scope is None else scope, "mood": "calm", **extra}


def event(eid: str, at: str, scope: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": eid, "at": at, "scope": T1 if scope is None else scope, "kind": "joy", **extra}


def put(store: Any, records: list[dict[str, Any]], key: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("ctx", ctx())
    result: dict[str, Any] = store.put_many(records, idempotency_key=key, **kw)
    return result


def append(store: Any, events: list[dict[str, Any]], key: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("ctx", ctx())
    result: dict[str, Any] = store.append_events(events, idempotency_key=key, **kw)
    return result


def walk(read: Any, key: str, **kw: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Follow cursors to the end; returns every item and every cursor handed out."""
    items: list[dict[str, Any]] = []
    cursors: list[str] = []
    cursor = None
    while True:
        page = read(cursor=cursor, **kw)
        items.extend(page[key])
        cursor = page["next_cursor"]
        if cursor is None:
            return items, cursors
        cursors.append(cursor)
