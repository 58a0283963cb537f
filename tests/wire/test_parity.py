"""The same scripted calls through the same app over the SQLite store and the reference store
give the same wire answers (status, code, result; scores within 1e-5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from ratatoskr.memory.reference import ReferenceMemoryStore
from ratatoskr.memory.store import open_memory_store
from ratatoskr.sqlite.health import DURABILITY
from tests.apps import memory_app
from tests.wire.helpers import DIM, KEY, call, record, vec

ACME = {"tenant": "acme"}
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("describe_store", {}),
    ("health", {}),
    (
        "upsert_many",
        {
            "records": [
                record("a", vec(1, 0), scope={"tenant": "acme", "end_user": "u1"}),
                record("b", vec(1, 1), scope={"tenant": "acme", "end_user": "u2"}),
                record("c", vec(0, 1), scope={"tenant": "acme", "agent_self": "s"}),
                record("d", vec(1, 0), scope={"tenant": "acme"}, payload={"x": [1, 2]}),
            ],
            "idempotency_key": "k1",
        },
    ),
    (
        "upsert_many",
        {
            "records": [
                record("a", vec(1, 0), scope={"tenant": "acme", "end_user": "u1"}),
                record("b", vec(1, 1), scope={"tenant": "acme", "end_user": "u2"}),
                record("c", vec(0, 1), scope={"tenant": "acme", "agent_self": "s"}),
                record("d", vec(1, 0), scope={"tenant": "acme"}, payload={"x": [1, 2]}),
            ],
            "idempotency_key": "k1",
        },
    ),  # noqa: E501
    ("upsert_many", {"records": [record("a", vec(3, 1))], "idempotency_key": "k1"}),
    (
        "upsert_many",
        {
            "records": [record("a", vec(3, 1), scope={"tenant": "acme", "end_user": "u1"})],
            "idempotency_key": "k2",
            "expected_revisions": {"a": 1},
        },
    ),
    (
        "upsert_many",
        {
            "records": [record("b", vec(3, 1))],
            "idempotency_key": "k3",
            "expected_revisions": {"b": 5},
        },
    ),
    ("search", {"vector": vec(1, 0), "top_k": 3}),
    ("search", {"vector": vec(1, 0), "top_k": 10, "include": {"embedding": False}}),
    (
        "search",
        {"vector": vec(0.5, 1), "top_k": 2, "scope_any": [{"end_user": "u2"}, {"agent_self": "s"}]},
    ),  # noqa: E501
    ("search", {"vector": vec(1), "top_k": 5, "scope_all": {"end_user": "u1"}}),
    ("search", {"vector": vec(1), "top_k": 5, "scope_all": {"tenant": "globex"}}),
    ("search", {"vector": vec(1), "top_k": 5, "scope_all": {"colour": "red"}}),
    ("get", {"chunk_id": "a"}),
    ("get", {"chunk_id": "zzz"}),
    ("get_many", {"ids": ["d", "zzz", "a", "d"]}),
    ("delete_many", {"ids": ["b", "zzz"]}),
    ("search", {"vector": vec(1, 1), "top_k": 10}),
    (
        "upsert_many",
        {"records": [record("e", vec(1), scope={"tenant": "globex"})], "idempotency_key": "k4"},
    ),  # noqa: E501
    ("upsert_many", {"records": [record("e", vec(0))], "idempotency_key": "k5"}),
    ("scan", {}),
    ("frobnicate", {}),
]


def _normalise(response: Any) -> dict[str, Any]:
    body = response.json()
    body.pop("request_id")
    return {"status": response.status_code, **body}


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-5
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_sqlite_and_reference_give_the_same_wire_answers(tmp_path: Path) -> None:
    sqlite_store = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    apps = [
        memory_app(sqlite_store, KEY),
        memory_app(ReferenceMemoryStore(DIM), KEY),
    ]
    try:
        with TestClient(apps[0]) as sqlite_client, TestClient(apps[1]) as reference_client:
            for step, (verb, args) in enumerate(SCRIPT):
                mine = _normalise(call(sqlite_client, verb, args, scope=ACME))
                theirs = _normalise(call(reference_client, verb, args, scope=ACME))
                if verb == "health":  # a file names its durability; the reference has none
                    assert mine["result"].pop("reason") == DURABILITY["FULL"]
                    assert theirs["result"].pop("reason") is None
                assert _close(mine, theirs), (step, verb, mine, theirs)
    finally:
        sqlite_store.close()
