"""Parity: the SQLite store and the reference store answer every sequence of calls alike.

The contract's ``parity_vs_reference`` cases are scripted below; the state machine then
drives random sequences (upserts with replays, conflicts, stale revisions and injected
records; deletes; gets; searches with random scope_all/scope_any under random token scopes;
idempotency expiry; reopening the file) and requires the same ids in the same order, scores
within 1e-5, the same records and revisions, and the same errors.
"""

from __future__ import annotations

import shutil
import tempfile
from functools import partial
from pathlib import Path
from typing import Any, cast

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import BifrostError, RevisionMismatch
from ratatoskr.memory.reference import ReferenceMemoryStore
from tests.backends import BACKENDS, Backend, selected
from tests.memory.helpers import CTX, DIM, chunk, vec

PDIM = 4
IDS = [f"c{i}" for i in range(8)]
KEYS = [f"k{i}" for i in range(4)]
AXIS_VALUES = {
    "tenant": ["t1", "t2"],
    "group": ["g1"],
    "end_user": ["u1", "u2", "u3"],
    "agent_self": ["a1", "a2"],
}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except RevisionMismatch as exc:
        return ("RevisionMismatch", exc.mismatches)
    except BifrostError as exc:
        return (type(exc).__name__, None)


def assert_same_hits(ours: list[dict[str, Any]], ref: list[dict[str, Any]]) -> None:
    assert [h["chunk_id"] for h in ours] == [h["chunk_id"] for h in ref]
    for a, b in zip(ours, ref, strict=True):
        assert abs(a["score"] - b["score"]) <= 1e-5
        assert a["chunk"] == b["chunk"] and a["recalled_view"] == b["recalled_view"]
        assert a["revision"] == b["revision"]


def same(ours: tuple[str, Any], ref: tuple[str, Any]) -> None:
    assert ours[0] == ref[0], (ours, ref)
    if ours[0] == "ok" and isinstance(ours[1], list) and ours[1] and "score" in ours[1][0]:
        assert_same_hits(ours[1], ref[1])
    else:
        assert ours == ref


# -- scripted parity_vs_reference cases of the contract --------------------------------------


def both(backend: Backend, tmp_path: Path) -> tuple[Any, Any]:
    ours = backend.memory(backend.fresh(tmp_path, "memory"), embedding_dim=DIM)
    return ours, ReferenceMemoryStore(DIM)


def test_parity_vs_reference_upsert_many(backend: Backend, tmp_path: Path) -> None:
    ours, ref = both(backend, tmp_path)
    script = [
        ([chunk("a", vec(1)), chunk("b", vec(0, 1))], "k1", None),
        ([chunk("a", vec(1)), chunk("b", vec(0, 1))], "k1", None),  # replay
        ([chunk("a", vec(2))], "k1", None),  # conflict
        ([chunk("a", vec(2))], "k2", {"a": 5}),  # stale
        ([chunk("a", vec(2))], "k3", {"a": 1}),
        ([chunk("x", vec(1), origin="injected_context")], "k4", None),  # INV-007
    ]
    for records, key, expected in script:
        kwargs: dict[str, Any] = {
            "idempotency_key": key,
            "ctx": CTX,
            "expected_revisions": expected,
        }
        same(
            outcome(partial(ours.upsert_many, records, **kwargs)),
            outcome(partial(ref.upsert_many, records, **kwargs)),
        )
    assert ours.get_many(["a", "b", "x"]) == ref.get_many(["a", "b", "x"])
    ours.close()


def test_parity_vs_reference_search(backend: Backend, tmp_path: Path) -> None:
    ours, ref = both(backend, tmp_path)
    records = [
        chunk(
            f"c{i}",
            vec(i % 3, 1, (i * 7) % 5),
            scope={"tenant": f"t{i % 2}", "end_user": f"u{i % 4}"},
        )
        for i in range(40)
    ]
    records += [chunk("dup1", vec(1, 1)), chunk("dup0", vec(1, 1)), chunk("dup2", vec(2, 2))]
    for s in (ours, ref):
        s.upsert_many(records, idempotency_key="load", ctx=CTX)
    queries: list[dict[str, Any]] = [
        {},
        {"scope_all": {"tenant": "t1"}},
        {"scope_any": [{"end_user": "u1"}, {"end_user": "u2"}]},
        {"scope_all": {"tenant": "t0"}, "scope_any": [{"end_user": "u2"}, {"end_user": "u3"}]},
        {"scope_any": [{}]},
    ]
    for filt in queries:
        for top_k in (1, 3, 10, 50):
            same(
                outcome(partial(ours.search, vec(1, 1), top_k=top_k, **filt)),
                outcome(partial(ref.search, vec(1, 1), top_k=top_k, **filt)),
            )
    ours.close()


# -- the state machine -----------------------------------------------------------------------

vectors = st.lists(st.integers(-2, 2), min_size=PDIM, max_size=PDIM).map(
    lambda xs: [float(x) for x in xs]
)
scopes = st.fixed_dictionaries(
    {}, optional={axis: st.sampled_from(values) for axis, values in AXIS_VALUES.items()}
)
token_scopes: st.SearchStrategy[dict[str, str]] = st.one_of(
    st.just({}), st.fixed_dictionaries({"tenant": st.sampled_from(AXIS_VALUES["tenant"])})
)


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": draw(st.sampled_from(IDS)),
        "embedding": draw(vectors),
        "scope": draw(scopes),
        "distillate": draw(st.sampled_from(["", "x", "note ü"])),
    }
    origin = draw(st.sampled_from([None, "observed", "injected_context"]))
    if origin is not None:
        record["origin"] = origin
    if draw(st.booleans()) if origin == "injected_context" else draw(st.integers(0, 9)) == 0:
        record["injection_source"] = "tool"
    return record


class MemoryParity(RuleBasedStateMachine):
    """Drives the store with its search mirror on (the default)."""

    mirror_bytes: int | None = None
    backend: Backend = BACKENDS["sqlite"]

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="parity-")
        self.path = self.backend.fresh(Path(self.dir), "memory")
        self.clock = Clock()
        self.ours = self.open()
        self.ref = ReferenceMemoryStore(PDIM, clock=self.clock)

    def both(self, call: Any) -> tuple[str, Any]:
        ours, ref = outcome(lambda: call(self.ours)), outcome(lambda: call(self.ref))
        same(ours, ref)
        return ours

    @rule(
        batch=st.lists(records(), min_size=1, max_size=4),
        key=st.sampled_from(KEYS),
        actor=st.sampled_from(["w1", "w2"]),
        token=token_scopes,
        lock=st.sampled_from(["none", "batch", "stray"]),
        revisions=st.lists(st.integers(0, 3), min_size=4, max_size=4),
        klass=st.sampled_from([None, "default", "ephemeral", "durable", "bogus"]),
        conform=st.booleans(),
    )
    def upsert(
        self,
        batch: list[dict[str, Any]],
        key: str,
        actor: str,
        token: dict[str, str],
        lock: str,
        revisions: list[int],
        klass: str | None,
        conform: bool,
    ) -> None:
        ctx = CallContext(actor=actor, scope=token)
        if conform:  # most real writes stay inside their token's scope
            batch = [{**r, "scope": {**r["scope"], **token}} for r in batch]
        expected: dict[str, int] | None = None
        if lock == "batch":  # guesses at the batch's own revisions: some right, some stale
            expected = {r["id"]: rev for r, rev in zip(batch, revisions, strict=False)}
        elif lock == "stray":  # names an id that is not in the batch: invalid
            expected = {"stray": revisions[0]}
        self.both(
            lambda s: s.upsert_many(
                batch,
                idempotency_key=key,
                ctx=ctx,
                expected_revisions=expected,
                idempotency_class=klass,
            )
        )

    @rule(ids=st.lists(st.sampled_from(IDS), min_size=1, max_size=4), token=token_scopes)
    def delete(self, ids: list[str], token: dict[str, str]) -> None:
        self.both(lambda s: s.delete_many(ids, ctx=CallContext(actor="w1", scope=token)))

    @rule(ids=st.lists(st.sampled_from(IDS + ["nope"]), min_size=1, max_size=5), token=token_scopes)
    def get_many(self, ids: list[str], token: dict[str, str]) -> None:
        ctx = CallContext(actor="w1", scope=token)
        self.both(lambda s: s.get_many(ids, ctx=ctx))
        self.both(lambda s: s.get(ids[0], ctx=ctx))

    @rule(
        query=vectors,
        top_k=st.integers(1, 6),
        scope_all=scopes,
        scope_any=st.lists(scopes, max_size=3),
        token=token_scopes,
        drop_embedding=st.booleans(),
    )
    def search(
        self,
        query: list[float],
        top_k: int,
        scope_all: dict[str, str],
        scope_any: list[dict[str, str]],
        token: dict[str, str],
        drop_embedding: bool,
    ) -> None:
        ctx = CallContext(actor="w1", scope=token)
        include = {"embedding": False} if drop_embedding else None
        self.both(
            lambda s: s.search(
                query,
                top_k=top_k,
                scope_all=scope_all,
                scope_any=scope_any,
                include=include,
                ctx=ctx,
            )
        )

    @rule(seconds=st.sampled_from([60.0, 11 * 60.0, 25 * 3600.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds

    @rule()
    def reopen(self) -> None:
        self.ours.close()
        self.ours = self.open()

    def open(self) -> Any:
        return self.backend.memory(
            self.path, embedding_dim=PDIM, clock=self.clock, mirror_bytes=self.mirror_bytes
        )

    @invariant()
    def same_contents(self) -> None:
        assert self.ours.get_many(IDS) == self.ref.get_many(IDS)

    def teardown(self) -> None:
        self.ours.close()
        shutil.rmtree(self.dir, ignore_errors=True)


DEFAULT_SETTINGS = settings.default
assert DEFAULT_SETTINGS is not None  # hypothesis loads its profile on import
PARITY_SETTINGS = settings(
    DEFAULT_SETTINGS, max_examples=max(200, DEFAULT_SETTINGS.max_examples), stateful_step_count=25
)


def _machines() -> dict[str, Any]:
    """One state machine per backend, with the search mirror on and (the SQL path) off."""
    out: dict[str, Any] = {}
    for name in selected():
        variants = (("", None), ("_sql_search", 0)) if BACKENDS[name].has_mirror else (("", None),)
        for suffix, mirror in variants:
            machine = cast(
                type[MemoryParity],
                type(
                    f"MemoryParity_{name}{suffix}",
                    (MemoryParity,),
                    {"backend": BACKENDS[name], "mirror_bytes": mirror},
                ),
            )
            machine.TestCase.settings = PARITY_SETTINGS
            out[f"test_memory_parity_state_machine{suffix}_{name}"] = machine.TestCase
    return out


globals().update(_machines())
