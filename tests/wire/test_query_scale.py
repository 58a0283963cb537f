"""A query's scale does not change its answer over the wire: a cosine does not depend on a
vector's length, down to values float32 cannot hold (1e-44 keeps one digit there, 1e-50
none), on every backend."""

from __future__ import annotations

import random

from starlette.testclient import TestClient

from tests.wire.helpers import DIM, call, error_code, ok, record


def test_a_tiny_query_finds_what_the_same_direction_finds(client: TestClient) -> None:
    rng = random.Random(11)
    vectors = [[rng.gauss(0, 1) for _ in range(DIM)] for _ in range(30)]
    records = [record(f"c{i:02d}", v) for i, v in enumerate(vectors)]
    ok(call(client, "upsert_many", {"records": records, "idempotency_key": "seed"}))
    query = [rng.gauss(0, 1) for _ in range(DIM)]
    unit = ok(call(client, "search", {"vector": query, "top_k": 30}))
    for scale in (1e-44, 1e-50, 1e-300):
        scaled = [scale * x for x in query]
        hits = ok(call(client, "search", {"vector": scaled, "top_k": 30}))
        assert [h["chunk_id"] for h in hits] == [h["chunk_id"] for h in unit], scale
        worst = max(abs(a["score"] - b["score"]) for a, b in zip(hits, unit, strict=True))
        assert worst < 1e-6, (scale, worst)
    zero = call(client, "search", {"vector": [0.0] * DIM, "top_k": 3})
    assert (zero.status_code, error_code(zero)) == (400, "memory.invalid_arguments")
