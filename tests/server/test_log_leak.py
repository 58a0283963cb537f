"""Nothing a caller sends, nor the key, nor a token, reaches the server's stdout or stderr.

Markers ride in record content, in args, in token claims and in malformed tokens, through
every verb of both planes, through failing calls and through a forced internal error (a
table renamed under the running server). The server is then stopped and everything it wrote
is searched.
"""

from __future__ import annotations

from typing import Any

import apsw
import httpx
import orjson
import sqlite_vec

from ratatoskr.wire.tokens import mint_token
from tests.server.harness import KEY, Server, call, envelope, post, token, vec

MARKER = "zq-LEAK-4b1d-content"
TOKEN_MARKER = "zq-LEAK-9e2c-token"


def _marked(chunk_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": chunk_id,
        "embedding": vec(1),
        "scope": {"tenant": "acme"},
        "distillate": MARKER,
        "opaque": {"note": MARKER},
        **fields,
    }


def _state(sid: str) -> dict[str, Any]:
    return {"id": sid, "scope": {"tenant": "acme"}, "mood": MARKER}


def _event(eid: str) -> dict[str, Any]:
    return {"id": eid, "at": "2026-01-01T00:00:00Z", "scope": {"tenant": "acme"}, "note": MARKER}


def _every_verb(url: str) -> list[httpx.Response]:
    claim = {"extra": {"note": TOKEN_MARKER}}
    good = {"records": [_marked("m1")], "idempotency_key": "k1"}
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("*", "handshake", {}),
        ("memory", "describe_store", {}),
        ("memory", "health", {}),
        ("memory", "upsert_many", good),
        ("memory", "upsert_many", good),
        (
            "memory",
            "upsert_many",
            {"records": [_marked("m1", embedding=vec(0, 1))], "idempotency_key": "k1"},
        ),
        (
            "memory",
            "upsert_many",
            {"records": [_marked("m2", embedding=[MARKER])], "idempotency_key": "k2"},
        ),
        (
            "memory",
            "upsert_many",
            {"records": [_marked("m3", scope={"tenant": MARKER})], "idempotency_key": "k3"},
        ),
        ("memory", "search", {"vector": vec(1), "top_k": 5}),
        ("memory", "search", {"vector": vec(1), "top_k": 5, "scope_all": {"end_user": MARKER}}),
        ("memory", "get", {"chunk_id": "m1"}),
        ("memory", "get_many", {"ids": ["m1", MARKER]}),
        ("memory", "scan", {"q": MARKER}),
        ("memory", MARKER, {}),
        ("memory", "delete_many", {"ids": ["m1"]}),
        ("affect", "describe_store", {}),
        ("affect", "health", {}),
        ("affect", "put_many", {"records": [_state("s1")], "idempotency_key": "p1"}),
        ("affect", "put_many", {"records": [_state("s1"), _state("s1")], "idempotency_key": "p2"}),
        ("affect", "get", {"id": "s1"}),
        ("affect", "get_many", {"ids": ["s1", MARKER]}),
        ("affect", "list", {"limit": 10, "scope_all": {"group": MARKER}}),
        ("affect", "append_events", {"events": [_event("e1")], "idempotency_key": "a1"}),
        (
            "affect",
            "append_events",
            {"events": [{**_event("e1"), "note": "x"}], "idempotency_key": "a2"},
        ),
        ("affect", "read_events", {"limit": 10}),
        ("affect", "read_events", {"limit": 10, "cursor": MARKER}),
        ("affect", "delete_many", {"ids": ["s1"]}),
        ("affect", MARKER, {MARKER: MARKER}),
    ]
    responses = [call(url, plane, verb, args, **claim) for plane, verb, args in calls]
    body = envelope("get", {"chunk_id": "m1"})
    responses.append(post(url, "/bifrost/memory-call", body, f"{TOKEN_MARKER}.{TOKEN_MARKER}.x"))
    forged = mint_token(b"w" * 32, plane="memory", verb="get", scope={}, sub="a", body=body)
    responses.append(post(url, "/bifrost/memory-call", body, forged))
    responses.append(post(url, "/bifrost/memory-call", body, None))
    wrong = token(body, "affect", "get", **claim)  # bound to another plane
    responses.append(post(url, "/bifrost/memory-call", body, wrong))
    tampered = envelope("get", {"chunk_id": MARKER})
    responses.append(post(url, "/bifrost/memory-call", tampered, token(body, "memory", "get")))
    responses.append(post(url, f"/bifrost/{MARKER}-call", body, token(body, "memory", "get")))
    responses.append(httpx.get(f"{url}/readyz?{MARKER}={TOKEN_MARKER}"))
    raw = orjson.dumps({"wire": MARKER, "verb": "get", "args": {}})
    responses.append(post(url, "/bifrost/memory-call", raw, token(raw, "memory", "get")))
    return responses


def _force_internal_error(server: Server, url: str) -> httpx.Response:
    """Rename a table the store needs under the running server: its next write fails with
    an error the wire does not know, which must come back as a bare ``internal``."""
    conn = apsw.Connection(str(server.root / "data" / "memory.db"))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute("ALTER TABLE memory_idempotency RENAME TO moved_away")
    conn.close()
    args = {"records": [_marked("boom")], "idempotency_key": MARKER}
    return call(url, "memory", "upsert_many", args, extra={"note": TOKEN_MARKER})


def test_no_content_key_or_token_in_server_output(server: Server) -> None:
    responses = _every_verb(server.url)
    internal = _force_internal_error(server, server.url)
    assert internal.status_code == 500 and internal.json()["error"]["code"] == "internal"
    statuses = {r.status_code for r in responses}
    assert statuses >= {200, 400, 401, 403, 404, 409, 501}
    assert server.terminate() == 0

    output = server.output()
    assert output.count('"event":"bifrost.call"') >= len(responses) - 2  # two never reach a plane
    assert "bifrost internal error" in output and "SQLError" in output
    request_id = internal.headers["X-Request-ID"]
    error_lines = [
        line
        for line in server.log_lines()
        if line.get("request_id") == request_id and "internal error" in str(line["event"])
    ]
    assert len(error_lines) == 1 and error_lines[0]["error"] == "SQLError"
    assert '"path":"<other>"' in output  # the unknown route is logged without its path
    assert MARKER not in output
    assert TOKEN_MARKER not in output
    assert KEY not in output
    for response in [*responses, internal]:
        request = response.request
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        if len(bearer) > 20:
            assert bearer not in output
            signature = bearer.split(".")[-1]
            assert len(signature) < 20 or signature not in output  # nor the signature alone
