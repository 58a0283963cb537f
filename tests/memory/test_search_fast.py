"""The small-scope search path's shortcuts answer exactly as the plain computations they
replace: ``cosine_rows`` is ``cosine_scores`` on the gathered rows bit for bit, the one-run
``score_rows`` is ``np.matmul`` bit for bit, and a search on the mirror (one run, runs and
gathered rows, ties cut by id, postings of values first seen after the load) returns what
the reference store returns, scores included, to the last bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ratatoskr.memory.reference import ReferenceMemoryStore
from ratatoskr.memory.search import _rank as C_RANK
from ratatoskr.memory.search import ranking as memory_ranking
from ratatoskr.memory.search.cosine import cosine_rows, cosine_scores, row_norms
from ratatoskr.memory.search.ranking import score_rows
from ratatoskr.memory.store import open_memory_store
from tests.memory.helpers import CTX, DIM, chunk, random_chunks, vec

USERS = ["u0", "u1", "u2"]


def exactly(hits: list[dict[str, Any]]) -> list[Any]:
    """Hits with each score as its bits (``==`` on floats would let -0.0 pass for 0.0)."""
    return [{**h, "score": np.float64(h["score"]).tobytes()} for h in hits]


@st.composite
def matrices(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of float32 values from a small grid (ties, duplicates) or spread over many
    magnitudes, a query, and a list of row numbers (any order, repeats allowed)."""
    dim = draw(st.integers(1, 40))
    count = draw(st.integers(1, 30))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if draw(st.booleans()):
        matrix = rng.integers(-2, 3, size=(count, dim)).astype(np.float32)
    else:
        scale = 10.0 ** rng.integers(-20, 20, size=(count, 1))
        matrix = (rng.standard_normal((count, dim)) * scale).astype(np.float32)
    matrix[~matrix.any(axis=1), 0] = 1.0  # no zero row: cosine is undefined there
    query = rng.standard_normal(dim).astype(np.float32)
    rows = rng.integers(0, count, size=draw(st.integers(1, 20))).astype(np.int64)
    return matrix, query, rows


@given(matrices())
def test_cosine_rows_is_cosine_scores_bit_for_bit(
    case: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    matrix, query, rows = case
    fast = cosine_rows(matrix, rows, query, row_norms(matrix))
    assert fast.tobytes() == cosine_scores(matrix[rows], query).tobytes()
    norms = row_norms(matrix)[rows]
    assert fast.tobytes() == cosine_scores(matrix[rows], query, norms).tobytes()


def test_one_run_scores_are_matmul_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((2000, 96)).astype(np.float32)
    inv_norms = (1.0 / np.linalg.norm(matrix.astype(np.float64), axis=1)).astype(np.float32)
    for _ in range(300):
        lo = int(rng.integers(0, 1990))
        hi = int(rng.integers(lo + 1, 2001))
        unit = rng.standard_normal(96).astype(np.float32)
        expected = np.matmul(matrix[lo:hi], unit) * inv_norms[lo:hi]
        got = score_rows(matrix, inv_norms, np.arange(lo, hi, dtype=np.int64), unit)
        assert got.tobytes() == expected.tobytes()


@st.composite
def stores(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Records in two batches (the second lands after the mirror's load: its tail), with
    vectors from a small grid (exact ties and duplicates), spread, or spread at magnitudes
    from 1e-40 to 1e37 (float32 cannot score the rows at either end: the float64 step
    must), over a few scopes."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    grid = draw(st.booleans())
    magnitudes = not grid and draw(st.booleans())
    count = draw(st.integers(2, 200))
    records = []
    for i in range(count):
        if grid:
            vector = rng.integers(-1, 2, size=DIM).astype(float)
            vector[0] = 1.0  # never all zero
        else:
            vector = rng.standard_normal(DIM)
            if magnitudes:
                vector *= 10.0 ** int(rng.integers(-40, 38))
                vector[0] = vector[0] or 1.0  # not all zero once in float32
        user = USERS[int(rng.integers(0, len(USERS)))] if i < count // 2 else f"late{i % 3}"
        scope = {"tenant": f"t{i % 2}", "end_user": user if rng.random() < 0.8 else "u0"}
        records.append(
            chunk(f"c{int(rng.integers(0, 10**6)):07d}-{i}", vector.tolist(), scope=scope)
        )
    cut = draw(st.integers(1, count - 1))
    return records[:cut], records[cut:]


FILTERS: list[dict[str, Any]] = [
    {},
    {"scope_all": {"end_user": "u0"}},
    {"scope_all": {"end_user": "u1", "tenant": "t1"}},
    {"scope_all": {"end_user": "late1"}},
    {"scope_all": {"tenant": "t0"}},
    {"scope_any": [{"end_user": "u2"}, {"end_user": "late2"}]},
]


@pytest.mark.parametrize("accelerated", [True, False], ids=["C-cut", "numpy-cut"])
@settings(max_examples=40)
@given(stores(), st.integers(0, 2**32 - 1), st.sampled_from([1.0, 1e-40, 1e-30, 1e30, 1e37]))
def test_mirror_search_is_the_reference_to_the_last_bit(
    tmp_path_factory: Any,
    accelerated: bool,
    batches: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    seed: int,
    scale: float,
) -> None:
    """With the C candidate cut and without it (an install without a compiler); the query
    at any scale."""
    first, second = batches
    path = str(tmp_path_factory.mktemp("fast") / "m.db")
    ours = open_memory_store(path, embedding_dim=DIM)
    assert ours.engine.wait_until(lambda m: m.ready, 30)  # the mirror, not the SQL route
    ref = ReferenceMemoryStore(DIM)
    rng = np.random.default_rng(seed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory_ranking, "RANK_ACCELERATED", C_RANK if accelerated else None)
        try:
            for key, batch in (("first", first), ("second", second)):
                for store in (ours, ref):
                    store.upsert_many(batch, idempotency_key=key, ctx=CTX)
                for flt in FILTERS:
                    query = (rng.integers(-1, 2, size=DIM) + 0.5 * (key == "second")).tolist()
                    query[0] = query[0] or 1.0  # never all zero (cosine is undefined)
                    query = [scale * x for x in query]
                    for top_k in (1, 3, 10):
                        for include in (None, {"embedding": False}):
                            args = {"top_k": top_k, "include": include, **flt}
                            expected = exactly(ref.search(query, **args))
                            assert exactly(ours.search(query, **args)) == expected, (key, args)
                            assert exactly(ours.search(query, **args)) == expected  # no transaction
        finally:
            ours.close()


def test_exact_ties_are_cut_by_id(tmp_path: Path) -> None:
    """Equal vectors score equal: the order among them, and which of them make the cut,
    follow the ids, on the mirror as in the reference."""
    ours = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    ref = ReferenceMemoryStore(DIM)
    scope = {"end_user": "u0"}
    records = [chunk(f"d{i}", vec(1, 1), scope=scope) for i in (5, 2, 9, 1, 7)]
    records += [chunk(f"e{i}", vec(1, 0.5 + i / 10), scope=scope) for i in range(20)]
    for store in (ours, ref):
        store.upsert_many(records, idempotency_key="ties", ctx=CTX)
    for top_k in (1, 2, 3, 5, 8):
        for _ in range(2):  # the full path, then the one without a transaction
            got = ours.search(vec(1, 1), top_k=top_k, scope_all=scope)
            assert exactly(got) == exactly(ref.search(vec(1, 1), top_k=top_k, scope_all=scope))
    top = [h["chunk_id"] for h in ours.search(vec(1, 1), top_k=3, scope_all=scope)]
    assert top == ["d1", "d2", "d5"]
    ours.close()


def test_values_first_seen_after_the_load(tmp_path: Path) -> None:
    """A value written after the mirror's load has no rows in the grouped order (its code is
    past the last one the load saw): its rows are all in the tail, and found there."""
    path = str(tmp_path / "m.db")
    ours = open_memory_store(path, embedding_dim=DIM)
    sql_only = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    rng = np.random.default_rng(4)
    first = random_chunks(rng, [f"a{i}" for i in range(30)], ["u0", "u1", "u2"])
    ours.upsert_many(first, idempotency_key="a", ctx=CTX)
    query = rng.standard_normal(DIM).tolist()
    assert ours.search(query, top_k=5, scope_all={"end_user": "u1"})  # loads the mirror
    later = random_chunks(rng, [f"b{i}" for i in range(10)], ["new0", "new1"])
    later.append(chunk("moved", rng.standard_normal(DIM).tolist(), scope={"end_user": "u1"}))
    ours.upsert_many(later, idempotency_key="b", ctx=CTX)
    ours.delete_many(["a1", "a4"])
    for user in ("u0", "u1", "u2", "new0", "new1", "never"):
        for _ in range(2):
            got = ours.search(query, top_k=20, scope_all={"end_user": user})
            assert got == sql_only.search(query, top_k=20, scope_all={"end_user": user}), user
    ours.close()
    sql_only.close()


def test_scope_any_branches_apart_overlapping_and_repeated(tmp_path: Path) -> None:
    """Enough chunks that a few branches are merged, not masked: two users' rows lie apart
    (joined as they are), a user and an agent overlap (merged and deduplicated), a branch
    given twice is one; each answer is the reference store's, scores to the bit, and the
    rows written after the load (the tail) take part."""
    rng = np.random.default_rng(21)
    records = []
    for i in range(1200):
        user = i % 40  # a user lives in one tenant, so its rows are one run after the load
        scope = {"tenant": f"t{user % 3}", "end_user": f"u{user}", "agent_self": f"a{i % 30}"}
        records.append(chunk(f"c{i:05d}", rng.standard_normal(DIM).tolist(), scope=scope))
    ours = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    ref = ReferenceMemoryStore(DIM)
    branch_sets = [
        [{"end_user": "u3"}, {"end_user": "u17"}],
        [{"end_user": "u3"}, {"agent_self": "a7"}],
        [{"end_user": "u5"}, {"end_user": "u5"}],
        [{"end_user": "u8"}, {"end_user": "u9"}, {"agent_self": "a1"}],
    ]
    try:
        for key, batch in (("first", records[:1000]), ("second", records[1000:])):
            for store in (ours, ref):
                store.upsert_many(batch, idempotency_key=key, ctx=CTX)
            for branches in branch_sets:
                query = rng.standard_normal(DIM).tolist()
                args: dict[str, Any] = {"top_k": 10, "scope_any": branches}
                expected = exactly(ref.search(query, **args))
                assert len(expected) == 10
                assert exactly(ours.search(query, **args)) == expected, (key, branches)
    finally:
        ours.close()
