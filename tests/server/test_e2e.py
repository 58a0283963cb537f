"""Both planes over real HTTP to a real gunicorn with two workers, and replay across them."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.server.harness import (
    Server,
    call,
    envelope,
    ok,
    poll,
    post,
    token,
    vec,
)


def test_handshake_serves_both_planes(shared_server: Server) -> None:
    result = ok(call(shared_server.url, "*", "handshake", {}))
    assert set(result["planes"]) == {"memory", "affect"}
    assert result["planes"]["memory"]["embedding_dim"] == 8


def test_memory_plane_stores_and_recalls(shared_server: Server) -> None:
    url = shared_server.url
    record = {"id": "c1", "embedding": vec(1), "scope": {"tenant": "acme"}, "distillate": "d"}
    args = {"records": [record], "idempotency_key": "turn-1"}
    assert ok(call(url, "memory", "upsert_many", args)) == {"upserted": 1, "replayed": False}
    assert ok(call(url, "memory", "upsert_many", args))["replayed"] is True
    hits = ok(call(url, "memory", "search", {"vector": vec(1), "top_k": 3}))
    assert [h["chunk_id"] for h in hits] == ["c1"]
    assert ok(call(url, "memory", "get", {"chunk_id": "c1"}))["distillate"] == "d"
    assert ok(call(url, "memory", "delete_many", {"ids": ["c1"]})) == {"deleted": 1}


def test_affect_plane_stores_and_reads(shared_server: Server) -> None:
    url = shared_server.url
    state = {"id": "s1", "scope": {"tenant": "acme"}, "mood": "calm"}
    assert ok(call(url, "affect", "put_many", {"records": [state], "idempotency_key": "p1"}))
    assert ok(call(url, "affect", "get", {"id": "s1"}))["mood"] == "calm"
    event = {"id": "e1", "at": "2026-01-01T00:00:00Z", "scope": {"tenant": "acme"}, "kind": "joy"}
    assert ok(call(url, "affect", "append_events", {"events": [event], "idempotency_key": "a1"}))
    page = ok(call(url, "affect", "read_events", {"limit": 10}))
    assert [e["id"] for e in page["events"]] == ["e1"]


def test_probes_and_documents(shared_server: Server) -> None:
    url = shared_server.url
    assert httpx.get(url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(url + "/readyz")
    assert ready.status_code == 200
    assert {p: v["status"] for p, v in ready.json()["planes"].items()} == {
        "memory": "ok",
        "affect": "ok",
    }
    paths = httpx.get(url + "/openapi.json").json()["paths"]
    assert "/bifrost/memory-call" in paths and "/bifrost/affect-call" in paths
    assert "ratatoskr_plane_health" in httpx.get(url + "/metrics").text


def test_a_replayed_token_is_refused_whichever_worker_answers(shared_server: Server) -> None:
    """One token for a mutating call, sent many times at once: it runs exactly once."""
    url = shared_server.url
    record = {"id": "r1", "embedding": vec(0, 1), "scope": {"tenant": "acme"}, "distillate": "x"}
    body = envelope(
        "upsert_many", {"records": [record], "idempotency_key": "once"}, request_id="replay-probe"
    )
    bearer = token(body, "memory", "upsert_many")

    def send(_: int) -> httpx.Response:
        return post(url, "/bifrost/memory-call", body, bearer)

    def answered_by_both() -> list[httpx.Response] | None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            batch = list(pool.map(send, range(16)))
        responses.extend(batch)
        pids = {
            line["pid"]
            for line in shared_server.log_lines()
            if line.get("request_id") == "replay-probe"
        }
        return responses if len(pids) >= 2 else None

    responses: list[httpx.Response] = []
    poll(answered_by_both, 20, "both workers to answer the replayed token", step=0)
    codes = [r.status_code for r in responses]
    assert codes.count(200) == 1, codes
    refused = [r.json()["error"]["code"] for r in responses if r.status_code != 200]
    assert set(refused) == {"auth.token_replayed"}


def test_each_calls_access_line_carries_its_request_id(shared_server: Server) -> None:
    url = shared_server.url
    body = envelope("search", {"vector": vec(2), "top_k": 1}, request_id="access-probe-ok")
    assert post(url, "/bifrost/memory-call", body, token(body, "memory", "search")).is_success
    refused = post(url, "/bifrost/affect-call", envelope("list", {}), "not-a-token")
    assert refused.status_code == 401  # refused before the body is read: a request id of ours
    assert httpx.get(url + "/healthz").status_code == 200

    # requests no plane takes: their only line, the access line, carries their request id
    def lines_with(request_id: str) -> list[dict[str, object]] | None:
        found = [line for line in shared_server.log_lines() if line.get("request_id") == request_id]
        return found or None

    for unrouted, status in (
        (httpx.get(url + "/bifrost/affect-call"), 405),
        (httpx.post(url + "/bifrost/nope", content=b"{}"), 404),
    ):
        assert unrouted.status_code == status
        request_id = unrouted.headers["X-Request-ID"]
        (line,) = poll(functools.partial(lines_with, request_id), 20, f"the line of {request_id}")
        assert line["event"] == "http.access" and line["status"] == status

    def lines_of(request_id: str) -> list[dict[str, object]] | None:
        found = [line for line in shared_server.log_lines() if line.get("request_id") == request_id]
        return found if len(found) == 2 else None

    for request_id, status in (
        ("access-probe-ok", 200),
        (refused.headers["X-Request-ID"], 401),
    ):
        call_line, access_line = sorted(
            poll(functools.partial(lines_of, request_id), 20, f"the lines of {request_id}"),
            key=lambda line: str(line["event"]),
        )
        assert call_line["event"] == "bifrost.call" and access_line["event"] == "http.access"
        assert access_line["status"] == status and call_line["pid"] == access_line["pid"]
    health = [line for line in shared_server.log_lines() if line.get("path") == "/healthz"]
    assert health and all("request_id" not in line for line in health)  # not a call
