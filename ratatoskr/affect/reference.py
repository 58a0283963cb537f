"""The reference affect store: the same verbs and rules in plain Python, held in memory.

It is the oracle of the affect parity suite. It shares the argument rules (``affect.rules``)
and the cursor format (``core.cursors``) with the stores and nothing else: no SQL, every
read a sort and a filter over every item. Given a store's cursor secret it hands out
byte-identical cursors, so the two can be compared whole, on every backend.
"""

from __future__ import annotations

import copy
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ratatoskr.affect import rules
from ratatoskr.affect.calls import AffectCalls
from ratatoskr.core import reference_records
from ratatoskr.core.context import CallContext
from ratatoskr.core.cursors import SECRET_BYTES, CursorCodec, SortKey, make_walk, open_walk
from ratatoskr.core.errors import (
    EventConflict,
    IdempotencyConflict,
    RevisionMismatch,
    ScopeForbidden,
)
from ratatoskr.core.idempotency import CLASS_TTL_SECONDS, idempotency_id
from ratatoskr.core.scope import contains, matches


@dataclass
class _State:
    record: dict[str, Any]
    scope: dict[str, str]
    revision: int


@dataclass(frozen=True)
class _Entry:
    digest: str
    expires_at: float
    ids: list[str]


class ReferenceAffectStore(AffectCalls):
    """In-memory affect plane with exactly the rules of ``RatatoskrAffectStore``."""

    def __init__(
        self, *, clock: Callable[[], float] = time.time, secret: bytes | None = None
    ) -> None:
        self.clock = clock
        self.cursors = CursorCodec(secret or secrets.token_bytes(SECRET_BYTES))
        self.states: dict[str, _State] = {}
        self.events: dict[str, rules.Item] = {}
        self.idempotency: dict[str, _Entry] = {}

    def describe_store(self) -> dict[str, Any]:
        return {**rules.CAPABILITIES, "filterable_metadata_fields": []}

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "reason": None}

    # -- states ------------------------------------------------------------------------

    def put_parsed(self, call: rules.PutCall, ctx: CallContext) -> dict[str, Any]:
        iid = idempotency_id("put_many", ctx.actor, call.idempotency_key)
        now = self.clock()
        if self._replay(iid, call.digest, now) is not None:
            return {"written": len(call.states), "replayed": True}
        for item in call.states:
            stored = self.states.get(item.id)
            if stored is not None and not contains(stored.scope, ctx.scope):
                raise ScopeForbidden(f"record {item.id} exists outside the token scope")
        if call.expected_revisions is not None:
            mismatches = [
                {"id": sid, "expected": rev, "actual": self._revision(sid)}
                for sid, rev in call.expected_revisions.items()
                if self._revision(sid) != rev
            ]
            if mismatches:
                raise RevisionMismatch(mismatches)
        for item in call.states:
            self.states[item.id] = _State(
                copy.deepcopy(item.record), dict(item.scope), self._revision(item.id) + 1
            )
        self._remember(iid, call.digest, call.idempotency_class, [s.id for s in call.states], now)
        return {"written": len(call.states), "replayed": False}

    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]:
        return reference_records.delete_many(self.states, ids, ctx)

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        return reference_records.get_many(self.states, ids, ctx)

    def list_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        tag = rules.cursor_tag("list", call)
        after = ""  # every id is longer than the empty string
        end: SortKey | None = None
        if call.cursor is not None:
            key, end = open_walk(self.cursors, call.cursor, tag, (str,))
            after = str(key[0])
        admitted = sorted(
            sid
            for sid, s in self.states.items()
            if matches(s.scope, call.scope_all, call.scope_any) and sid > after
        )
        if end is None and admitted:
            end = (admitted[-1],)
        if end is not None:
            admitted = [sid for sid in admitted if sid <= str(end[0])]
        page = admitted[: call.limit]
        more = len(admitted) > call.limit and end is not None
        return {
            "records": [
                rules.with_revision(copy.deepcopy(self.states[s].record), self.states[s].revision)
                for s in page
            ],
            "next_cursor": (
                make_walk(self.cursors, tag, (page[-1],), end) if more and end is not None else None
            ),
        }

    # -- events ------------------------------------------------------------------------

    def append_parsed(self, call: rules.AppendCall, ctx: CallContext) -> dict[str, Any]:
        iid = idempotency_id("append_events", ctx.actor, call.idempotency_key)
        now = self.clock()
        replayed = self._replay(iid, call.digest, now)
        if replayed is not None:
            return {"appended": len(replayed.ids), "replayed": True}
        for item in call.events:
            stored = self.events.get(item.id)
            if stored is not None and not contains(stored.scope, ctx.scope):
                raise ScopeForbidden(f"event {item.id} exists outside the token scope")
        conflicts = [
            e.id
            for e in call.events
            if e.id in self.events and not rules.events_equal(self.events[e.id].record_json, e)
        ]
        if conflicts:
            raise EventConflict(
                f"{len(conflicts)} event id(s) already hold another event: "
                + ", ".join(conflicts[:10]),
                details={"ids": conflicts},
            )
        fresh = [e for e in call.events if e.id not in self.events]
        for item in fresh:
            self.events[item.id] = rules.Item(
                item.id, dict(item.scope), copy.deepcopy(item.record), item.record_json, item.at_us
            )
        self._remember(iid, call.digest, call.idempotency_class, [e.id for e in fresh], now)
        return {"appended": len(fresh), "replayed": False}

    def read_events_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        tag = rules.cursor_tag("read_events", call)
        keyed = sorted(
            ((e.at_us or 0, e.id) for e in self._admitted_events(call)),
            reverse=call.descending,
        )

        def past(k: tuple[int, str], pivot: tuple[int, str]) -> bool:
            return k < pivot if call.descending else k > pivot

        end: SortKey | None = None
        if call.cursor is not None:
            key, end = open_walk(
                self.cursors, call.cursor, tag, (int, str), descending=call.descending
            )
            keyed = [k for k in keyed if past(k, (int(key[0]), str(key[1])))]
        if end is None and keyed:
            end = keyed[-1]
        if end is not None:
            last = (int(end[0]), str(end[1]))
            keyed = [k for k in keyed if not past(k, last)]
        page = keyed[: call.limit]
        more = len(keyed) > call.limit and end is not None
        return {
            "events": [copy.deepcopy(self.events[i].record) for _, i in page],
            "next_cursor": (
                make_walk(self.cursors, tag, page[-1], end, descending=call.descending)
                if more and end is not None
                else None
            ),
        }

    # -- internals -------------------------------------------------------------------

    def _admitted_events(self, call: rules.ListCall) -> Iterable[rules.Item]:
        for event in self.events.values():
            at = event.at_us or 0
            if not matches(event.scope, call.scope_all, call.scope_any):
                continue
            if call.since_us is not None and at < call.since_us:
                continue
            if call.until_us is not None and at >= call.until_us:
                continue
            yield event

    def _replay(self, iid: str, digest: str, now: float) -> _Entry | None:
        """The live entry of a replay; ``IdempotencyConflict`` for a reused key."""
        entry = self.idempotency.get(iid)
        if entry is None or entry.expires_at <= now:
            return None
        if entry.digest != digest:
            raise IdempotencyConflict("idempotency_key was already used with a different payload")
        return entry

    def _remember(self, iid: str, digest: str, klass: str, ids: list[str], now: float) -> None:
        self.idempotency[iid] = _Entry(digest, now + CLASS_TTL_SECONDS[klass], ids)

    def _revision(self, state_id: str) -> int:
        stored = self.states.get(state_id)
        return stored.revision if stored else 0

    def close(self) -> None:
        pass
