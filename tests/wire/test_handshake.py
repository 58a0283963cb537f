"""The handshake, the probes and the OpenAPI description."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from ratatoskr import __version__
from ratatoskr.affect.verbs import AFFECT_TABLE
from ratatoskr.memory.search.engine import LOADING_REASON
from ratatoskr.memory.search.holds import holding
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from ratatoskr.memory.verbs import memory_table
from ratatoskr.sqlite.jti import JtiLedger
from ratatoskr.wire import readiness
from ratatoskr.wire.openapi import openapi_document
from tests.apps import memory_app
from tests.backends import Backend
from tests.memory.helpers import loaded
from tests.wire.helpers import DIM, KEY, call, envelope, error_code, ok, post, token_for

DOCS = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
BASIC_VERBS = [
    "describe_store",
    "health",
    "upsert_many",
    "search",
    "get",
    "get_many",
    "delete_many",
]


def test_handshake_lists_exactly_the_served_verbs(
    client: TestClient, store: RatatoskrMemoryStore
) -> None:
    result = ok(call(client, "handshake", {}, plane="*"))
    assert result["wire"] == "0.6"
    assert result["consumer_id"] == "ratatoskr"
    assert result["server"] == {"name": "ratatoskr", "version": __version__}
    assert list(result["planes"]) == ["memory"]
    memory = result["planes"]["memory"]
    assert memory["verbs"] == BASIC_VERBS
    assert memory["capabilities"] == store.describe_store()
    assert memory["capabilities"]["relational_edges_supported"] is False
    assert memory["limits"] == {"max_records": 1000, "max_ids": 1000, "max_top_k": 1000}
    assert memory["embedding_dim"] == 8


def test_handshake_for_named_planes(client: TestClient) -> None:
    assert list(ok(call(client, "handshake", {"planes": ["memory"]}, plane="*"))["planes"]) == [
        "memory"
    ]
    response = call(client, "handshake", {"planes": ["affect"]}, plane="*")
    assert (response.status_code, error_code(response)) == (404, "wire.unknown_plane")


def test_handshake_args_are_checked(client: TestClient) -> None:
    args: dict[str, Any]
    for args in ({"planes": "memory"}, {"planes": [1]}, {"other": []}):
        response = call(client, "handshake", args, plane="*")
        assert (response.status_code, error_code(response)) == (400, "wire.malformed_envelope")


def test_handshake_takes_the_handshake_verb_only(client: TestClient) -> None:
    body = envelope("search", {})
    token = token_for(body, plane="*", verb="search")
    response = post(client, body, token, path="/bifrost/handshake")
    assert (response.status_code, error_code(response)) == (401, "auth.binding_mismatch")


def test_every_listed_verb_is_served(client: TestClient) -> None:
    """A verb listed in the handshake never answers unknown or unsupported."""
    for verb in ok(call(client, "handshake", {}, plane="*"))["planes"]["memory"]["verbs"]:
        assert call(client, verb, {}).status_code not in (404, 501)


def test_healthz_touches_no_database(client: TestClient, store: RatatoskrMemoryStore) -> None:
    store.close()
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


DURABLE = {
    "sqlite": "durability FULL: every acknowledged write is on disk",
    # the test cluster runs without durability (tests/pgserver.py): the reason says so
    "postgresql": "durability fsync=off: a crash of the machine may lose acknowledged writes "
    "and damage the database",
}


def test_readyz(client: TestClient, store: RatatoskrMemoryStore, backend: Backend) -> None:
    loaded(store)  # before, the plane is degraded (below)
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "ready": True,
        "planes": {
            "memory": {
                "status": "ok",
                "reason": DURABLE[backend.name.split("-")[0]],
            }
        },
    }
    store.close()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["planes"]["memory"]["status"] == "down"
    assert isinstance(response.json()["planes"]["memory"]["reason"], str)


def test_readyz_answers_in_time_while_a_store_does_not(
    tmp_path: Path, ledger: JtiLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that takes connections but never answers (frozen) holds a health check
    for as long as it is frozen: /readyz still answers, the plane down with the reason, and
    the next probe waits for the same check rather than start another (one held thread)."""
    monkeypatch.setattr(readiness, "HEALTH_DEADLINE", 0.2)
    store = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM, mirror_bytes=0)
    frozen = threading.Event()
    started: list[float] = []
    healthy = store.health

    def held() -> dict[str, Any]:
        started.append(time.monotonic())
        frozen.wait(60)
        return healthy()

    monkeypatch.setattr(store, "health", held)
    with TestClient(memory_app(store, KEY, ledger=ledger)) as client:
        for _ in range(3):
            response = client.get("/readyz")
            assert response.status_code == 503
            memory = response.json()["planes"]["memory"]
            assert memory["status"] == "down" and "did not answer" in memory["reason"]
        assert len(started) == 1
        frozen.set()  # the database answers again: the check under way returns, then new ones
        answers = [client.get("/readyz").status_code for _ in range(2)]
        assert answers == [200, 200] and len(started) >= 2
    store.close()


def test_openapi_is_served_and_matches_the_docs(client: TestClient) -> None:
    served = client.get("/openapi.json")
    assert served.status_code == 200
    document = served.json()
    assert set(document["paths"]) >= {"/bifrost/handshake", "/bifrost/memory-call"}
    assert document == openapi_document([memory_table(768)])  # the planes this app serves
    # the docs describe both planes, as ``ratatoskr serve`` serves them
    on_disk = orjson.loads(DOCS.read_bytes())
    both = openapi_document([memory_table(768), AFFECT_TABLE])
    assert on_disk == both, "regenerate with: python -m ratatoskr.server.openapi_doc"
    assert {"/bifrost/memory-call", "/bifrost/affect-call"} <= set(on_disk["paths"])


def test_readyz_and_health_while_the_search_mirror_loads(tmp_path: Path, ledger: JtiLedger) -> None:
    """Served, slower: ready, with the memory plane degraded and saying why, until the
    worker's first load is done; then ok."""
    with holding("load-started") as hold:
        store = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
        with TestClient(memory_app(store, KEY, ledger=ledger)) as client:
            assert hold.reached.wait(30)
            response = client.get("/readyz")
            assert response.status_code == 200
            reason = f"{LOADING_REASON}; {DURABLE['sqlite']}"  # served, slower; still durable
            loading = {"status": "degraded", "reason": reason}
            assert response.json() == {"ready": True, "planes": {"memory": loading}}
            assert ok(call(client, "health", {})) == loading
            assert ok(call(client, "search", {"vector": [1.0] * DIM, "top_k": 3})) is not None
            hold.release()
            loaded(store)
            assert client.get("/readyz").json()["planes"]["memory"]["status"] == "ok"
            assert ok(call(client, "health", {}))["status"] == "ok"
    store.close()
