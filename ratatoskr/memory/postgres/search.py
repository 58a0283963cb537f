"""Exact search in PostgreSQL: whatever indexes exist, never an approximate one.

pgvector's HNSW and IVFFlat scans return short or approximate results under a filter, and a
cached plan can keep using one whatever ``SET enable_indexscan`` says; so exactness comes from
the query's shape: the rows are ordered by ``(embedding <=> q) + 0``, an expression no index
provides, after the scope's ``WHERE`` (indexed axis columns) and before ``LIMIT``. The query
vector is one InitPlan (``(SELECT $1::real[]::vector)``), converted once, not per row.

Then the SQLite store's rule, on the same functions: float32 distances pick ``top_k +
CANDIDATE_MARGIN`` candidates, widened to every row within ``DISTANCE_EPSILON`` of the k-th
when the cut is crowded; their float32 vectors are rescored in float64
(``cosine.cosine_scores``) and ordered by score, then chunk_id (``cosine.rank``). The
candidates' rows come back in the same statement (one round trip, one snapshot).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ratatoskr.core.sql_dialect import AXIS_COLUMNS as COLUMNS
from ratatoskr.memory import rules
from ratatoskr.memory.postgres.schema import FAR_NORM
from ratatoskr.memory.search.cosine import cosine_scores, rank
from ratatoskr.memory.search.hits import stored_record
from ratatoskr.memory.search.ranking import CANDIDATE_MARGIN, unit_query
from ratatoskr.memory.search.sql import DISTANCE_EPSILON
from ratatoskr.postgres.database import Conn
from ratatoskr.postgres.scope_sql import scope_condition
from ratatoskr.postgres.vectors import Float4Array, parse_vector

QUERY = "(SELECT %s::real[]::vector)"
_AXES = ", ".join(("chunk_id", *COLUMNS.values()))  # what a filter and the join read

# one row per candidate: its distance, then what a hit is built from
_ROW = "m.chunk_id, m.revision, m.vector_key, m.embedding, {f64}, m.record_json"


def _select(
    condition: str, include_embedding: bool, *, bounded: bool, partitioned: bool = False
) -> str:
    """The candidates' statement: the rows nearest by pgvector's distance, ordered by it,
    then every far-norm row of the filter (``FAR_NORM``, found by its partial index) with a
    null distance, whose own distance neither takes a place nor sets the cut. The hits'
    rows are joined back by key; partitioned by tenant, the key is ``(tenant, chunk_id)``,
    so each row is looked up in its partition. Parameters: the filter's, the query, the
    filter's again, then the limit (or, ``bounded``, the widened bound)."""
    row = _ROW.format(f64="m.vector_f64" if include_embedding else "NULL::bytea")
    key = "tenant, chunk_id" if partitioned else "chunk_id"
    # every far row first, alone (its partial index: near empty), then the filter on them;
    # with the filter beside it, the planner took an axis index and computed every
    # admitted row's norm (a millisecond for a tenant's 2,000 rows at 768)
    far = (
        f"far_all AS MATERIALIZED (SELECT {_AXES} FROM memory_chunks WHERE {FAR_NORM}), "
        f"far AS (SELECT {key} FROM far_all WHERE {condition})"
    )
    near = (
        f"SELECT {key}, (embedding <=> {QUERY}) + 0 AS d FROM memory_chunks "
        f"WHERE {condition} AND chunk_id NOT IN (SELECT chunk_id FROM far)"
    )
    if bounded:  # every row within the widened bound (a crowded cut)
        nearest = (
            f"SELECT c.d, {row} FROM ({near}) c JOIN memory_chunks m USING ({key}) WHERE c.d <= %s"
        )
    else:
        nearest = (
            f"SELECT c.d, {row} FROM ({near} ORDER BY d, chunk_id LIMIT %s) c "
            f"JOIN memory_chunks m USING ({key})"
        )
    return (
        f"WITH {far} SELECT * FROM ({nearest}) AS nearest "
        f"UNION ALL SELECT NULL::float8, {row} FROM far JOIN memory_chunks m USING ({key})"
    )


def candidate_rows(
    conn: Conn, call: rules.SearchCall, *, snapshot: bool = True, partitioned: bool = False
) -> list[tuple[Any, ...]] | None:
    """Every row that could be in the exact top_k of ``call`` (validated, confined), and
    every row whose vector pgvector's float32 cosine cannot score. When the cut is crowded
    a second statement widens it, which must see the first one's snapshot: without
    ``snapshot`` (an autocommit connection) that case answers ``None``."""
    # the query over its norm: pgvector sums in float32, where a query of tiny or huge
    # values would sink to zero or overflow (its cosine is the same)
    query = Float4Array(unit_query(call.vector))
    want = call.top_k + CANDIDATE_MARGIN
    condition, params = scope_condition(call.scope_all, call.scope_any)
    sql = _select(condition, call.include_embedding, bounded=False, partitioned=partitioned)
    found = conn.execute(sql, (*params, query, *params, want), binary=True).fetchall()
    rows = sorted((r for r in found if r[0] is not None), key=lambda r: float(r[0]))
    far = [r for r in found if r[0] is None]
    if len(rows) < want or rows[-1][0] > rows[call.top_k - 1][0] + DISTANCE_EPSILON:
        return rows + far
    if not snapshot:
        return None
    bound = rows[call.top_k - 1][0] + DISTANCE_EPSILON
    sql = _select(condition, call.include_embedding, bounded=True, partitioned=partitioned)
    return conn.execute(sql, (*params, query, *params, bound), binary=True).fetchall()


def search_hits(
    conn: Conn, call: rules.SearchCall, *, snapshot: bool = True, partitioned: bool = False
) -> list[dict[str, Any]] | None:
    """The hits of ``call``, read in ``conn``'s snapshot (``None``: see ``candidate_rows``)."""
    rows = candidate_rows(conn, call, snapshot=snapshot, partitioned=partitioned)
    if rows is None:
        return None
    if not rows:
        return []
    vectors = [parse_vector(r[4]) for r in rows]
    scores = cosine_scores(np.stack(vectors), call.vector)
    by_id = {bytes(r[1]).decode("utf-8"): (r, v) for r, v in zip(rows, vectors, strict=True)}
    hits = []
    for chunk_id, score in rank(list(by_id), scores, call.top_k):
        row, vector = by_id[chunk_id]
        f64 = bytes(row[5]) if row[5] is not None else None
        record = stored_record(row[3], vector.tobytes(), f64, row[6], call.include_embedding)
        hits.append(rules.search_hit(record, chunk_id, score, row[2], call.include_embedding))
    return hits
