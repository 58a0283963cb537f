"""Parity: the SQLite affect store and the reference store answer every call sequence alike.

A hypothesis state machine drives random puts (replays, key conflicts, stale revisions,
foreign scopes), deletes, gets, paged lists, appends (equal re-appends, conflicts), paged
event reads with random filters, time windows and order, under random token scopes, with
the clock moving across idempotency lifetimes. Both stores share the cursor secret, so
their answers (cursors included) must be equal, and so must their error types.
"""

from __future__ import annotations

import builtins
import shutil
import tempfile
from pathlib import Path
from typing import Any, cast

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ratatoskr.affect.reference import ReferenceAffectStore
from ratatoskr.core.errors import BifrostError, RevisionMismatch
from tests.affect.helpers import FakeClock, ctx
from tests.backends import BACKENDS, Backend, selected_for_affect

IDS = ["a", "b", "c", "d", "A", "é", "a b"]
KEYS = ["k1", "k2", "k3"]
ACTORS = ["w1", "w2"]
SCOPES = [
    {},
    {"tenant": "t1"},
    {"tenant": "t1", "end_user": "u1"},
    {"tenant": "t1", "end_user": "u2", "agent_self": "s"},
    {"tenant": "t2", "end_user": "u1"},
    {"end_user": "u1"},
]
TOKENS = [{}, {}, {"tenant": "t1"}, {"tenant": "t2"}]
# several spellings of the same instants, so ties on ``at`` are common
ATS = [
    "2026-01-01T00:00:00Z",
    "2026-01-01T01:00:00+01:00",
    "2025-12-31T19:00:00-05:00",
    "2026-01-01T00:00:00.000001Z",
    "2026-01-01T00:00:00.5Z",
    "2025-06-01T12:00:00+00:00",
    "2027-01-01T00:00:00Z",
]
PAYLOADS = [{"kind": "joy"}, {"kind": "fear", "v": [1, 2.5]}, {"n": 1}, {"n": 1.0}]

scopes = st.sampled_from(SCOPES)
tokens = st.sampled_from(TOKENS)
filters = st.fixed_dictionaries(
    {},
    optional={
        "scope_all": st.sampled_from([{}, {"tenant": "t1"}, {"end_user": "u1"}]),
        "scope_any": st.lists(st.sampled_from(SCOPES), max_size=2),
    },
)
records = st.lists(
    st.builds(
        lambda i, s, p: {"id": i, "scope": s, **p},
        st.sampled_from(IDS),
        scopes,
        st.sampled_from(PAYLOADS),
    ),
    min_size=1,
    max_size=4,
)
events = st.lists(
    st.builds(
        lambda i, s, at, p: {"id": i, "scope": s, "at": at, **p},
        st.sampled_from(IDS),
        st.sampled_from(SCOPES[:3]),
        st.sampled_from(ATS),
        st.sampled_from(PAYLOADS[:2]),
    ),
    min_size=1,
    max_size=4,
)


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except RevisionMismatch as exc:
        return ("RevisionMismatch", exc.mismatches)
    except BifrostError as exc:
        return (type(exc).__name__, exc.details)


class AffectParity(RuleBasedStateMachine):
    backend: Backend = BACKENDS["sqlite"]

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="affect-parity-")
        self.clock = FakeClock()
        self.ours = self.backend.affect(
            self.backend.fresh(Path(self.dir), "affect"), clock=self.clock
        )
        self.ref = ReferenceAffectStore(
            clock=self.clock, secret=self.backend.cursor_secret(self.ours)
        )
        self.open_pages: list[tuple[str, dict[str, Any], str]] = []

    def both(self, method: str, *args: Any, **kwargs: Any) -> tuple[str, Any]:
        ours = outcome(lambda: getattr(self.ours, method)(*args, **kwargs))
        ref = outcome(lambda: getattr(self.ref, method)(*args, **kwargs))
        assert ours == ref, (method, args, kwargs, ours, ref)
        return ours

    def page(self, method: str, kwargs: dict[str, Any], walk: bool) -> None:
        """One page; then either follow to the end, or park the cursor for a later rule."""
        result = self.both(method, **kwargs)
        while result[0] == "ok" and result[1]["next_cursor"] is not None:
            cursor = result[1]["next_cursor"]
            if not walk:
                self.open_pages.append((method, kwargs, cursor))
                return
            result = self.both(method, **{**kwargs, "cursor": cursor})

    @initialize(seed=records)
    def seed(self, seed: list[dict[str, Any]]) -> None:
        unique = list({r["id"]: r for r in seed}.values())
        self.both("put_many", unique, idempotency_key="seed", ctx=ctx())

    @rule(
        batch=records,
        key=st.sampled_from(KEYS),
        actor=st.sampled_from(ACTORS),
        token=tokens,
        expected=st.none() | st.dictionaries(st.sampled_from(IDS), st.integers(0, 3), max_size=2),
        klass=st.sampled_from([None, "ephemeral", "durable", "default", "bogus"]),
    )
    def put_many(
        self,
        batch: list[dict[str, Any]],
        key: str,
        actor: str,
        token: dict[str, str],
        expected: dict[str, int] | None,
        klass: str | None,
    ) -> None:
        if expected is not None:
            ids = {r["id"] for r in batch}
            expected = {k: v for k, v in expected.items() if k in ids} or None
        self.both(
            "put_many",
            batch,
            idempotency_key=key,
            ctx=ctx(token, actor),
            expected_revisions=expected,
            idempotency_class=klass,
        )

    @rule(ids=st.lists(st.sampled_from(IDS + ["zz"]), min_size=0, max_size=4), token=tokens)
    def delete_many(self, ids: list[str], token: dict[str, str]) -> None:
        self.both("delete_many", ids, ctx=ctx(token))

    @rule(ids=st.lists(st.sampled_from(IDS + ["zz"]), min_size=1, max_size=5), token=tokens)
    def get_many(self, ids: list[str], token: dict[str, str]) -> None:
        self.both("get_many", ids, ctx=ctx(token))
        self.both("get", ids[0], ctx=ctx(token))

    @rule(f=filters, limit=st.integers(0, 4), token=tokens, walk=st.booleans())
    def list(self, f: dict[str, Any], limit: int, token: dict[str, str], walk: bool) -> None:
        self.page("list", {**f, "limit": limit, "ctx": ctx(token)}, walk)

    @rule(
        batch=events,
        key=st.sampled_from(KEYS),
        actor=st.sampled_from(ACTORS),
        token=tokens,
        klass=st.sampled_from([None, "ephemeral"]),
    )
    def append_events(
        self,
        batch: builtins.list[dict[str, Any]],  # ``list`` here is the rule above
        key: str,
        actor: str,
        token: dict[str, str],
        klass: str | None,
    ) -> None:
        self.both(
            "append_events",
            batch,
            idempotency_key=key,
            ctx=ctx(token, actor),
            idempotency_class=klass,
        )

    @rule(
        f=filters,
        since=st.none() | st.sampled_from(ATS),
        until=st.none() | st.sampled_from(ATS),
        order=st.sampled_from([None, "asc", "desc"]),
        limit=st.integers(1, 4),
        token=tokens,
        walk=st.booleans(),
    )
    def read_events(
        self,
        f: dict[str, Any],
        since: str | None,
        until: str | None,
        order: str | None,
        limit: int,
        token: dict[str, str],
        walk: bool,
    ) -> None:
        kwargs = {**f, "since": since, "until": until, "order": order, "limit": limit}
        self.page("read_events", {**kwargs, "ctx": ctx(token)}, walk)

    @precondition(lambda self: bool(self.open_pages))
    @rule(data=st.data(), tamper=st.booleans(), other_filter=st.booleans())
    def continue_page(self, data: st.DataObject, tamper: bool, other_filter: bool) -> None:
        """Resume a parked walk after other calls wrote (or abuse its cursor)."""
        index = data.draw(st.integers(0, len(self.open_pages) - 1))
        method, kwargs, cursor = self.open_pages.pop(index)
        if tamper:
            cursor = cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB")
        if other_filter:
            kwargs = {**kwargs, "scope_all": {"tenant": "t2"}}
        self.page(method, {**kwargs, "cursor": cursor}, walk=True)

    @rule(seconds=st.sampled_from([1, 599, 600, 3600, 86_400]))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)

    def teardown(self) -> None:
        # the last word: both stores hold the same states and the same event log
        self.page("list", {"limit": 500}, walk=True)
        self.page("read_events", {"limit": 1000}, walk=True)
        self.ours.close()
        shutil.rmtree(self.dir, ignore_errors=True)


DEFAULT_SETTINGS = settings.default
assert DEFAULT_SETTINGS is not None  # hypothesis loads its profile on import
PARITY_SETTINGS = settings(
    DEFAULT_SETTINGS, max_examples=max(200, DEFAULT_SETTINGS.max_examples), stateful_step_count=30
)


def _machines() -> dict[str, Any]:
    """One state machine per backend."""
    out: dict[str, Any] = {}
    for name in selected_for_affect():
        machine = cast(
            type[AffectParity],
            type(f"AffectParity_{name}", (AffectParity,), {"backend": BACKENDS[name]}),
        )
        machine.TestCase.settings = PARITY_SETTINGS
        out[f"test_affect_parity_state_machine_{name}"] = machine.TestCase
    return out


globals().update(_machines())
