"""The order of checks: each request fails two checks, and the earlier one must answer."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
from starlette.testclient import TestClient
from starlette.types import Message, Scope

from ratatoskr.memory.store import RatatoskrMemoryStore
from ratatoskr.sqlite.jti import JtiLedger
from tests.apps import memory_app
from tests.wire.helpers import (
    KEY,
    OTHER_KEY,
    envelope,
    error_code,
    ok,
    post,
    record,
    token_for,
    vec,
)


def _code(response: Any) -> tuple[int, str]:
    return response.status_code, error_code(response)


def test_1_size_before_media_type_and_token(store: RatatoskrMemoryStore) -> None:
    with TestClient(memory_app(store, KEY, max_body_bytes=16)) as client:
        response = post(client, b"x" * 17, None, content_type="text/plain")
        assert _code(response) == (413, "wire.payload_too_large")


def test_1_media_type_before_token(client: TestClient) -> None:
    assert _code(post(client, b"{}", None, content_type="text/plain")) == (
        415,
        "wire.unsupported_media_type",
    )


def test_2_token_before_body_is_parsed(client: TestClient) -> None:
    assert _code(post(client, b"not json at all", None)) == (401, "auth.missing_token")
    bad = token_for(b"not json at all", key=OTHER_KEY)
    assert _code(post(client, b"not json at all", bad)) == (401, "auth.invalid_token")


def test_3_body_binding_before_envelope(client: TestClient) -> None:
    token = token_for(b"some other body")
    assert _code(post(client, b"not json at all", token)) == (401, "auth.binding_mismatch")


def test_4_envelope_before_plane_and_verb_claims(client: TestClient) -> None:
    body = b'{"wire": "0.6", "verb": "health", "args": {}, "bogus": 1}'
    token = token_for(body, plane="affect", verb="other")
    assert _code(post(client, body, token)) == (400, "wire.malformed_envelope")


def test_4_plane_claim_before_verb_lookup(client: TestClient) -> None:
    body = envelope("frobnicate", {})
    token = token_for(body, plane="affect", verb="frobnicate")
    assert _code(post(client, body, token)) == (401, "auth.binding_mismatch")


def test_4_verb_claim_before_verb_lookup(client: TestClient) -> None:
    body = envelope("frobnicate", {})
    token = token_for(body, verb="search")
    assert _code(post(client, body, token)) == (401, "auth.binding_mismatch")


def test_5_unknown_and_unsupported_before_args(client: TestClient) -> None:
    for verb, expected in (("frobnicate", 404), ("scan", 501)):
        body = envelope(verb, {"nonsense": True})
        assert post(client, body, token_for(body, verb=verb)).status_code == expected


def test_6_args_before_scope(client: TestClient) -> None:
    args = {"vector": vec(1), "top_k": 0, "scope_all": {"tenant": "elsewhere"}}
    body = envelope("search", args)
    assert _code(post(client, body, token_for(body))) == (400, "memory.invalid_arguments")


def test_6_args_before_replay(client: TestClient) -> None:
    good = envelope("delete_many", {"ids": ["a"]})
    token = token_for(good, verb="delete_many", jti="one-jti")
    ok(post(client, good, token))
    bad = envelope("delete_many", {"ids": []})
    again = token_for(bad, verb="delete_many", jti="one-jti")
    assert _code(post(client, bad, again)) == (400, "memory.invalid_arguments")


def test_7_scope_before_replay_and_a_refused_call_does_not_spend_the_token(
    client: TestClient, ledger: JtiLedger, store: RatatoskrMemoryStore
) -> None:
    args = {"records": [record("a", vec(1), scope={"tenant": "other"})], "idempotency_key": "k"}
    body = envelope("upsert_many", args)
    token = token_for(body, verb="upsert_many")
    assert _code(post(client, body, token)) == (403, "scope.forbidden")
    assert _code(post(client, body, token)) == (403, "scope.forbidden")
    assert ledger.count() == 0
    assert store.get("a") is None


def test_8_replay_before_store(client: TestClient, store: RatatoskrMemoryStore) -> None:
    args = {"records": [record("a", vec(1))], "idempotency_key": "k"}
    body = envelope("upsert_many", args)
    token = token_for(body, verb="upsert_many")
    assert ok(post(client, body, token)) == {"upserted": 1, "replayed": False}
    store.delete_many(["a"])
    assert _code(post(client, body, token)) == (401, "auth.token_replayed")
    assert store.get("a") is None  # the replayed call never reached the store


def test_1_oversized_stream_is_refused_without_reading_it_all(
    store: RatatoskrMemoryStore,
) -> None:
    """Over raw ASGI with no Content-Length: the app stops pulling chunks past the limit."""
    app = memory_app(store, KEY, max_body_bytes=100)
    pulled = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"x" * 10, "more_body": pulled < 10_000}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/bifrost/memory-call",
        "raw_path": b"/bifrost/memory-call",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    anyio.run(app, scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert start["status"] == 413
    assert orjson.loads(body)["error"]["code"] == "wire.payload_too_large"
    assert pulled <= 12
