"""Exact cosine scores, computed the same way by the SQLite store and the reference store.

Vectors are kept as float32 (the stored precision); scores are float64, each row's dot
product summed in one fixed order (``lane_dots``), so a row's score does not depend on which
other rows share the matrix: equal vectors always get equal scores, and every store agrees
bit for bit. The C accelerator (``_rank.c``) sums in the same order; without it numpy does.

The order: eight lanes, lane k summing the products at k, k + 8, k + 16, ... in turn,
starting from +0.0; then lanes k and k + 4 are added, then k and k + 2, then the two left.
Each product of two float32 values is exact in float64, so only the sums round. The
quotient is then held to [-1, 1], where rounding can leave it an ulp outside.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ratatoskr.memory.accelerators import RANK as RANK_ACCELERATED

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

LANES = 8
_NORM_BLOCK = 4096  # rows per numpy pass in ``row_norms``: bounds its float64 temporaries


def lane_dots(left: F32, right: F32) -> F64:
    """The float64 dot product of each row of ``left`` (rows x dim) with ``right`` (dim, or
    rows x dim), summed in the module's order, with numpy."""
    products = left.astype(np.float64) * right.astype(np.float64)  # exact
    rows, dim = products.shape
    full = dim - dim % LANES
    lanes = np.zeros((rows, LANES), dtype=np.float64)
    if full:
        blocks = products[:, :full].reshape(rows, full // LANES, LANES)
        # ``cumsum`` adds in turn along the blocks; ``+ 0.0`` is the +0.0 each lane starts
        # from (it only turns a sum of negative zeros into +0.0)
        lanes += np.cumsum(blocks, axis=1)[:, -1, :]
    lanes[:, : dim - full] += products[:, full:]  # each lane's last term
    halves = lanes[:, :4] + lanes[:, 4:]
    quarters = halves[:, :2] + halves[:, 2:]
    return np.asarray(quarters[:, 0] + quarters[:, 1], dtype=np.float64)


def row_norms(matrix: F32) -> F64:
    """The float64 norm of each float32 row, exactly as ``cosine_scores`` computes it: the
    mirror keeps them per row, and a row's norm does not depend on its neighbours."""
    rows, dim = matrix.shape
    if RANK_ACCELERATED is not None and rows and dim:
        packed = RANK_ACCELERATED.row_norms(np.ascontiguousarray(matrix), dim)
        return np.frombuffer(packed, dtype=np.float64).copy()
    out = np.empty(rows, dtype=np.float64)
    for lo in range(0, rows, _NORM_BLOCK):
        block = matrix[lo : lo + _NORM_BLOCK]
        out[lo : lo + len(block)] = np.sqrt(lane_dots(block, block))
    return out


def cosine_scores(matrix: F32, query: F32, norms_of_rows: F64 | None = None) -> F64:
    """Cosine similarity of each row of ``matrix`` with ``query``: the dot product over the
    product of the norms (``row_norms``; ``norms_of_rows``, when given, is
    ``row_norms(matrix)`` computed beforehand, the same values bit for bit)."""
    rows = matrix.shape[0]
    if rows == 0:
        return np.zeros(0, dtype=np.float64)
    norms = row_norms(matrix) if norms_of_rows is None else norms_of_rows
    return cosine_rows(matrix, np.arange(rows, dtype=np.int64), query, norms)


def cosine_rows(matrix: F32, rows: I64, query: F32, norms: F64) -> F64:
    """``cosine_scores(matrix[rows], query, norms[rows])`` without gathering the rows: the
    mirror rescores its ~20 candidates in place. ``norms`` is ``row_norms`` of every row of
    ``matrix``."""
    if RANK_ACCELERATED is not None and len(rows):
        packed = RANK_ACCELERATED.exact_cosine(
            np.ascontiguousarray(matrix, dtype=np.float32),
            np.ascontiguousarray(rows, dtype=np.int64),
            np.ascontiguousarray(query, dtype=np.float32),
            np.ascontiguousarray(norms, dtype=np.float64),
        )
        return np.frombuffer(packed, dtype=np.float64).copy()
    dots = lane_dots(matrix[rows], query[None, :])
    query_norm = math.sqrt(float(lane_dots(query[None, :], query[None, :])[0]))
    scale = norms[rows] * query_norm  # a copy: fancy indexing
    # rounding can carry two parallel vectors' cosine an ulp past 1: a score is in [-1, 1]
    return np.asarray(np.clip(dots / scale, -1.0, 1.0), dtype=np.float64)


def rank(chunk_ids: list[str], scores: F64, top_k: int) -> list[tuple[str, float]]:
    """Order by score descending, then chunk_id ascending, and keep ``top_k``."""
    ordered = sorted(zip((-scores).tolist(), chunk_ids, strict=True))
    return [(chunk_id, -negated) for negated, chunk_id in ordered[:top_k]]
