"""The exact scores: summed in the one order ``cosine.py`` states, by the C accelerator and by
numpy alike, to the last bit; a row's score never depends on the rows beside it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.memory.search import _rank as C_RANK
from ratatoskr.memory.search import cosine
from ratatoskr.memory.search.cosine import cosine_rows, cosine_scores, lane_dots, row_norms


@pytest.fixture
def numpy_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """``cosine.py`` as it runs where the accelerator was not built."""
    monkeypatch.setattr(cosine, "RANK_ACCELERATED", None)


def stated_order(a: list[float], b: list[float]) -> float:
    """The module docstring's order, one Python float operation at a time."""
    lanes = [0.0] * 8
    for j, (x, y) in enumerate(zip(a, b, strict=True)):
        lanes[j % 8] += x * y
    halves = [lanes[k] + lanes[k + 4] for k in range(4)]
    quarters = [halves[k] + halves[k + 2] for k in range(2)]
    return quarters[0] + quarters[1]


@st.composite
def matrices(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float32 rows of any length 1..70: small integers with signed zeros (exact sums,
    cancellations to zero), or values over forty orders of magnitude; a query; rows to score
    (any order, repeats allowed)."""
    dim = draw(st.integers(1, 70))
    count = draw(st.integers(1, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["grid", "spread"]))
    if kind == "grid":
        matrix = rng.integers(-2, 3, size=(count, dim)).astype(np.float32)
        matrix[rng.random((count, dim)) < 0.2] = np.float32(-0.0)
    else:
        scale = 10.0 ** rng.integers(-20, 20, size=(count, dim))
        matrix = (rng.standard_normal((count, dim)) * scale).astype(np.float32)
    matrix[~matrix.any(axis=1), 0] = 1.0  # no zero row: cosine is undefined there
    query = rng.integers(-2, 3, size=dim).astype(np.float32)
    query[0] = np.float32(rng.choice([-1.0, 1.0, 0.5]))
    rows = rng.integers(0, count, size=draw(st.integers(1, 16))).astype(np.int64)
    return matrix, query, rows


@given(matrices())
def test_lane_dots_sum_in_the_stated_order(case: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    matrix, query, _ = case
    got = lane_dots(matrix, query[None, :])
    for i, row in enumerate(matrix):
        expected = stated_order([float(v) for v in row], [float(v) for v in query])
        assert got[i].tobytes() == np.float64(expected).tobytes()


@given(matrices())
def test_the_accelerator_and_numpy_agree_to_the_bit(
    case: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    matrix, query, rows = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cosine, "RANK_ACCELERATED", C_RANK)
        fast_norms = row_norms(matrix)
        fast = cosine_rows(matrix, rows, query, fast_norms)
        patch.setattr(cosine, "RANK_ACCELERATED", None)
        slow_norms = row_norms(matrix)
        slow = cosine_rows(matrix, rows, query, slow_norms)
    assert fast_norms.tobytes() == slow_norms.tobytes()
    assert fast.tobytes() == slow.tobytes()


@pytest.mark.parametrize("accelerated", [True, False], ids=["C", "numpy"])
@given(matrices())
def test_cosine_rows_is_cosine_scores_of_the_gathered_rows(
    accelerated: bool, case: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    matrix, query, rows = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cosine, "RANK_ACCELERATED", C_RANK if accelerated else None)
        fast = cosine_rows(matrix, rows, query, row_norms(matrix))
        assert fast.tobytes() == cosine_scores(matrix[rows], query).tobytes()
        given_norms = row_norms(matrix)[rows]
        assert fast.tobytes() == cosine_scores(matrix[rows], query, given_norms).tobytes()
        alone = [cosine_scores(matrix[r : r + 1], query)[0] for r in rows.tolist()]
        assert fast.tobytes() == np.array(alone, dtype=np.float64).tobytes()


@pytest.mark.usefixtures("numpy_only")
def test_row_norms_in_blocks_match_one_pass() -> None:
    """Without the accelerator, norms are taken 4,096 rows at a time (bounded temporaries)."""
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((9000, 24)).astype(np.float32)
    blocked = row_norms(matrix)
    assert blocked.tobytes() == np.sqrt(lane_dots(matrix, matrix)).tobytes()


def test_scores_are_accurate() -> None:
    """Within 1e-12 of the correctly rounded cosine (``math.fsum`` of the exact products)."""
    rng = np.random.default_rng(9)
    matrix = rng.standard_normal((50, 768)).astype(np.float32)
    query = rng.standard_normal(768).astype(np.float32)
    got = cosine_scores(matrix, query)
    q = [float(v) for v in query]
    q_norm = math.sqrt(math.fsum(v * v for v in q))
    for i, row in enumerate(matrix):
        r = [float(v) for v in row]
        exact = math.fsum(x * y for x, y in zip(r, q, strict=True))
        exact /= math.sqrt(math.fsum(v * v for v in r)) * q_norm
        assert abs(got[i] - exact) < 1e-12


def test_bad_arrays_are_refused() -> None:
    accel = C_RANK
    matrix = np.ones((3, 4), dtype=np.float32)
    norms = np.ones(3)
    query = np.ones(4, dtype=np.float32)
    with pytest.raises(IndexError, match="outside the matrix"):
        accel.exact_cosine(matrix, np.array([3], dtype=np.int64), query, norms)
    with pytest.raises(TypeError, match="float64"):
        accel.exact_cosine(matrix, np.array([0], dtype=np.int64), query, norms.astype(np.float32))
    with pytest.raises(ValueError, match="shapes"):
        accel.exact_cosine(matrix, np.array([0], dtype=np.int64), query, norms[:2])
    with pytest.raises(ValueError, match="shapes"):
        accel.row_norms(matrix, 5)
    with pytest.raises(TypeError, match="float32"):
        accel.row_norms(matrix.astype(np.float64), 4)
