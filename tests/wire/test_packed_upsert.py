"""An upsert over HTTP, its vectors read straight into float32, stores what the store's own
``upsert_many`` stores for the same records: the same rows to the byte, the same digest
(a retry through either path is a replay), and a search answers the same, on every
backend (the twin is a second store of the same backend)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from ratatoskr.affect.verbs import AFFECT_TABLE
from ratatoskr.core.context import CallContext
from ratatoskr.memory.body import split_search, split_upsert
from ratatoskr.memory.packed import PackedVector
from ratatoskr.memory.store import RatatoskrMemoryStore
from ratatoskr.memory.verbs import memory_plane
from ratatoskr.wire.envelope import decode_object
from ratatoskr.wire.plane import Plane
from tests.backends import Backend
from tests.wire.helpers import DIM, TENANT, call, ok

# the stored row, as each backend keeps it (PostgreSQL's vector column read as its text)
ROWS = (
    "SELECT chunk_id, revision, scope_json, {embedding}, vector_key, vector_f64, record_json "
    "FROM memory_chunks ORDER BY chunk_id"
)
DIGESTS = "SELECT digest FROM memory_idempotency ORDER BY digest"


@pytest.fixture
def twin(backend: Backend, tmp_path: Path) -> Iterator[Any]:
    s = backend.memory(backend.fresh(tmp_path, "twin"), embedding_dim=DIM)
    yield s
    s.close()


def batch() -> list[dict[str, Any]]:
    rng = np.random.default_rng(11)
    records: list[dict[str, Any]] = [
        {
            "id": f"c{i}",
            "embedding": rng.standard_normal(DIM).astype(np.float32).tolist(),
            "scope": {**TENANT, "end_user": f"u{i % 3}"},
            "distillate": f"memory {i}",
            "meta": {"embedding": [0.5, 1], "weight": 0.25},
        }
        for i in range(12)
    ]
    records[3]["embedding"][2] = 0.1  # not a float32: kept in float64
    records[4] = {**records[4], "vector": records[4].pop("embedding")}
    records[5]["embedding"][0] = -0.0
    return records


def select(store: Any, sql: str) -> list[tuple[Any, ...]]:
    """``sql``'s rows from the store's own tables, on either backend."""
    if isinstance(store, RatatoskrMemoryStore):
        with store.db.read() as conn:
            return [tuple(row) for row in conn.execute(sql.format(embedding="embedding"))]
    text = sql.format(embedding="embedding::text")
    found: list[tuple[Any, ...]] = store.db.read(
        lambda conn: [tuple(row) for row in conn.execute(text).fetchall()]
    )
    return found


def rows(store: Any) -> list[tuple[Any, ...]]:
    return select(store, ROWS)


def digests(store: Any) -> list[str]:
    return [row[0] for row in select(store, DIGESTS)]


def test_http_and_the_store_itself_store_the_same(
    client: TestClient, store: Any, twin: Any
) -> None:
    records = batch()
    args = {"records": records, "idempotency_key": "turn-1"}
    assert ok(call(client, "upsert_many", args)) == {
        "upserted": 12,
        "replayed": False,
    }
    ctx = CallContext(actor="worldtree", scope=TENANT)
    twin.upsert_many(batch(), idempotency_key="turn-1", ctx=ctx)
    assert rows(store) == rows(twin)
    assert digests(store) == digests(twin)
    # the same payload through the other path is a replay; another one is a conflict
    assert store.upsert_many(batch(), idempotency_key="turn-1", ctx=ctx)["replayed"] is True
    assert ok(call(client, "upsert_many", args))["replayed"] is True
    changed = batch()
    changed[0]["embedding"][0] = 1  # an integer: another payload to the digest
    conflict = call(client, "upsert_many", {"records": changed, "idempotency_key": "turn-1"})
    assert conflict.json()["error"]["code"] == "memory.idempotency_conflict"
    got = ok(call(client, "get_many", {"ids": ["c3", "c4", "c5"]}))
    assert [g["id"] for g in got] == ["c3", "c4", "c5"]
    expected = batch()
    assert got[0]["embedding"] == expected[3]["embedding"]
    assert got[1]["vector"] == expected[4]["vector"]
    assert str(got[2]["embedding"][0]) == "-0.0"


def test_a_search_over_http_answers_as_the_store_itself(client: TestClient, store: Any) -> None:
    args = {"records": batch(), "idempotency_key": "turn-1"}
    ok(call(client, "upsert_many", args))
    query = np.random.default_rng(5).standard_normal(DIM).astype(np.float32).tolist()
    query[1] = 0.1
    hits = ok(call(client, "search", {"vector": query, "top_k": 5}))
    own = store.search(query, top_k=5, ctx=CallContext(actor="worldtree", scope=TENANT))
    assert hits == own


@pytest.mark.parametrize(
    "vector, message",
    [
        ([0.0] * DIM, "all zero"),
        ([1e39] + [0.5] * (DIM - 1), "beyond float32 range"),
        ([0.5] * (DIM - 1), f"list of {DIM} numbers"),
        ([0.5] * (DIM * 1000), f"list of {DIM} numbers"),
    ],
)
def test_a_packed_vector_that_is_not_valid_is_refused_as_before(
    client: TestClient, store: Any, vector: list[float], message: str
) -> None:
    records = batch()
    records[7]["embedding"] = vector
    answer = call(client, "upsert_many", {"records": records, "idempotency_key": "k"}).json()
    assert answer["error"]["code"] == "memory.invalid_arguments"
    assert "records[7] (id c7).embedding" in answer["error"]["message"]
    assert message in answer["error"]["message"]
    refused = call(client, "search", {"vector": vector, "top_k": 1}).json()
    assert refused["error"]["code"] == "memory.invalid_arguments"
    assert message in refused["error"]["message"]
    assert rows(store) == []


def test_only_the_memory_plane_reads_its_vectors_packed(store: Any) -> None:
    splits = {v.name: v.split for v in memory_plane(store).table.verbs}
    assert splits.pop("upsert_many") is split_upsert
    assert splits.pop("search") is split_search
    assert set(splits.values()) == {None}
    assert {v.split for v in AFFECT_TABLE.verbs} == {None}  # states' opaque fields untouched
    text = b'{"args":{"records":[{"id":"a","embedding":[0.5]}]}}'
    packed = memory_plane(store).decode("upsert_many", text)["args"]["records"][0]
    assert isinstance(packed["embedding"], PackedVector)
    affect = Plane(AFFECT_TABLE, store)
    assert affect.decode("put_many", text) == decode_object(text)
