"""Exact top-k over a float32 matrix without copying the rows a scope admits.

The mirror keeps its rows grouped by scope (``mirror.py``), so the rows of a tenant, a
group or an end_user mostly form a few long runs, with the holes of deleted or moved rows in
them. Scoring such a run is a mat-vec over a slice of the matrix (a view, no copy; a hole
of up to ``RUN_MIN`` rows is scored with it and dropped); only rows in short runs are
gathered. Gathering 10 % of a 100k x 768 matrix costs about three times the mat-vec itself,
which is why this exists.

Ranking is two-step and exact: float32 scores pick ``top_k + CANDIDATE_MARGIN`` candidates,
widened to every row within ``SCORE_EPSILON`` of the k-th when the cut is crowded, and
``cosine.cosine_scores`` (the reference store's function; the mirror calls ``cosine_rows``,
the same bits without gathering the rows) gives the final float64 scores.

The C accelerator (``_rank.c``) makes the cut in one pass over the rows where they lie
(``scoped_candidates``) for a scope of at most ``ACCELERATED_MAX_ROWS`` rows, and for any
scope whose rows are scattered (an ``agent_self``, the last key of the sort order, or rows
in the unsorted tail), which numpy would have to gather or score a short run at a time;
numpy scores the dense rest (a tenant's long run). Both keep the same rule, so both hold
the exact top_k.
"""

from __future__ import annotations

import math
from operator import itemgetter
from typing import TypeVar

import numpy as np

from ratatoskr.memory.accelerators import RANK as RANK_ACCELERATED
from ratatoskr.memory.search.cosine import F32, F64, I64, cosine_rows

CANDIDATE_MARGIN = 8
SCORE_EPSILON = 2e-4
# A stored vector whose norm lies outside this range has squares that overflow or sink
# below float32's normal range, so an engine's float32 distance to it (sqlite-vec's,
# pgvector's) says nothing of its direction (NULL, NaN, -inf, or 1 whatever it is); the
# SQL routes find such rows by a partial index and rank them always. Embedding models'
# outputs lie far inside it.
FAR_NORM_LOW = 1e-15
FAR_NORM_HIGH = 1e18
RUN_MIN = 16  # a run this long is cheaper to score as a slice than to gather
# Up to this many admitted rows the C cut (``_rank.c``) is used: it reads each row where it
# lies, where numpy pays a dozen calls' fixed costs. Above it, rows that fill at least half
# of the span from the first to the last (a tenant's run) go to BLAS, which scores a long
# slice as fast; scattered ones (an agent_self's 2 %) stay in C, which gathers nothing.
ACCELERATED_MAX_ROWS = 4096
DENSE_SPAN = 2  # rows spanning at most this many times their number are dense
# the largest top_k the C ``settled_top`` orders, as ``_rank.h`` defines it
SETTLED_MAX: int = RANK_ACCELERATED.SETTLED_MAX if RANK_ACCELERATED is not None else 0
SORT_MAX = 256  # up to this many scores, one sort is cheaper than the partitions
_EPSILON32 = np.float32(SCORE_EPSILON)
# Float32 candidate scores are trusted for rows whose norm lies in this range: their
# products with a unit query neither overflow nor sink into float32's subnormals, and the
# inverse norm is a normal float32. Any finite non-zero vector is valid, so a row outside
# it (all 1e-40s, or 3e38s) gets a NaN inverse norm, and a NaN score is always a candidate:
# the float64 step ranks it exactly.
TRUSTED_NORMS = (1e-30, 1e30)

T = TypeVar("T")


def inverse_norms(norms: F64) -> F32:
    """The float32 inverse of each norm, NaN for a norm outside ``TRUSTED_NORMS`` (a zero
    norm, a row deleted during a load, stays ``inf``: its row is never live)."""
    with np.errstate(divide="ignore", over="ignore"):  # both end outside the range
        inverse = (1.0 / norms).astype(np.float32)
    low, high = TRUSTED_NORMS
    inverse[(norms > 0) & ((norms < low) | (norms > high))] = np.nan
    return inverse


def unit_query(query: F32) -> F32:
    """``query`` over its norm, the division in float64: a query of tiny or huge values
    neither vanishes nor overflows on its way to float32."""
    wide = query.astype(np.float64)
    return (wide / math.sqrt(float(wide.dot(wide)))).astype(np.float32)


def score_rows(matrix: F32, inv_norms: F32, rows: I64, unit_query: F32) -> F32:
    """Float32 cosine of ``unit_query`` with each of ``rows`` (sorted, distinct)."""
    count = len(rows)
    out: F32 = np.empty(count, dtype=np.float32)
    if count == 0:
        return out
    first, last = int(rows[0]), int(rows[-1])
    if last - first + 1 == count:  # one run: a view, no gather
        # ``dot``: the BLAS gemv ``np.matmul`` calls, without the gufunc machinery
        matrix[first : last + 1].dot(unit_query, out)
        out *= inv_norms[first : last + 1]
        return out
    breaks = np.flatnonzero(np.diff(rows) > RUN_MIN) + 1  # a short hole stays in its run
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [count]))
    long = (ends - starts) >= RUN_MIN
    if not long.any():
        np.matmul(matrix[rows], unit_query, out=out)
        out *= inv_norms[rows]
        return out
    gathered = np.ones(count, dtype=bool)
    for start, end in zip(starts[long].tolist(), ends[long].tolist(), strict=True):
        lo, hi = int(rows[start]), int(rows[end - 1]) + 1
        if hi - lo == end - start:  # no hole: straight into place
            np.matmul(matrix[lo:hi], unit_query, out=out[start:end])
            out[start:end] *= inv_norms[lo:hi]
        else:
            span = matrix[lo:hi].dot(unit_query)
            at = rows[start:end] - lo
            out[start:end] = span[at] * inv_norms[rows[start:end]]
        gathered[start:end] = False
    rest = np.flatnonzero(gathered)
    if len(rest):
        picked = rows[rest]
        out[rest] = (matrix[picked] @ unit_query) * inv_norms[picked]
    return out


def scoped_candidates(matrix: F32, inv_norms: F32, rows: I64, query: F32, top_k: int) -> I64:
    """The rows among ``rows`` (sorted, distinct, non-empty) that could belong to the exact
    top_k of ``query``: ``rows[candidates(score_rows(...), top_k)]``, the same cut, by the C
    accelerator in one pass when it was built and the rows are few or scattered."""
    count = len(rows)
    dense = int(rows[-1]) - int(rows[0]) < DENSE_SPAN * count
    if RANK_ACCELERATED is not None and (count <= ACCELERATED_MAX_ROWS or not dense):
        cut = RANK_ACCELERATED.scoped_candidates(
            matrix, inv_norms, rows, query, top_k, top_k + CANDIDATE_MARGIN, SCORE_EPSILON
        )
        return np.frombuffer(cut, dtype=np.int64)
    return rows[candidates(score_rows(matrix, inv_norms, rows, unit_query(query)), top_k)]


def candidates(scores: F32, top_k: int) -> I64:
    """Positions in ``scores`` that could belong to the exact top_k (-inf never does; NaN,
    a row float32 cannot score, always does)."""
    unsure = np.isnan(scores)
    if unsure.any():
        sure = np.where(unsure, np.float32(-np.inf), scores)
        return np.union1d(_candidates(sure, top_k), np.flatnonzero(unsure)).astype(np.int64)
    return _candidates(scores, top_k)


def _candidates(scores: F32, top_k: int) -> I64:
    want = top_k + CANDIDATE_MARGIN
    if len(scores) <= want:
        return np.flatnonzero(scores > -np.inf)
    if len(scores) <= SORT_MAX:
        return _candidates_by_sort(scores, top_k, want)
    negated = -scores
    top = np.argpartition(negated, want - 1)[:want]
    near = negated[top]
    if not near.max() < np.inf:  # at most ``want`` live rows: all of them, none dead
        return top[near < np.inf].astype(np.int64)
    bound = -np.partition(near, top_k - 1)[top_k - 1] - SCORE_EPSILON
    if -float(near.max()) >= bound:  # a crowded cut: take every near tie
        return np.flatnonzero(scores >= bound)
    return top.astype(np.int64)


def _candidates_by_sort(scores: F32, top_k: int, want: int) -> I64:
    """``candidates`` by one sort: the same cut (the bound in float32, as there) at about
    half the cost for the few hundred rows of a small scope (one end_user)."""
    top = scores.argsort()[-want:]  # ascending; ties in any order, as a partition
    last = scores[top[0]]  # the want-th highest
    if last == -np.inf:  # fewer than ``want`` live rows: all of them
        return np.flatnonzero(scores > -np.inf)
    bound = scores[top[want - top_k]] - _EPSILON32  # below the top_k-th highest
    if last >= bound:  # a crowded cut: take every near tie
        return np.flatnonzero(scores >= bound)
    return top


def settled_top(
    matrix: F32, rows: I64, query: F32, norms: F64, top_k: int
) -> tuple[list[int], list[float]] | None:
    """The top_k of ``rows`` (the candidates) by exact score, as (rows, scores) best first,
    when the scores alone settle the order: no two of the top_k + 1 best are equal (the
    next one included, as a tie with it decides which row is in). ``None`` otherwise: ties
    go by chunk id, which the caller knows (``cosine.rank``). In one C call when built."""
    if RANK_ACCELERATED is not None and top_k <= SETTLED_MAX:
        settled: tuple[list[int], list[float]] | None
        settled = RANK_ACCELERATED.settled_top(matrix, rows, query, norms, top_k)
        return settled
    exact = cosine_rows(matrix, rows, query, norms)
    order = exact.argsort()[: -top_k - 2 : -1]  # the hits and the next, descending
    scores = exact[order].tolist()
    if len(set(scores)) != len(scores):
        return None
    return rows[order[:top_k]].tolist(), scores[:top_k]


def row_lists(matrix: F32, rows: I64) -> list[list[float]]:
    """``matrix[rows].tolist()``: the hits' embeddings, read in place by the C accelerator
    (numpy copies the rows first, then converts them one value at a time)."""
    if RANK_ACCELERATED is not None:
        lists: list[list[float]] = RANK_ACCELERATED.rows_to_lists(matrix, rows, matrix.shape[1])
        return lists
    return matrix[rows].tolist()  # type: ignore[no-any-return]


def pick(items: list[T], rows: list[int]) -> list[T]:
    """``[items[r] for r in rows]`` in one C loop, for what the mirror holds of the hits: their
    objects lie anywhere in memory, and there the reads (cache misses) overlap instead of
    waiting one after another."""
    if len(rows) < 2:
        return [items[r] for r in rows]
    return list(itemgetter(*rows)(items))
