"""The pins of the memory contract: limits, record rules, digest and classes, include,
confinement by the token scope. Every bad input raises before storage is touched and its
message names fields and ids, never values."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import (
    IdempotencyConflict,
    InvalidArguments,
    InvalidFilter,
    ScopeForbidden,
)
from ratatoskr.provider.memory_store import RatatoskrMemoryStore
from ratatoskr.sqlite.health import DURABILITY
from tests.backends import Backend
from tests.memory.helpers import CTX, DIM, chunk, loaded, vec

SECRET = "SECRET-MARKER-93f1"


class Clock:
    now = 5_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(backend: Backend, tmp_path: Path) -> Iterator[RatatoskrMemoryStore]:
    s = backend.memory(backend.fresh(tmp_path, "memory"), embedding_dim=DIM, clock=Clock())
    yield s
    s.close()


@pytest.fixture
def total_rows(backend: Backend) -> Callable[[Any], int]:
    """Every row a store keeps, in all its tables."""
    return lambda s: sum(backend.footprint(s).values())


BAD_RECORDS: list[tuple[str, Any, type[Exception]]] = [
    ("not a list", {"id": "a"}, InvalidArguments),
    ("empty list", [], InvalidArguments),
    ("too many", [chunk(f"c{i}", vec(1)) for i in range(1001)], InvalidArguments),
    ("record not an object", [SECRET], InvalidArguments),
    ("no id", [{"embedding": vec(1), "note": SECRET}], InvalidArguments),
    ("empty id", [chunk("", vec(1))], InvalidArguments),
    ("id too long", [chunk("x" * 513, vec(1))], InvalidArguments),
    ("id not a string", [{"id": 7, "embedding": vec(1)}], InvalidArguments),
    ("no embedding", [{"id": "a", "distillate": SECRET}], InvalidArguments),
    ("short vector", [chunk("a", [1.0, 2.0])], InvalidArguments),
    ("boolean in vector", [chunk("a", [True] + [0.0] * (DIM - 1))], InvalidArguments),
    ("string in vector", [chunk("a", ["1"] + [0.0] * (DIM - 1))], InvalidArguments),
    (
        "boolean among floats, second record",
        [chunk("a", vec(1)), chunk("b", [0.5, False] + [0.25] * (DIM - 2))],
        InvalidArguments,
    ),
    ("None in vector", [chunk("a", [None] + [0.5] * (DIM - 1))], InvalidArguments),
    ("list in vector", [chunk("a", [[0.5]] + [0.5] * (DIM - 1))], InvalidArguments),
    ("nan in vector", [chunk("a", [float("nan")] + [1.0] * (DIM - 1))], InvalidArguments),
    ("inf in vector", [chunk("a", [float("inf")] + [1.0] * (DIM - 1))], InvalidArguments),
    ("beyond float32", [chunk("a", [1e39] + [1.0] * (DIM - 1))], InvalidArguments),
    ("all zero vector", [chunk("a", [0.0] * DIM)], InvalidArguments),
    ("scope not object", [chunk("a", vec(1), scope=[SECRET])], InvalidArguments),
    ("scope off lattice", [chunk("a", vec(1), scope={"planet": SECRET})], InvalidFilter),
    ("scope empty value", [chunk("a", vec(1), scope={"tenant": ""})], InvalidArguments),
    ("scope long value", [chunk("a", vec(1), scope={"tenant": "x" * 257})], InvalidArguments),
    ("duplicate ids", [chunk("a", vec(1)), chunk("a", vec(0, 1))], InvalidArguments),
    ("nan in payload", [chunk("a", vec(1), metadata={"w": float("nan")})], InvalidArguments),
    ("lone surrogate", [chunk("a", vec(1), distillate="\ud800" + SECRET)], InvalidArguments),
    ("huge integer", [chunk("a", vec(1), metadata={"n": 2**70})], InvalidArguments),
    ("origin not string", [chunk("a", vec(1), origin=3)], InvalidArguments),
]


@pytest.mark.parametrize(("case", "records", "error"), BAD_RECORDS, ids=[c[0] for c in BAD_RECORDS])
def test_bad_records_touch_nothing(
    store: RatatoskrMemoryStore,
    total_rows: Callable[[Any], int],
    case: str,
    records: Any,
    error: type[Exception],
) -> None:
    store.upsert_many([chunk("keep", vec(1))], idempotency_key="first", ctx=CTX)
    before = total_rows(store)
    with pytest.raises(error) as err:
        store.upsert_many(records, idempotency_key="k", ctx=CTX)
    assert SECRET not in str(err.value) and "nan," not in str(err.value).lower()
    assert total_rows(store) == before


@pytest.mark.parametrize(
    ("key", "klass", "expected"),
    [
        ("", None, None),
        ("k" * 257, None, None),
        (5, None, None),
        ("k", "forever", None),
        ("k", None, {"a": -1}),
        ("k", None, {"a": True}),
        ("k", None, {"other": 1}),
        ("k", None, ["a"]),
    ],
)
def test_bad_call_fields(
    store: RatatoskrMemoryStore,
    total_rows: Callable[[Any], int],
    key: Any,
    klass: Any,
    expected: Any,
) -> None:
    with pytest.raises(InvalidArguments):
        store.upsert_many(
            [chunk("a", vec(1))],
            idempotency_key=key,
            ctx=CTX,
            idempotency_class=klass,
            expected_revisions=expected,
        )
    assert total_rows(store) == 0


def test_id_falls_back_to_chunk_id_then_memory_id(store: RatatoskrMemoryStore) -> None:
    records = [
        {"chunk_id": "by-chunk-id", "vector": vec(1)},
        {"memory_id": "by-memory-id", "embedding": vec(0, 1)},
    ]
    store.upsert_many(records, idempotency_key="k", ctx=CTX)
    assert store.get("by-chunk-id") == {**records[0], "revision": 1}
    assert store.get("by-memory-id") == {**records[1], "revision": 1}
    assert [h["chunk_id"] for h in store.search(vec(1), top_k=1)] == ["by-chunk-id"]


def test_idempotency_is_per_actor(store: RatatoskrMemoryStore) -> None:
    store.upsert_many([chunk("a", vec(1))], idempotency_key="k", ctx=CTX)
    other = CallContext(actor="someone-else")
    assert store.upsert_many([chunk("a", vec(2))], idempotency_key="k", ctx=other) == {
        "upserted": 1,
        "replayed": False,
    }
    record = store.get("a")
    assert record is not None and record["revision"] == 2


@pytest.mark.parametrize(
    ("klass", "alive", "dead"),
    [
        ("ephemeral", 9 * 60, 11 * 60),
        (None, 23 * 3600, 25 * 3600),
        ("durable", 29 * 86400, 31 * 86400),
    ],
)
def test_idempotency_class_sets_expiry(
    store: RatatoskrMemoryStore, klass: str | None, alive: float, dead: float
) -> None:
    clock: Any = store.clock
    start = clock.now
    store.upsert_many([chunk("a", vec(1))], idempotency_key="k", ctx=CTX, idempotency_class=klass)
    clock.now = start + alive
    with pytest.raises(IdempotencyConflict):
        store.upsert_many([chunk("a", vec(2))], idempotency_key="k", ctx=CTX)
    clock.now = start + dead  # expired: the key counts as absent
    assert (
        store.upsert_many([chunk("a", vec(2))], idempotency_key="k", ctx=CTX)["replayed"] is False
    )
    record = store.get("a")
    assert record is not None and record["revision"] == 2


def test_digest_ignores_key_order(store: RatatoskrMemoryStore) -> None:
    store.upsert_many(
        [{"id": "a", "embedding": vec(1), "x": 1, "y": 2}], idempotency_key="k", ctx=CTX
    )
    again = store.upsert_many(
        [{"y": 2, "x": 1, "embedding": vec(1), "id": "a"}], idempotency_key="k", ctx=CTX
    )
    assert again["replayed"] is True


def test_empty_expected_revisions_is_the_same_payload_as_none(
    store: RatatoskrMemoryStore,
) -> None:
    """The digest holds ``expected_revisions or null``: ``{}`` and no value are one payload,
    in the float form of the digest and in the pinned one (an integer in a vector)."""
    for key, vector in (("floats", vec(1)), ("pinned", [1] + [0] * (DIM - 1))):
        records = [chunk(f"{key}-a", vector)]
        store.upsert_many(records, idempotency_key=key, ctx=CTX)
        again = store.upsert_many(records, idempotency_key=key, ctx=CTX, expected_revisions={})
        assert again == {"upserted": 1, "replayed": True}
        other = [chunk(f"{key}-b", vector)]
        store.upsert_many(other, idempotency_key=f"{key}-2", ctx=CTX, expected_revisions={})
        assert store.upsert_many(other, idempotency_key=f"{key}-2", ctx=CTX)["replayed"] is True
        assert store.get(f"{key}-a")["revision"] == 1  # type: ignore[index]


def test_search_argument_pins(store: RatatoskrMemoryStore) -> None:
    bad: list[dict[str, Any]] = [
        {"top_k": 0},
        {"top_k": 1001},
        {"top_k": True},
        {"top_k": 2.0},
        {"include": {"embedding": "no"}},
        {"include": {"text": True}},
        {"fidelity_target": 0},
        {"fidelity_target": 1.5},
        {"scope_any": [{"tenant": "t"}] * 65},
        {"scope_any": ["tenant"]},
        {"scope_all": []},
    ]
    for args in bad:
        with pytest.raises(InvalidArguments):
            store.search(vec(1), **{"top_k": 5, **args})
    for vector in ([1.0], [0.0] * DIM, [float("nan")] * DIM):
        with pytest.raises(InvalidArguments):
            store.search(vector, top_k=5)
    assert store.search(vec(1), top_k=5, fidelity_target=1, include={"embedding": True}) == []


@pytest.mark.parametrize("include", [[], True, "embedding", 0])
def test_include_that_is_not_an_object_is_named_so(
    store: RatatoskrMemoryStore, include: Any
) -> None:
    with pytest.raises(InvalidArguments, match="^include must be null or an object$"):
        store.search(vec(1), top_k=5, include=include)


def test_include_embedding_false_drops_the_vector(store: RatatoskrMemoryStore) -> None:
    store.upsert_many(
        [chunk("a", vec(1)), {"id": "b", "vector": vec(0.5, 1)}], idempotency_key="k", ctx=CTX
    )
    hits = store.search(vec(1), top_k=5, include={"embedding": False})
    assert hits[0]["chunk"] == {"id": "a", "distillate": "about a"}
    assert hits[1]["chunk"] == {"id": "b"} and hits[1]["recalled_view"] == {"id": "b"}


def test_score_is_cosine_and_ties_order_by_id(store: RatatoskrMemoryStore) -> None:
    store.upsert_many(
        [
            chunk("z", vec(2, 0)),
            chunk("m", vec(1, 0)),
            chunk("a", vec(0, 3)),
            chunk("b", vec(-1, 0)),
        ],
        idempotency_key="k",
        ctx=CTX,
    )
    hits = store.search(vec(1, 0), top_k=4)
    assert [h["chunk_id"] for h in hits] == ["m", "z", "a", "b"]
    assert [round(h["score"], 6) for h in hits] == [1.0, 1.0, 0.0, -1.0]


def test_scores_stay_within_one_whatever_the_query_scale(store: RatatoskrMemoryStore) -> None:
    """Rounding can carry the cosine of two parallel vectors an ulp past 1 (1.0000000000000002
    for about one random vector in six against itself): a score is held to [-1, 1]. A query
    of tiny or huge values (any finite, non-zero vector is valid) finds what the same
    direction at unit scale finds."""
    rng = random.Random(7)
    vectors = {f"r{i:02d}": [rng.uniform(-1, 1) for _ in range(DIM)] for i in range(40)}
    store.upsert_many([chunk(cid, v) for cid, v in vectors.items()], idempotency_key="k", ctx=CTX)
    for cid, v in vectors.items():
        for sign in (1, -1):
            hits = store.search([sign * x for x in v], top_k=3)
            assert all(-1.0 <= h["score"] <= 1.0 for h in hits), (cid, sign)
            assert sign < 0 or cid in [h["chunk_id"] for h in hits]
    # below 1e-38 float32 keeps fewer digits, at 1e-45 none: the query is scaled first
    for scale in (1e-50, 1e-44, 1e-40, 1e-30, 1e30, 1e37):
        for cid in ("r01", "r02", "r03"):
            query = [scale * x for x in vectors[cid]]
            scopes: list[list[dict[str, str]] | None] = [None, [{}]]
            for scope_any in scopes:  # the whole store, and a scoped cut
                unit = store.search(vectors[cid], top_k=10, scope_any=scope_any)
                hits = store.search(query, top_k=10, scope_any=scope_any)
                assert hits[0]["chunk_id"] == cid and hits[0]["score"] > 0.9999, (scale, cid)
                assert all(-1.0 <= h["score"] <= 1.0 for h in hits)
                assert [h["chunk_id"] for h in hits] == [h["chunk_id"] for h in unit]
                for got, want in zip(hits, unit, strict=True):
                    assert got["score"] == pytest.approx(want["score"], abs=1e-6), scale
    with pytest.raises(InvalidArguments, match="all zero"):
        store.search([0.0] * DIM, top_k=3)


def test_many_ties_at_the_cut_come_back_exactly(store: RatatoskrMemoryStore) -> None:
    twins = [chunk(f"t{i:03d}", vec(1, 1)) for i in range(60)]
    store.upsert_many(twins + [chunk("best", vec(1, 0.9))], idempotency_key="k", ctx=CTX)
    hits = store.search(vec(1, 1), top_k=10)
    assert [h["chunk_id"] for h in hits] == [f"t{i:03d}" for i in range(10)]
    scoped = store.search(vec(1, 1), top_k=5, scope_any=[{}])
    assert [h["chunk_id"] for h in scoped] == [f"t{i:03d}" for i in range(5)]


# -- confinement by the token scope ----------------------------------------------------------

T = CallContext(actor="worldtree", scope={"tenant": "acme"})


def seed(store: RatatoskrMemoryStore) -> None:
    store.upsert_many(
        [
            chunk("mine", vec(1), scope={"tenant": "acme", "end_user": "u1"}),
            chunk("theirs", vec(1), scope={"tenant": "globex", "end_user": "u1"}),
        ],
        idempotency_key="seed",
        ctx=CTX,
    )


def test_writes_outside_token_scope_are_forbidden(
    store: RatatoskrMemoryStore, total_rows: Callable[[Any], int]
) -> None:
    seed(store)
    before = total_rows(store)
    for records in (
        [
            chunk("new", vec(1), scope={"tenant": "acme"}),
            chunk("x", vec(1), scope={"tenant": "globex"}),
        ],
        [chunk("y", vec(1))],  # no tenant: not inside the token scope
        [chunk("theirs", vec(1), scope={"tenant": "acme"})],  # overwriting another tenant's id
    ):
        with pytest.raises(ScopeForbidden):
            store.upsert_many(records, idempotency_key="k", ctx=T)
    assert total_rows(store) == before
    record = store.get("theirs")
    assert record is not None and record["scope"]["tenant"] == "globex"


def test_reads_are_confined(store: RatatoskrMemoryStore) -> None:
    seed(store)
    assert [h["chunk_id"] for h in store.search(vec(1), top_k=5, ctx=T)] == ["mine"]
    hits = store.search(vec(1), top_k=5, scope_any=[{"end_user": "u1"}], ctx=T)
    assert [h["chunk_id"] for h in hits] == ["mine"]
    with pytest.raises(ScopeForbidden):
        store.search(vec(1), top_k=5, scope_all={"tenant": "globex"}, ctx=T)
    with pytest.raises(ScopeForbidden):
        store.search(vec(1), top_k=5, scope_any=[{"tenant": "acme"}, {"tenant": "globex"}], ctx=T)
    assert store.get("theirs", ctx=T) is None
    assert [r["id"] for r in store.get_many(["theirs", "mine"], ctx=T)] == ["mine"]
    assert store.delete_many(["theirs", "mine"], ctx=T) == {"deleted": 1}
    assert store.get("theirs") is not None


def test_health_ok_and_infallible(
    store: RatatoskrMemoryStore, backend: Backend, tmp_path: Path
) -> None:
    loaded(store)  # until then the plane is served, degraded (tests/memory/test_tail.py)
    health = store.health()
    assert health["status"] == "ok"
    if backend.name == "sqlite":  # a file names the durability its writes have
        assert health["reason"] == DURABILITY["FULL"]
    store.db.close()
    health = store.health()
    assert health["status"] == "down" and str(tmp_path) not in str(health["reason"])
