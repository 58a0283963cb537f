"""Exact cosine scores, computed the same way by the SQLite store and the reference store.

Vectors are kept as float32 (the stored precision); scores are computed in float64 row by
row (a per-row product-sum loop), so a row's score does not depend on which
other rows share the matrix: equal vectors always get equal scores, and both stores agree
bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


def row_norms(matrix: F32) -> F64:
    """The float64 norm of each float32 row, exactly as ``cosine_scores`` computes it: the
    mirror keeps them per row, and a row's norm does not depend on its neighbours."""
    m = matrix.astype(np.float64)
    return np.asarray(np.sqrt(np.einsum("ij,ij->i", m, m)), dtype=np.float64)


def cosine_scores(matrix: F32, query: F32, norms_of_rows: F64 | None = None) -> F64:
    """Cosine similarity of each row of ``matrix`` with ``query``. ``einsum`` without
    ``optimize`` runs its own per-row loop (no BLAS blocking), so a row's score does not
    depend on the other rows; at the ~20 candidate rows of a search it is also about half
    the cost of two elementwise products and sums. ``norms_of_rows``, when given, is
    ``row_norms(matrix)`` computed beforehand (the same values, bit for bit)."""
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    m = matrix.astype(np.float64)
    q = query.astype(np.float64)
    dots = np.einsum("ij,j->i", m, q)
    if norms_of_rows is None:
        norms = np.sqrt(np.einsum("ij,ij->i", m, m))
    else:
        norms = np.array(norms_of_rows, dtype=np.float64)
    norms *= float(np.sqrt(q @ q))
    dots /= norms
    return np.asarray(dots, dtype=np.float64)


def cosine_rows(matrix: F32, rows: npt.NDArray[np.int64], query: F32, norms: F64) -> F64:
    """``cosine_scores(matrix[rows], query, norms[rows])`` bit for bit (the same casts, the
    same ``einsum`` and the same float64 operations in the same order), in fewer numpy calls:
    the mirror rescores ~20 candidates per search, where each call's fixed cost is most of
    the work. ``rows`` is non-empty; ``norms`` is ``row_norms`` of every row of ``matrix``."""
    m = matrix.take(rows, axis=0).astype(np.float64)
    q = query.astype(np.float64)
    dots: F64 = np.einsum("ij,j->i", m, q)
    scale = norms[rows]  # a copy: fancy indexing
    scale *= math.sqrt(q.dot(q))  # ``q @ q``, the same BLAS dot; sqrt is correctly rounded
    dots /= scale
    return dots


def rank(chunk_ids: list[str], scores: F64, top_k: int) -> list[tuple[str, float]]:
    """Order by score descending, then chunk_id ascending, and keep ``top_k``."""
    ordered = sorted(zip((-scores).tolist(), chunk_ids, strict=True))
    return [(chunk_id, -negated) for negated, chunk_id in ordered[:top_k]]
