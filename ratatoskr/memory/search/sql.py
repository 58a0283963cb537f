"""Exact search in SQL, for when the per-process mirror cannot serve (over its memory budget,
loading, or ahead of the reader's snapshot).

It never post-filters a fixed-k result (sqlite-vec would come back short): a scoped search is
a ``WHERE`` over the indexed axis columns ranked by ``vec_distance_cosine`` in the same
statement; an unscoped one asks ``vec0``. Float32 candidates are picked with a margin, and
the final scores are recomputed in float64 (``cosine.py``), as the mirror and the reference
store do.

Each statement returns **one row**: the candidates' ids, records and vectors aggregated in
SQL (``json_group_array``, and the vector blobs concatenated). apsw lets go of the GIL for
every step of a statement, and a thread that wants it back while another runs Python waits
up to the interpreter's switch interval (5 ms) for it. The mirror's worker during its first
load is such a thread; a search stepping its ~50 rows one at a time beside one busy Python
thread took up to 165 ms, against 0.5 ms alone, and 30 ms with one step per statement
(``bench/sql_gil.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import apsw
import numpy as np
import orjson

from ratatoskr.memory import rules
from ratatoskr.memory.schema import far_norm_sql
from ratatoskr.memory.search.cosine import cosine_scores, rank
from ratatoskr.memory.search.hits import Row, hit_from_row
from ratatoskr.memory.search.ranking import CANDIDATE_MARGIN, SCORE_EPSILON, unit_query
from ratatoskr.sqlite.scope_sql import scope_condition

# a cosine distance is 1 - the score: the same epsilon widens the cut as on the mirror
DISTANCE_EPSILON = SCORE_EPSILON
VEC_MAX_K = 4096

# the rows of ``m`` (memory_chunks) in one result row: per row its id, revision, vector key
# and record JSON, then every float32 vector concatenated (in the same order: one
# aggregation pass), then, when asked, the float64 vectors' lengths (null: not sent) and the
# sent ones concatenated
_ROWS = (
    "json_group_array(json_array(m.chunk_id, m.revision, m.vector_key, m.record_json)), "
    "CAST(group_concat(m.embedding, '') AS BLOB), "
)
_WIDE = "json_group_array(length(m.vector_f64)), CAST(group_concat(m.vector_f64, '') AS BLOB)"
_NARROW = "NULL, NULL"


class Found(NamedTuple):
    """Candidate rows read in one statement: (id, revision, vector key, record JSON) each,
    their float32 vectors as one matrix, and each one's float64 blob (``None``: not sent,
    or not asked for)."""

    meta: list[list[Any]]
    matrix: np.ndarray[Any, np.dtype[np.float32]]
    wide: list[bytes | None]

    def row(self, i: int) -> Row:
        chunk_id, revision, key, record = self.meta[i]
        return (chunk_id, revision, key, self.matrix[i], self.wide[i], record)  # a view


def rank_in_sql(conn: apsw.Connection, call: rules.SearchCall, dim: int) -> list[dict[str, Any]]:
    """The exact top_k hits of ``call`` (validated, confined), read in ``conn``'s snapshot."""
    found = candidates(conn, call, dim)
    if not found.meta:
        return []
    scores = cosine_scores(found.matrix, call.vector)
    ranked = rank([m[0] for m in found.meta], scores, call.top_k)
    at = {m[0]: i for i, m in enumerate(found.meta)}
    include = call.include_embedding
    return [hit_from_row(found.row(at[cid]), score, include) for cid, score in ranked]


def candidates(conn: apsw.Connection, call: rules.SearchCall, dim: int) -> Found:
    """Every chunk that could be in the exact top_k: the float32 top_k plus all rows whose
    float32 distance lies within ``DISTANCE_EPSILON`` of the k-th, and every row whose
    vector float32 cannot score (``schema.far_norm_sql``: its distance says nothing)."""
    # the query over its norm: sqlite-vec sums in float32, where a query of tiny or huge
    # values would sink to zero or overflow (its cosine is the same)
    query = unit_query(call.vector).tobytes()
    want = call.top_k + CANDIDATE_MARGIN
    wide = _WIDE if call.include_embedding else _NARROW
    condition, params = scope_condition(call.scope_all, call.scope_any)
    # the far rows' ids as one JSON array (one row, as every statement here); their
    # distances (NULL, -inf, or anything) neither take a place nor set the cut
    skip = conn.execute(
        "SELECT json_group_array(rowid) FROM memory_chunks INDEXED BY memory_chunks_far_norm "
        f"WHERE {condition} AND {far_norm_sql(dim)}",
        params,
    ).fetchall()[0][0]
    far: list[int] = orjson.loads(skip)
    if condition == "1" and want <= VEC_MAX_K and not far:
        near = (
            "SELECT chunk_id AS r, distance AS d FROM memory_vec WHERE embedding MATCH ? AND k = ?"
        )
        joined = "m.chunk_id = k.r"
        near_params: tuple[Any, ...] = (query, want)
    else:
        near = (
            f"SELECT rowid AS r, vec_distance_cosine(embedding, ?) AS d FROM memory_chunks "
            f"WHERE {condition} ORDER BY d LIMIT ?"
        )
        joined = "m.rowid = k.r"
        near_params = (query, *params, want + len(far))
    count, last, kth, *rows = conn.execute(
        f"WITH c AS MATERIALIZED ({near}), "
        f"k AS (SELECT * FROM c WHERE r NOT IN (SELECT value FROM json_each(?))) "
        f"SELECT count(*), max(k.d), (SELECT d FROM k ORDER BY d LIMIT 1 OFFSET ?), {_ROWS}{wide} "
        f"FROM k JOIN memory_chunks AS m ON {joined}",
        (*near_params, skip, call.top_k - 1),
    ).fetchall()[0]
    if count < want or last > kth + DISTANCE_EPSILON:
        return _with_far(conn, _found(rows, dim), skip, wide, dim)
    # a crowded cut: every row within the epsilon of the k-th
    rows = conn.execute(
        f"SELECT {_ROWS}{wide} FROM (SELECT rowid AS r, vec_distance_cosine(embedding, ?) AS d "
        f"FROM memory_chunks WHERE {condition}) AS c JOIN memory_chunks AS m ON m.rowid = c.r "
        "WHERE c.d <= ? AND c.r NOT IN (SELECT value FROM json_each(?))",
        (query, *params, kth + DISTANCE_EPSILON, skip),
    ).fetchall()[0]
    return _with_far(conn, _found(rows, dim), skip, wide, dim)


def _with_far(conn: apsw.Connection, found: Found, far: str, wide: str, dim: int) -> Found:
    """``found`` and the far rows beside it (``far``: their rowids as a JSON array; read in
    the same snapshot)."""
    if far == "[]":
        return found
    rows = conn.execute(
        f"SELECT {_ROWS}{wide} FROM memory_chunks AS m "
        "WHERE m.rowid IN (SELECT value FROM json_each(?))",
        (far,),
    ).fetchall()[0]
    extra = _found(rows, dim)
    return Found(
        found.meta + extra.meta,
        np.concatenate((found.matrix, extra.matrix)),
        found.wide + extra.wide,
    )


def _found(row: Sequence[Any], dim: int) -> Found:
    """A ``Found`` from the aggregated columns (``_ROWS`` and the float64 pair)."""
    meta_json, vectors, wide_lengths, wide_blob = row
    meta: list[list[Any]] = orjson.loads(meta_json)
    if not meta:
        return Found([], np.zeros((0, dim), dtype=np.float32), [])
    blob = vectors if vectors is not None else b""
    if len(blob) != 4 * dim * len(meta):
        raise ValueError("a stored embedding does not have the store's dimension")
    matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(meta), dim)
    wide: list[bytes | None] = [None] * len(meta)
    if wide_lengths is not None:
        offset = 0
        for i, length in enumerate(orjson.loads(wide_lengths)):
            if length is not None:
                wide[i] = wide_blob[offset : offset + length]
                offset += length
    return Found(meta, matrix, wide)
