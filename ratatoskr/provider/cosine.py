"""Exact cosine scores, computed the same way by the SQLite store and the reference store.

Vectors are kept as float32 (the stored precision); scores are computed in float64 row by
row (elementwise product, then a per-row sum), so a row's score does not depend on which
other rows share the matrix: equal vectors always get equal scores, and both stores agree
bit for bit.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


def cosine_scores(matrix: F32, query: F32) -> F64:
    """Cosine similarity of each row of ``matrix`` with ``query``."""
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    m = np.ascontiguousarray(matrix, dtype=np.float64)
    q = query.astype(np.float64)
    dots = (m * q).sum(axis=1)
    norms = np.sqrt((m * m).sum(axis=1)) * float(np.sqrt((q * q).sum()))
    return np.asarray(dots / norms, dtype=np.float64)


def rank(chunk_ids: list[str], scores: F64, top_k: int) -> list[tuple[str, float]]:
    """Order by score descending, then chunk_id ascending, and keep ``top_k``."""
    order = sorted(range(len(chunk_ids)), key=lambda i: (-scores[i], chunk_ids[i]))
    return [(chunk_ids[i], float(scores[i])) for i in order[:top_k]]
