"""Record content never reaches a log line or an error body, whatever the call's outcome."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from ratatoskr.memory.store import RatatoskrMemoryStore
from tests.apps import memory_app
from tests.wire.helpers import KEY, OTHER_KEY, call, envelope, post, record, token_for, vec

MARKER = "zq-MARKER-7f3a9c-content"


def marked(chunk_id: str, vector: list[Any], **fields: Any) -> dict[str, Any]:
    return record(
        chunk_id, vector, distillate=MARKER, opaque={"note": MARKER, "n": [MARKER]}, **fields
    )


def _nested(levels: int) -> dict[str, Any]:
    """Dicts ``levels`` deep, each key the marker: too deep to store."""
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {MARKER: value}
    return value


def _every_outcome(client: TestClient) -> list[Any]:
    good = {"records": [marked("m1", vec(1))], "idempotency_key": "k1"}
    responses = [
        call(client, "upsert_many", good),
        call(client, "upsert_many", good),  # idempotent replay
        call(
            client, "upsert_many", {"records": [marked("m1", vec(0, 1))], "idempotency_key": "k1"}
        ),
        call(
            client,
            "upsert_many",
            {
                "records": [marked("m1", vec(1))],
                "idempotency_key": "k2",
                "expected_revisions": {"m1": 9},
            },
        ),
        call(client, "upsert_many", {"records": [marked("m2", [MARKER])], "idempotency_key": "k3"}),
        call(
            client,
            "upsert_many",
            {"records": [marked("m3", vec(1), origin="injected_context")], "idempotency_key": "k4"},
        ),
        call(
            client,
            "upsert_many",
            {"records": [marked("m4", vec(1), scope={"tenant": "other"})], "idempotency_key": "k5"},
        ),
        call(
            client,
            "upsert_many",
            {"records": [marked("m5", vec(1), scope={MARKER: "x"})], "idempotency_key": "k6"},
        ),
        call(
            client,
            "upsert_many",
            {"records": [marked("m6", vec(1))], "idempotency_key": "k7", MARKER: 1},
        ),
        call(
            client,
            "upsert_many",
            {"records": [marked("m7", vec(1), deep=_nested(70))], "idempotency_key": "k8"},
        ),
        call(client, "search", {"vector": vec(1), "top_k": 5}),
        call(client, "search", {"vector": vec(1), "top_k": 5, "scope_all": {"end_user": MARKER}}),
        call(client, "search", {"vector": vec(1), "top_k": 5, "metadata_filter": {"q": MARKER}}),
        call(client, "get", {"chunk_id": "m1"}),
        call(client, "get_many", {"ids": ["m1", "nothing"]}),
        call(client, "delete_many", {"ids": ["m1"]}),
        call(client, "scan", {"q": MARKER}),
        call(client, "frobnicate", {"q": MARKER}),
        call(client, MARKER, {}),
        call(client, "get", {"chunk_id": "m1"}, key=OTHER_KEY),
    ]
    body = orjson.dumps({"wire": "0.6", "verb": "get", "args": {}, "x": MARKER})
    responses.append(post(client, body, token_for(body, verb="get")))
    body = orjson.dumps({"wire": MARKER, "verb": "get", "args": {}})
    responses.append(post(client, body, token_for(body, verb="get")))
    body = orjson.dumps({"wire": "0.6", "verb": "get", "args": {}, "request_id": "r\t" + MARKER})
    responses.append(post(client, body, token_for(body, verb="get")))
    tampered = envelope("upsert_many", good)
    responses.append(post(client, tampered, token_for(b"{}", verb="upsert_many")))
    responses.append(post(client, tampered, None))
    responses.append(post(client, tampered, "not-a-token", content_type="text/plain"))
    return responses


def test_marker_never_logged(store: RatatoskrMemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with TestClient(memory_app(store, KEY, max_body_bytes=1 << 20)) as client:
        responses = _every_outcome(client)
        oversized = envelope(
            "upsert_many",
            {"records": [marked("big", vec(1))] * 3, "idempotency_key": MARKER * 50000},
        )
        responses.append(post(client, oversized, token_for(oversized, verb="upsert_many")))
    statuses = {r.status_code for r in responses}
    assert statuses >= {200, 400, 401, 403, 404, 409, 413, 415, 501}
    wire_lines = [r for r in caplog.records if r.name == "ratatoskr.wire"]
    assert len(wire_lines) == len(responses)
    for line in caplog.records:
        assert MARKER not in line.getMessage()
        assert MARKER not in repr(line.__dict__)
    assert MARKER not in caplog.text
    for response in responses:
        body = response.json()
        if not body["ok"]:
            assert MARKER not in response.text, body["error"]["code"]


def test_one_line_per_call_with_the_call_facts(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ratatoskr")
    body = envelope("get_many", {"ids": ["a", "b", "c"]}, request_id="trace-me")
    post(client, body, token_for(body, verb="get_many", sub="worldtree-7"))
    (line,) = [r for r in caplog.records if r.name == "ratatoskr.wire"]
    facts = line.bifrost  # type: ignore[attr-defined]
    assert facts["request_id"] == "trace-me"
    assert (facts["plane"], facts["verb"], facts["actor"]) == ("memory", "get_many", "worldtree-7")
    assert (facts["outcome"], facts["status"], facts["ids"], facts["results"]) == ("ok", 200, 3, 0)
    assert facts["duration_ms"] >= 0
    assert "trace-me" in line.getMessage()
