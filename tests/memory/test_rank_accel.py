"""The C candidate cut (``_rank.c``) keeps what the numpy cut keeps: every row of the exact
top_k, every row when there are few, every near tie when the cut is crowded; it reads only
the rows it is given and refuses arrays it cannot read."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratatoskr.memory import accelerators
from ratatoskr.memory.search import _rank as RANK_ACCELERATED
from ratatoskr.memory.search import ranking as memory_ranking
from ratatoskr.memory.search.cosine import cosine_rows, cosine_scores, rank, row_norms
from ratatoskr.memory.search.ranking import (
    CANDIDATE_MARGIN,
    SCORE_EPSILON,
    scoped_candidates,
)

F32 = np.float32


def inverse_norms(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The mirror's inverse norms: NaN where float32 cannot score the row."""
    return memory_ranking.inverse_norms(np.sqrt((matrix.astype(np.float64) ** 2).sum(axis=1)))


@pytest.fixture(params=[True, False], ids=["C", "numpy"])
def accelerated(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both cuts: the C one, and numpy's (what an install without a compiler runs)."""
    on: bool = request.param
    monkeypatch.setattr(memory_ranking, "RANK_ACCELERATED", RANK_ACCELERATED if on else None)
    return on


def test_the_accelerator_is_built_and_used_unless_switched_off() -> None:
    """``make test`` installs with a C compiler (this module's import of ``_rank`` fails
    otherwise): a build that silently fell back would cost scattered scopes (an agent_self)
    ~2.5x. The store uses it unless ``RATATOSKR_NO_ACCELERATORS`` asks for numpy."""
    assert (accelerators.RANK is None) == accelerators.disabled()
    assert (vars(memory_ranking)["RANK_ACCELERATED"] is None) == accelerators.disabled()


@st.composite
def cuts(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A float32 matrix (from a small grid: ties and duplicates, spread, or spread at
    magnitudes from 1e-40 to 1e37, rows float32 cannot score), a query at any of those
    scales, the admitted rows (sorted, distinct, any subset) and top_k."""
    dim = draw(st.integers(1, 130))
    count = draw(st.integers(1, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        matrix = rng.integers(-2, 3, size=(count, dim)).astype(F32)
    else:
        spread = rng.standard_normal((count, dim))
        if draw(st.booleans()):
            spread *= 10.0 ** rng.integers(-40, 38, size=(count, 1))
        matrix = spread.astype(F32)
    matrix[~matrix.any(axis=1), 0] = 1.0  # no zero row: cosine is undefined there
    scale = draw(st.sampled_from([1.0, 1e-40, 1e-30, 1e30, 1e37]))
    query = (rng.standard_normal(dim) * scale).astype(F32)
    if not query.any():
        query[0] = 1.0
    rows = np.flatnonzero(rng.random(count) < draw(st.floats(0.05, 1.0))).astype(np.int64)
    if not len(rows):
        rows = np.array([int(rng.integers(0, count))], dtype=np.int64)
    return matrix, query, rows, draw(st.integers(1, 12))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # one cut per run
@given(cuts())
def test_the_cut_holds_the_exact_top_k(
    accelerated: bool, cut: tuple[np.ndarray, np.ndarray, np.ndarray, int]
) -> None:
    matrix, query, rows, top_k = cut
    got = scoped_candidates(matrix, inverse_norms(matrix), rows, query, top_k)
    assert len(set(got.tolist())) == len(got) and set(got.tolist()) <= set(rows.tolist())
    want = top_k + CANDIDATE_MARGIN
    if len(rows) <= want:
        assert sorted(got.tolist()) == rows.tolist()
        return
    assert len(got) >= want
    exact = cosine_scores(matrix[rows], query)
    kth = np.sort(exact)[::-1][top_k - 1]
    # every row scoring at least the k-th exactly is a candidate, ties at the cut included
    assert set(rows[exact >= kth].tolist()) <= set(got.tolist())


def test_a_crowded_cut_keeps_every_near_tie(accelerated: bool) -> None:
    """Forty copies of one vector among noise: all forty tie for the top, so all are kept,
    not just top_k + margin of them."""
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((200, 16)).astype(F32) * 0.01
    query = rng.standard_normal(16).astype(F32)
    twins = np.arange(50, 90)
    matrix[twins] = query
    rows = np.arange(200, dtype=np.int64)
    got = scoped_candidates(matrix, inverse_norms(matrix), rows, query, 5)
    assert set(twins.tolist()) <= set(got.tolist())
    assert len(got) >= len(twins) > 5 + CANDIDATE_MARGIN


def test_few_rows_are_all_candidates(accelerated: bool) -> None:
    matrix = np.eye(4, dtype=F32)
    rows = np.array([0, 2, 3], dtype=np.int64)
    got = scoped_candidates(matrix, inverse_norms(matrix), rows, np.ones(4, F32), 1)
    assert sorted(got.tolist()) == [0, 2, 3]


def test_the_cut_agrees_on_a_realistic_scope() -> None:
    """768-d rows, an end_user's worth of them in a run plus scattered ones: the C cut and
    numpy's pick the same candidates (no near ties in random data)."""
    rng = np.random.default_rng(11)
    matrix = rng.standard_normal((3000, 768)).astype(F32)
    inv = inverse_norms(matrix)
    rows = np.unique(np.concatenate([np.arange(1000, 1101), rng.integers(0, 3000, 400)]))
    query = rng.standard_normal(768).astype(F32)
    want = 10 + CANDIDATE_MARGIN
    c_cut = RANK_ACCELERATED.scoped_candidates(matrix, inv, rows, query, 10, want, SCORE_EPSILON)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory_ranking, "RANK_ACCELERATED", None)  # numpy
        numpy_cut = scoped_candidates(matrix, inv, rows, query, 10)
    assert sorted(np.frombuffer(c_cut, dtype=np.int64).tolist()) == sorted(numpy_cut.tolist())


def test_bad_arrays_are_refused_before_any_read() -> None:
    cut = RANK_ACCELERATED.scoped_candidates
    matrix = np.ones((4, 3), dtype=F32)
    inv = np.ones(4, dtype=F32)
    query = np.ones(3, dtype=F32)
    with pytest.raises(IndexError, match="outside the matrix"):
        cut(matrix, inv, np.array([0, 4], dtype=np.int64), query, 1, 2, 1e-4)
    with pytest.raises(IndexError):
        cut(matrix, inv, np.array([-1], dtype=np.int64), query, 1, 2, 1e-4)
    with pytest.raises(TypeError, match="float32"):
        cut(matrix.astype(np.float64), inv, np.array([0], dtype=np.int64), query, 1, 2, 1e-4)
    with pytest.raises(TypeError, match="int64"):
        cut(matrix, inv, np.array([0], dtype=np.int32), query, 1, 2, 1e-4)
    with pytest.raises(ValueError, match="shapes"):
        cut(matrix, inv, np.array([0], dtype=np.int64), np.ones(5, F32), 1, 2, 1e-4)
    with pytest.raises(ValueError, match="shapes"):
        cut(matrix, inv[:2], np.array([0], dtype=np.int64), query, 1, 2, 1e-4)
    with pytest.raises(ValueError, match="top_k"):
        cut(matrix, inv, np.array([0], dtype=np.int64), query, 3, 2, 1e-4)
    with pytest.raises(TypeError, match="7 arguments"):
        cut(matrix, inv)  # type: ignore[call-arg, arg-type]


def test_row_lists_are_the_rows_as_floats(accelerated: bool) -> None:
    rng = np.random.default_rng(2)
    matrix = rng.standard_normal((6, 5)).astype(F32)
    matrix[1, 2] = np.float32(-0.0)
    rows = np.array([4, 1, 4], dtype=np.int64)
    got = memory_ranking.row_lists(matrix, rows)
    assert got == matrix[rows].tolist()
    assert all(type(v) is float for row in got for v in row)
    assert np.float64(got[1][2]).tobytes() == np.float64(-0.0).tobytes()
    assert memory_ranking.row_lists(matrix, np.zeros(0, dtype=np.int64)) == []


def test_row_lists_held_by_a_caller_keep_their_values_while_others_are_made() -> None:
    """The floats come from a pool and are reused once no one holds them: lists a caller
    keeps (more floats than the pool has room for, some let go on the way) never change."""
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((64, 384)).astype(F32)
    kept: list[tuple[np.ndarray, list[list[float]], float]] = []
    for i in range(400):  # 400 x 2 x 384 floats: past the pool's 65,536
        rows = rng.integers(0, 64, size=2).astype(np.int64)
        lists = RANK_ACCELERATED.rows_to_lists(matrix, rows, 384)
        one = lists[0][0]  # a single float held alone, its list let go
        if i % 3:
            kept.append((rows, lists, one))
        else:
            kept.append((rows, [], one))
        del lists
    for rows, lists, one in kept:
        assert one == float(matrix[rows[0], 0])
        if lists:
            assert lists == matrix[rows].tolist()


def test_row_lists_refuse_rows_outside_the_matrix() -> None:
    matrix = np.ones((2, 3), dtype=F32)
    with pytest.raises(IndexError, match="outside the matrix"):
        RANK_ACCELERATED.rows_to_lists(matrix, np.array([2], dtype=np.int64), 3)
    with pytest.raises(ValueError, match="shapes"):
        RANK_ACCELERATED.rows_to_lists(matrix, np.array([0], dtype=np.int64), 4)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # one cut per run
@given(cuts())
def test_settled_top_is_the_ranking_whenever_it_answers(
    accelerated: bool, cut: tuple[np.ndarray, np.ndarray, np.ndarray, int]
) -> None:
    """Its order is ``cosine.rank``'s (score desc, id asc) to the last bit; it declines
    (``None``) exactly when two of the top_k + 1 best scores are equal (ids settle those)."""
    matrix, query, rows, top_k = cut
    norms = row_norms(matrix)
    got = memory_ranking.settled_top(matrix, rows, query, norms, top_k)
    exact = cosine_rows(matrix, rows, query, norms)
    ids = [f"id{r:06d}" for r in rows.tolist()]
    if got is None:
        best = np.sort(exact)[::-1][: top_k + 1].tolist()
        assert len(set(best)) < len(best)
        return
    hit_rows, scores = got
    expected = rank(ids, exact, top_k)
    assert [f"id{r:06d}" for r in hit_rows] == [cid for cid, _ in expected]
    assert np.array(scores).tobytes() == np.array([s for _, s in expected]).tobytes()


def test_settled_top_beyond_its_c_limit_orders_with_numpy() -> None:
    rng = np.random.default_rng(4)
    matrix = rng.standard_normal((300, 8)).astype(F32)
    rows = np.arange(300, dtype=np.int64)
    query = rng.standard_normal(8).astype(F32)
    beyond = RANK_ACCELERATED.SETTLED_MAX + 36
    got = memory_ranking.settled_top(matrix, rows, query, row_norms(matrix), beyond)
    assert got is not None and len(got[0]) == beyond
    exact = cosine_rows(matrix, rows, query, row_norms(matrix))
    assert got[0] == np.argsort(-exact, kind="stable")[:beyond].tolist()
    with pytest.raises(ValueError, match="top_k"):
        limit = RANK_ACCELERATED.SETTLED_MAX
        RANK_ACCELERATED.settled_top(matrix, rows, query, row_norms(matrix), limit + 1)
