"""Every verb of both planes through ``Client`` and ``AsyncClient`` against a real server:
the wire's own results, cursors followed to the end, numpy and list vectors alike."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ratatoskr.client import AsyncClient, Client
from tests.server.harness import DIM, KEY, Server


def record(chunk_id: str, tenant: str, vector: Any, **fields: Any) -> dict[str, Any]:
    return {
        "id": chunk_id,
        "embedding": vector,
        "scope": {"tenant": tenant, **fields.pop("scope", {})},
        "distillate": f"about {chunk_id}",
        **fields,
    }


def unit(i: int) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(DIM)]


def test_handshake_lists_both_planes(client: Client) -> None:
    result = client.handshake()
    assert result["wire"] == "0.6"
    assert set(result["planes"]) == {"memory", "affect"}
    assert result["planes"]["memory"]["embedding_dim"] == DIM
    assert client.catalog is not None and "search" in client.catalog.verbs["memory"]
    assert set(client.handshake(planes=["affect"])["planes"]) == {"affect"}


def test_every_memory_verb(client: Client, tenant: str) -> None:
    memory = client.memory
    assert memory.describe_store()["optimistic_locking_supported"] is True
    assert memory.health()["status"] == "ok"
    records = [
        record("a", tenant, unit(0), scope={"end_user": "u1"}),
        record("b", tenant, unit(1), scope={"end_user": "u2"}),
        record("c", tenant, [0.6, 0.8] + [0.0] * (DIM - 2)),
    ]
    assert memory.upsert_many(records, idempotency_key="k1") == {"upserted": 3, "replayed": False}
    assert memory.upsert_many(records, idempotency_key="k1")["replayed"] is True
    hits = memory.search(unit(0), top_k=2, include={"embedding": False})
    assert [h["chunk_id"] for h in hits] == ["a", "c"]
    assert hits[0]["score"] == 1.0 and "embedding" not in hits[0]["chunk"]
    assert hits[0]["recalled_view"] == "about a"
    scoped = memory.search(unit(0), top_k=5, scope_any=[{"end_user": "u2"}])
    assert [h["chunk_id"] for h in scoped] == ["b"]
    got = memory.get("a")
    assert got is not None and got["embedding"] == unit(0) and got["revision"] == 1
    assert memory.get("missing") is None
    assert [r["id"] for r in memory.get_many(["c", "missing", "a"])] == ["c", "a"]
    again = memory.upsert_many(
        [record("a", tenant, unit(2))], idempotency_key="k2", expected_revisions={"a": 1}
    )
    assert again == {"upserted": 1, "replayed": False}
    assert memory.delete_many(["a", "b", "missing"]) == {"deleted": 2}
    assert [r["id"] for r in memory.get_many(["a", "b", "c"])] == ["c"]


def neutral(value: Any) -> Any:
    """``value`` without what tells two tenants' copies apart: the ids' and scopes' tenant."""
    if isinstance(value, dict):
        return {k: None if k == "scope" else neutral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [neutral(v) for v in value]
    if isinstance(value, str) and value.startswith("tenant-"):
        return value.rpartition("-")[2]
    return value


def test_numpy_and_list_vectors_give_the_same_results(server: Server, tenant: str) -> None:
    """A float32 array, or a list of its numpy scalars, is sent as the float32 values (as
    ``tolist()`` would send them): the same stored record, the same scores to the bit; a
    float64 array as its values."""
    rng = np.random.default_rng(4)
    arrays = rng.standard_normal((6, DIM)).astype(np.float32)
    wide = rng.standard_normal(DIM)  # float64, not float32-exact
    query = rng.standard_normal(DIM).astype(np.float32)
    results = []
    wire_forms: tuple[tuple[str, Callable[[npt.NDArray[np.floating[Any]]], object]], ...] = (
        ("np", lambda v: v),
        ("list", lambda v: v.tolist()),
        ("scalars", list),  # a list of numpy scalars: each sent as its value, as tolist()
    )
    for name, as_wire in wire_forms:
        scope = {"tenant": f"{tenant}-{name}"}
        ids = [f"{tenant}-{name}-r{i}" for i in range(6)] + [f"{tenant}-{name}-wide"]
        with Client(server.url, key=KEY, scope=scope, actor=tenant) as client:
            records = [
                {"id": ids[i], "embedding": as_wire(v), "scope": scope}
                for i, v in enumerate(arrays)
            ]
            records.append({"id": ids[-1], "vector": as_wire(wide), "scope": scope})
            client.memory.upsert_many(records, idempotency_key=f"same-{name}")
            hits = client.memory.search(as_wire(query), top_k=7)
            stored = client.memory.get_many(ids)
        results.append((neutral(hits), neutral(stored)))
    assert results[0] == results[1] == results[2]
    assert results[0][1][0]["embedding"] == arrays[0].tolist()
    assert results[0][1][-1]["vector"] == wide.tolist()
    assert [h["chunk_id"] for h in results[0][0]][:1] != []
    # a strided view and a float16 array are vectors too
    with Client(server.url, key=KEY, scope={"tenant": tenant}, actor=tenant) as client:
        strided = np.ascontiguousarray(np.tile(arrays[0], 2))[::2]
        half = arrays[1].astype(np.float16)
        client.memory.upsert_many(
            [
                {"id": f"{tenant}-s", "embedding": strided, "scope": {"tenant": tenant}},
                {"id": f"{tenant}-h", "embedding": half, "scope": {"tenant": tenant}},
            ],
            idempotency_key="views",
        )
        s, h = client.memory.get_many([f"{tenant}-s", f"{tenant}-h"])
        assert s["embedding"] == strided.tolist() and h["embedding"] == half.tolist()
        # numpy scalars elsewhere in a record go as their values too
        fields = {"w": np.float32(0.1), "n": np.int64(3), "b": np.bool_(True)}
        record = {"id": f"{tenant}-f", "embedding": arrays[2], "scope": {"tenant": tenant}}
        client.memory.upsert_many([{**record, **fields}], idempotency_key="fields")
        got = client.memory.get(f"{tenant}-f")
        assert got is not None and (got["w"], got["n"], got["b"]) == (
            float(np.float32(0.1)),
            3,
            True,
        )
        assert got["w"] != 0.1


def test_every_affect_verb_and_cursors_to_the_end(client: Client, tenant: str) -> None:
    affect = client.affect
    assert affect.describe_store()["event_log_supported"] is True
    assert affect.health()["status"] == "ok"
    states: list[dict[str, Any]] = [
        {"id": f"s{i:02}", "scope": {"tenant": tenant, "end_user": f"u{i % 2}"}, "mood": i}
        for i in range(23)
    ]
    assert affect.put_many(states, idempotency_key="p1") == {"written": 23, "replayed": False}
    assert affect.get("s03") == {**states[3], "revision": 1}
    assert affect.get("nope") is None
    assert [s["id"] for s in affect.get_many(["s01", "nope", "s00"])] == ["s01", "s00"]
    first = affect.list(limit=5)
    assert len(first["records"]) == 5 and first["next_cursor"] is not None
    listed = list(affect.iter_list(page_size=4))
    assert [s["id"] for s in listed] == [s["id"] for s in states]
    users = list(affect.iter_list(scope_all={"end_user": "u1"}, page_size=3))
    assert [s["id"] for s in users] == [s["id"] for s in states if s["mood"] % 2]
    events = [
        {
            "id": f"e{i:02}",
            "at": f"2026-01-01T00:00:{i:02}Z",
            "scope": {"tenant": tenant},
            "kind": "joy",
        }
        for i in range(17)
    ]
    assert affect.append_events(events, idempotency_key="a1") == {
        "appended": 17,
        "replayed": False,
    }
    page = affect.read_events(limit=5, order="desc")
    assert [e["id"] for e in page["events"]] == ["e16", "e15", "e14", "e13", "e12"]
    assert [e["id"] for e in affect.iter_events(page_size=4)] == [e["id"] for e in events]
    late = affect.iter_events(since="2026-01-01T00:00:10Z", order="desc", page_size=3)
    assert [e["id"] for e in late] == [f"e{i:02}" for i in range(16, 9, -1)]
    assert affect.delete_many(["s00", "s01", "nope"]) == {"deleted": 2}
    assert len(list(affect.iter_list())) == 21


def test_the_async_client_serves_every_verb(server: Server, tenant: str) -> None:
    async def scenario() -> None:
        scope = {"tenant": tenant}
        async with AsyncClient(server.url, key=KEY, scope=scope, actor=tenant) as client:
            assert (await client.handshake())["planes"]["memory"]["embedding_dim"] == DIM
            memory, affect = client.memory, client.affect
            records = [record(f"m{i}", tenant, unit(i)) for i in range(4)]
            upserted = await memory.upsert_many(records, idempotency_key="k")
            assert upserted == {"upserted": 4, "replayed": False}
            searches = await asyncio.gather(*(memory.search(unit(i), top_k=1) for i in range(4)))
            assert [s[0]["chunk_id"] for s in searches] == ["m0", "m1", "m2", "m3"]
            assert (await memory.get("m1") or {})["id"] == "m1"
            assert len(await memory.get_many(["m0", "m3"])) == 2
            assert (await memory.describe_store())["transaction_supported"] is False
            assert (await memory.health())["status"] == "ok"
            assert await memory.delete_many(["m0"]) == {"deleted": 1}
            states = [{"id": f"s{i}", "scope": scope} for i in range(7)]
            assert (await affect.put_many(states, idempotency_key="p"))["written"] == 7
            assert (await affect.get("s2") or {})["id"] == "s2"
            assert len(await affect.get_many(["s1", "s5"])) == 2
            assert len((await affect.list(limit=3))["records"]) == 3
            assert [s["id"] async for s in affect.iter_list(page_size=2)] == [
                f"s{i}" for i in range(7)
            ]
            events = [
                {"id": f"e{i}", "at": f"2026-02-0{i + 1}T00:00:00Z", "scope": scope}
                for i in range(5)
            ]
            assert (await affect.append_events(events, idempotency_key="a"))["appended"] == 5
            assert len((await affect.read_events(limit=2))["events"]) == 2
            assert [e["id"] async for e in affect.iter_events(page_size=2)] == [
                f"e{i}" for i in range(5)
            ]
            assert (await affect.describe_store())["event_log_supported"] is True
            assert (await affect.health())["status"] == "ok"
            assert await affect.delete_many(["s0"]) == {"deleted": 1}

    asyncio.run(scenario())


def test_a_scoped_copy_shares_the_connections(client: Client, tenant: str) -> None:
    client.memory.upsert_many([record("x", tenant, unit(0))], idempotency_key="k")
    other = client.with_scope({"tenant": f"{tenant}-other"}, actor="someone")
    assert other.transport is client.transport
    assert other.memory.get("x") is None  # outside its scope: indistinguishable from missing
    assert client.memory.get("x") is not None
    other.close()  # not its pool: the original still works
    assert client.memory.health()["status"] == "ok"


def test_a_0d_array_goes_as_its_value(client: Client, tenant: str) -> None:
    """A 0-d array anywhere in a record is stored as ``tolist()`` gives it, a scalar, not a
    one-element list; a float32 one as its value, as a float32 scalar is."""
    record = {
        "id": f"{tenant}-0d",
        "embedding": np.ones(DIM, dtype=np.float32),
        "scope": {"tenant": tenant},
        "x": np.array(3.5),
        "deep": {"f32": [np.array(0.1, dtype=np.float32)], "n": np.array(7)},
    }
    client.memory.upsert_many([record], idempotency_key="0d")
    got = client.memory.get(f"{tenant}-0d")
    assert got is not None
    assert got["x"] == 3.5
    assert got["deep"] == {"f32": [float(np.float32(0.1))], "n": 7}
