"""Search on PostgreSQL stays exact whatever indexes an operator adds.

pgvector's HNSW and IVFFlat indexes answer ``ORDER BY embedding <=> q LIMIT k`` with an
approximate walk, and under a filter they come back short. The store's query is shaped so no
index can serve its order (``(embedding <=> q) + 0``), however often it runs (psycopg
prepares a statement after a few runs, and a prepared plan is kept): with both kinds of
index created on purpose, every search equals the reference store's, hit for hit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import psycopg
import pytest

from ratatoskr.memory import rules
from ratatoskr.memory.postgres.search import _select
from ratatoskr.memory.postgres.store import PgMemoryStore
from ratatoskr.memory.reference import ReferenceMemoryStore
from ratatoskr.ops.locations import open_memory
from ratatoskr.postgres.scope_sql import scope_condition
from ratatoskr.postgres.vectors import Float4Array, register_types
from tests.backends import postgres_schema
from tests.memory.helpers import CTX

DIM = 16
USERS = [f"user-{i}" for i in range(8)]


@pytest.fixture
def stores() -> Iterator[tuple[Any, ReferenceMemoryStore, str]]:
    url = postgres_schema("exact")
    ours = cast(PgMemoryStore, open_memory(url, embedding_dim=DIM))  # a postgresql:// URL
    ref = ReferenceMemoryStore(DIM)
    rng = np.random.default_rng(7)
    records = []
    for i in range(1200):
        vector = rng.standard_normal(DIM).astype(np.float32)
        if i % 50 == 0:  # equal vectors under other ids: ties go by chunk_id
            vector = np.ones(DIM, dtype=np.float32)
        records.append(
            {
                "id": f"c{i:05d}",
                "embedding": vector.tolist(),
                "scope": {"tenant": "t", "end_user": USERS[i % len(USERS)]},
            }
        )
    for lo in range(0, len(records), 400):
        for store in (ours, ref):
            store.upsert_many(records[lo : lo + 400], idempotency_key=f"k{lo}", ctx=CTX)
    yield ours, ref, url
    ours.close()


def _plan(url: str, sql: str, query: list[float]) -> str:
    with psycopg.connect(url) as conn:
        conn.execute("SET enable_seqscan = off")
        rows = conn.execute("EXPLAIN " + sql, (str(query),)).fetchall()
    return "\n".join(r[0] for r in rows)


@pytest.mark.parametrize("index", ["hnsw", "ivfflat"])
def test_search_is_exact_with_an_approximate_index_present(
    stores: tuple[Any, ReferenceMemoryStore, str], index: str
) -> None:
    ours, ref, url = stores
    options = "WITH (m = 2, ef_construction = 4)" if index == "hnsw" else "WITH (lists = 50)"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"CREATE INDEX memory_chunks_{index} ON memory_chunks "
            f"USING {index} (embedding vector_cosine_ops) {options}"
        )
        conn.execute("ANALYZE memory_chunks")
    naive = "SELECT chunk_id FROM memory_chunks ORDER BY embedding <=> %s::vector LIMIT 10"
    probe = np.ones(DIM).tolist()
    assert f"memory_chunks_{index}" in _plan(url, naive, probe)  # the index is tempting

    rng = np.random.default_rng(11)
    filters: list[dict[str, Any]] = [
        {},
        {"scope_all": {"end_user": "user-3"}},
        {"scope_any": [{"end_user": "user-1"}, {"end_user": "user-6"}]},
        {"scope_all": {"tenant": "t"}},
    ]
    for round_ in range(12):  # past psycopg's prepare threshold (5): cached plans too
        query = (np.ones(DIM) if round_ % 4 == 0 else rng.standard_normal(DIM)).tolist()
        for where in filters:
            for top_k in (1, 10, 60):
                got = ours.search(query, top_k=top_k, **where)
                want = ref.search(query, top_k=top_k, **where)
                assert [h["chunk_id"] for h in got] == [h["chunk_id"] for h in want]
                assert [h["score"] for h in got] == [h["score"] for h in want]


def test_search_ranks_vectors_float32_cannot_score(
    stores: tuple[Any, ReferenceMemoryStore, str],
) -> None:
    """pgvector's cosine sums squares in float32: a stored vector of 1e20s overflows (its
    distance 1 whatever its direction), one of 1e-25s sinks to zero (NaN). Such rows come
    from their partial index, always candidates, so they rank where the reference puts
    them, among 1,200 ordinary rows."""
    ours, ref, url = stores
    odd = []
    for i, scale in enumerate((1e20, 1e-25, 3e37, 1e-40, 1e19, 2e-16)):
        vector = np.zeros(DIM)
        vector[i] = scale
        scope = {"tenant": "t", "end_user": USERS[i % 2]}
        odd.append({"id": f"odd{i}", "embedding": vector.tolist(), "scope": scope})
    for store in (ours, ref):
        store.upsert_many(odd, idempotency_key="odd", ctx=CTX)
    for i in range(6):
        query = np.zeros(DIM)
        query[i] = 1.0
        wheres: list[dict[str, Any]] = [
            {},
            {"scope_all": {"end_user": USERS[i % 2]}},
            {"scope_all": {"tenant": "t"}},
        ]
        for where in wheres:
            for top_k in (1, 10):
                got = ours.search(query.tolist(), top_k=top_k, **where)
                want = ref.search(query.tolist(), top_k=top_k, **where)
                assert got[0]["chunk_id"] == f"odd{i}"
                assert [(h["chunk_id"], h["score"]) for h in got] == [
                    (h["chunk_id"], h["score"]) for h in want
                ]
    call = rules.parse_search(
        np.ones(DIM).tolist(), 10, {"tenant": "t"}, None, None, None, None, DIM
    )
    condition, params = scope_condition(call.scope_all, call.scope_any)
    with psycopg.connect(url) as conn:  # far rows from their partial index, not by a scan
        register_types(conn)
        conn.execute("ANALYZE memory_chunks")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN " + _select(condition, False, bounded=False),
                (*params, Float4Array(call.vector), *params, 18),
            ).fetchall()
        )
    assert "memory_chunks_far_norm" in plan, plan
