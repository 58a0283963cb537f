"""Exact search in SQL, for when the per-process mirror cannot serve (over its memory budget,
loading, or ahead of the reader's snapshot).

It never post-filters a fixed-k result (sqlite-vec would come back short): a scoped search is
a ``WHERE`` over the indexed axis columns ranked by ``vec_distance_cosine`` in the same
statement; an unscoped one asks ``vec0``. Float32 candidates are picked with a margin, and
the final scores are recomputed in float64 (``cosine.py``), as the mirror and the reference
store do.
"""

from __future__ import annotations

import apsw
import numpy as np

from ratatoskr.memory import rules
from ratatoskr.memory.search.cosine import cosine_scores, rank
from ratatoskr.memory.search.ranking import CANDIDATE_MARGIN, SCORE_EPSILON
from ratatoskr.sqlite.scope_sql import placeholders, scope_condition

# a cosine distance is 1 - the score: the same epsilon widens the cut as on the mirror
DISTANCE_EPSILON = SCORE_EPSILON
VEC_MAX_K = 4096


def rank_in_sql(conn: apsw.Connection, call: rules.SearchCall, dim: int) -> list[tuple[str, float]]:
    """The exact top_k of ``call`` (validated, confined) as (chunk_id, score)."""
    found = candidates(conn, call)
    if not found:
        return []
    rows = conn.execute(
        "SELECT chunk_id, embedding FROM memory_chunks "
        f"WHERE chunk_id IN ({placeholders(len(found))})",
        found,
    ).fetchall()
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
    scores = cosine_scores(matrix.reshape(len(rows), dim), call.vector)
    return rank([r[0] for r in rows], scores, call.top_k)


def candidates(conn: apsw.Connection, call: rules.SearchCall) -> list[str]:
    """Every chunk that could be in the exact top_k: the float32 top_k plus all rows whose
    float32 distance lies within ``DISTANCE_EPSILON`` of the k-th."""
    query = call.vector.tobytes()
    want = call.top_k + CANDIDATE_MARGIN
    condition, params = scope_condition(call.scope_all, call.scope_any)
    if condition == "1" and want <= VEC_MAX_K:
        rows = conn.execute(
            "SELECT chunk_id, distance FROM memory_vec WHERE embedding MATCH ? AND k = ?",
            (query, want),
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT chunk_id, vec_distance_cosine(embedding, ?) AS d FROM memory_chunks "
            f"WHERE {condition} ORDER BY d LIMIT ?",
            (query, *params, want),
        ).fetchall()
    if len(rows) < want or rows[-1][1] > rows[call.top_k - 1][1] + DISTANCE_EPSILON:
        return [r[0] for r in rows]
    bound = rows[call.top_k - 1][1] + DISTANCE_EPSILON
    wide = conn.execute(
        f"SELECT chunk_id FROM (SELECT chunk_id, vec_distance_cosine(embedding, ?) AS d "
        f"FROM memory_chunks WHERE {condition}) WHERE d <= ?",
        (query, *params, bound),
    ).fetchall()
    return [r[0] for r in wide]
