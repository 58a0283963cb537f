"""Every row of the wire's error table, each through the real app over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import orjson
import pytest
from starlette.testclient import TestClient

from ratatoskr.core.context import CallContext
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from ratatoskr.sqlite.database import DatabaseSettings
from ratatoskr.wire.plane import Plane, Verb, VerbTable, no_args
from tests.apps import memory_app, plane_app
from tests.wire.helpers import (
    DIM,
    KEY,
    OTHER_KEY,
    call,
    envelope,
    error_code,
    ok,
    past,
    post,
    record,
    token_for,
    vec,
)


def _status_code(response: Any) -> tuple[int, str]:
    return response.status_code, error_code(response)


def test_payload_too_large(store: RatatoskrMemoryStore) -> None:
    with TestClient(memory_app(store, KEY, max_body_bytes=64)) as client:
        body = envelope("search", {"vector": vec(1), "top_k": 1})
        assert len(body) > 64
        assert _status_code(post(client, body, token_for(body))) == (
            413,
            "wire.payload_too_large",
        )


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", ""])
def test_unsupported_media_type(client: TestClient, content_type: str) -> None:
    body = envelope("health", {})
    response = post(client, body, token_for(body, verb="health"), content_type=content_type)
    assert _status_code(response) == (415, "wire.unsupported_media_type")


def test_json_with_charset_is_accepted(client: TestClient) -> None:
    body = envelope("health", {})
    token = token_for(body, verb="health")
    ok(post(client, body, token, content_type="application/json; charset=utf-8"))


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"\xff\xfe{}",
        b"[1, 2]",
        b'"a string"',
        b'{"verb": "health", "args": {}}',
        b'{"wire": 0.6, "verb": "health", "args": {}}',
        b'{"wire": "0.6", "args": {}}',
        b'{"wire": "0.6", "verb": "", "args": {}}',
        b'{"wire": "0.6", "verb": 7, "args": {}}',
        b'{"wire": "0.6", "verb": "health"}',
        b'{"wire": "0.6", "verb": "health", "args": []}',
        b'{"wire": "0.6", "verb": "health", "args": {}, "extra": 1}',
        b'{"wire": "0.6", "verb": "health", "args": {}, "request_id": ""}',
        b'{"wire": "0.6", "verb": "health", "args": {}, "request_id": "tab\\there"}',
        b'{"wire": "0.6", "verb": "health", "args": {}, "request_id": "\xc3\xa9"}',
        b'{"wire": "0.6", "verb": "health", "args": {}, "request_id": 5}',
        b'{"wire": "0.6", "verb": "health", "args": {}, "request_id": null}',
        b'{"wire": "0.6", "verb": "health", "args": {}, "request_id": ""}',
    ],
)
def test_malformed_envelope(client: TestClient, body: bytes) -> None:
    response = post(client, body, token_for(body, verb="health"))
    assert _status_code(response) == (400, "wire.malformed_envelope")


def test_request_id_of_129_characters_is_malformed(client: TestClient) -> None:
    body = envelope("health", {}, request_id="r" * 129)
    response = post(client, body, token_for(body, verb="health"))
    assert _status_code(response) == (400, "wire.malformed_envelope")


def test_request_id_is_echoed_in_body_and_header(client: TestClient) -> None:
    body = envelope("health", {}, request_id="trace-42 ok~")
    response = post(client, body, token_for(body, verb="health"))
    ok(response)
    assert response.json()["request_id"] == "trace-42 ok~"
    assert response.headers["x-request-id"] == "trace-42 ok~"


def test_request_id_is_generated_when_absent(client: TestClient) -> None:
    first = call(client, "health", {})
    second = call(client, "health", {})
    assert first.json()["request_id"] != second.json()["request_id"]
    assert first.headers["x-request-id"] == first.json()["request_id"]


def test_unsupported_version(client: TestClient) -> None:
    body = b'{"wire": "0.5", "verb": "health", "args": {}}'
    response = post(client, body, token_for(body, verb="health"))
    assert _status_code(response) == (400, "wire.unsupported_version")


def test_unknown_plane_in_handshake(client: TestClient) -> None:
    response = call(client, "handshake", {"planes": ["memory", "affect"]}, plane="*")
    assert _status_code(response) == (404, "wire.unknown_plane")


def test_other_planes_route_is_404(client: TestClient) -> None:
    body = envelope("put_many", {})
    response = post(client, body, token_for(body, plane="affect"), path="/bifrost/affect-call")
    assert _status_code(response) == (404, "wire.unknown_plane")


@pytest.mark.parametrize("authorization", [None, "", "Bearer", "Bearer   ", "Basic dXNlcjpwdw=="])
def test_missing_token(client: TestClient, authorization: str | None) -> None:
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    response = client.post("/bifrost/memory-call", content=envelope("health", {}), headers=headers)
    assert _status_code(response) == (401, "auth.missing_token")


def test_invalid_token(client: TestClient) -> None:
    response = call(client, "health", {}, key=OTHER_KEY)
    assert _status_code(response) == (401, "auth.invalid_token")


def test_binding_mismatch(client: TestClient) -> None:
    body = envelope("health", {})
    response = post(client, body, token_for(body, verb="describe_store"))
    assert _status_code(response) == (401, "auth.binding_mismatch")


def test_token_replayed(client: TestClient) -> None:
    body = envelope("delete_many", {"ids": ["a"]})
    token = token_for(body, verb="delete_many")
    ok(post(client, body, token))
    assert _status_code(post(client, body, token)) == (401, "auth.token_replayed")


def test_scope_forbidden(client: TestClient) -> None:
    response = call(client, "search", {"vector": vec(1), "top_k": 1, "scope_all": {"tenant": "x"}})
    assert _status_code(response) == (403, "scope.forbidden")


def test_unknown_verb(client: TestClient) -> None:
    assert _status_code(call(client, "frobnicate", {})) == (404, "memory.unknown_verb")


@pytest.mark.parametrize(
    "verb",
    [
        "upsert_edges",
        "get_edges_for",
        "scan",
        "mark_invalid",
        "mark_superseded",
        "patch_many",
        "atomic_supersede",
    ],
)
def test_gated_verbs_are_unsupported(client: TestClient, verb: str) -> None:
    assert _status_code(call(client, verb, {})) == (501, "memory.unsupported")


@pytest.mark.parametrize(
    ("verb", "args"),
    [
        ("search", {"vector": vec(1), "top_k": 0}),
        ("search", {"vector": [1.0, 2.0], "top_k": 1}),
        ("search", {"vector": vec(1), "top_k": 1, "surprise": True}),
        ("search", {"vector": vec(1), "top_k": 1, "metadata_filter": {"a": 1}}),
        ("upsert_many", {"records": [], "idempotency_key": "k"}),
        ("upsert_many", {"records": [record("a", vec(1))]}),
        ("upsert_many", {"records": [record("a", vec(0))], "idempotency_key": "k"}),
        (
            "upsert_many",
            {"records": [record("a", vec(1), origin="injected_context")], "idempotency_key": "k"},
        ),
        ("get", {}),
        ("get", {"chunk_id": 7}),
        ("get_many", {"ids": []}),
        ("delete_many", {"ids": "a"}),
        ("describe_store", {"x": 1}),
        ("health", {"x": 1}),
    ],
)
def test_invalid_arguments(client: TestClient, verb: str, args: dict[str, Any]) -> None:
    assert _status_code(call(client, verb, args)) == (400, "memory.invalid_arguments")


def test_invalid_filter(client: TestClient) -> None:
    response = call(client, "search", {"vector": vec(1), "top_k": 1, "scope_all": {"planet": "x"}})
    assert _status_code(response) == (400, "memory.invalid_filter")


def test_idempotency_conflict(client: TestClient) -> None:
    ok(call(client, "upsert_many", {"records": [record("a", vec(1))], "idempotency_key": "k"}))
    response = call(
        client, "upsert_many", {"records": [record("a", vec(0, 1))], "idempotency_key": "k"}
    )
    assert _status_code(response) == (409, "memory.idempotency_conflict")


def test_revision_mismatch_carries_the_mismatches(client: TestClient) -> None:
    args = {
        "records": [record("a", vec(1))],
        "idempotency_key": "k",
        "expected_revisions": {"a": 3},
    }
    response = call(client, "upsert_many", args)
    assert _status_code(response) == (409, "memory.revision_mismatch")
    assert response.json()["error"]["details"] == {
        "mismatches": [{"id": "a", "expected": 3, "actual": 0}]
    }


def test_unavailable_when_the_database_is_locked(tmp_path: Path) -> None:
    path = str(tmp_path / "locked.db")
    settings = DatabaseSettings(busy_timeout_ms=20, page_size=65536)
    store = open_memory_store(path, embedding_dim=DIM, settings=settings)
    holder = apsw.Connection(path)
    try:
        with TestClient(memory_app(store, KEY)) as client:
            holder.execute("BEGIN IMMEDIATE")
            response = call(
                client, "upsert_many", {"records": [record("a", vec(1))], "idempotency_key": "k"}
            )
            holder.execute("ROLLBACK")
        assert _status_code(response) == (503, "memory.unavailable")
        assert response.json()["error"]["retryable"] is True
    finally:
        holder.close()
        store.close()


class _Exploding:
    def health(self) -> dict[str, Any]:
        return {"status": "ok", "reason": None}


def _explode(store: Any, prepared: Any, ctx: CallContext) -> Any:
    raise RuntimeError("the store leaked SECRET-VALUE-123 into its message")


@pytest.fixture
def exploding_client(tmp_path: Path) -> Iterator[TestClient]:
    """A plane whose verb raises an unexpected exception: the framework serves any table."""
    table = VerbTable(
        plane="probe",
        verbs=(Verb("boom", no_args, _explode),),
        unsupported=frozenset(),
        describe=lambda store: {"capabilities": {}, "limits": {}},
    )
    app = plane_app([Plane(table, _Exploding())], KEY)
    with TestClient(app) as client:
        yield client


def test_internal_error_says_only_that(
    exploding_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    response = call(exploding_client, "boom", {}, plane="probe")
    assert _status_code(response) == (500, "internal")
    assert response.json()["error"]["message"] == "internal error"
    assert "SECRET-VALUE-123" not in response.text
    assert "SECRET-VALUE-123" not in caplog.text
    assert "RuntimeError" in caplog.text  # the redacted traceback names the type and frames


def test_expired_token_is_invalid_not_internal(client: TestClient) -> None:
    response = call(client, "health", {}, now=past(3600))
    assert _status_code(response) == (401, "auth.invalid_token")


def _raw_envelope(verb: str, args_json: bytes) -> bytes:
    return b'{"wire":"0.6","verb":"' + verb.encode() + b'","args":' + args_json + b"}"


def _record_json(**fields_json: bytes) -> bytes:
    """A valid record as JSON text, with ``fields_json`` spliced in as raw JSON."""
    text = orjson.dumps(record("a", vec(1)))[:-1]
    return text + b"".join(b',"' + k.encode() + b'":' + v for k, v in fields_json.items()) + b"}"


@pytest.mark.parametrize(
    "literal", [b"-9223372036854775809", b"-99999999999999999999", b"18446744073709551616"]
)
@pytest.mark.parametrize("where", ["record field", "embedding", "expected_revisions"])
def test_an_integer_beyond_64_bits_is_refused_and_nothing_stored(
    client: TestClient, literal: bytes, where: str
) -> None:
    """Either side of the 64-bit range, wherever it is: refused, never stored as a float."""
    if where == "record field":
        records, expected = _record_json(x=literal), b""
    elif where == "embedding":
        records = _record_json()[:-1].replace(b'"embedding":[1.0', b'"embedding":[' + literal)
        records += b"}"
        expected = b""
    else:
        records, expected = _record_json(), b',"expected_revisions":{"a":' + literal + b"}"
    args = b'{"records":[' + records + b'],"idempotency_key":"k"' + expected + b"}"
    body = _raw_envelope("upsert_many", args)
    response = post(client, body, token_for(body, verb="upsert_many"))
    assert _status_code(response) == (400, "wire.malformed_envelope")
    assert response.json()["error"]["message"] == "the body holds an integer beyond 64 bits"
    assert literal.lstrip(b"-").decode() not in response.text
    assert ok(call(client, "get", {"chunk_id": "a"})) is None


def test_the_edges_of_the_64_bit_range_are_stored_exactly(client: TestClient) -> None:
    records = _record_json(low=b"-9223372036854775808", high=b"18446744073709551615")
    body = _raw_envelope("upsert_many", b'{"records":[' + records + b'],"idempotency_key":"k"}')
    ok(post(client, body, token_for(body, verb="upsert_many")))
    stored = ok(call(client, "get", {"chunk_id": "a"}))
    assert (stored["low"], stored["high"]) == (-(1 << 63), (1 << 64) - 1)


DEEP = b"[" * 1100 + b"]" * 1100


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"1e400", "the body holds a number beyond the range of a 64-bit float"),
        (b"-1.5e309", "the body holds a number beyond the range of a 64-bit float"),
        (b"1" + b"0" * 400, "the body holds an integer beyond 64 bits"),
        (DEEP, "the body nests arrays and objects deeper than 1024 levels"),
        (
            b'"\\ud800"',
            "the body holds a lone surrogate escape (\\ud800..\\udfff without its pair), "
            "which UTF-8 cannot carry",
        ),
        (
            b'"x\\udc00"',
            "the body holds a lone surrogate escape (\\ud800..\\udfff without its pair), "
            "which UTF-8 cannot carry",
        ),
        (b'"\xff\xfe"', "the body is not UTF-8 JSON"),
        (b"NaN", "the body is not UTF-8 JSON"),
        (b"[1,", "the body is not UTF-8 JSON"),
    ],
)
def test_json_beyond_the_parsers_limits_is_told_apart_from_broken_json(
    client: TestClient, value: bytes, message: str
) -> None:
    records = _record_json(note=value)
    body = _raw_envelope("upsert_many", b'{"records":[' + records + b'],"idempotency_key":"k"}')
    response = post(client, body, token_for(body, verb="upsert_many"))
    assert _status_code(response) == (400, "wire.malformed_envelope")
    assert response.json()["error"]["message"] == message
    assert "about a" not in response.text  # the record's distillate
    assert ok(call(client, "get", {"chunk_id": "a"})) is None


def test_nesting_up_to_the_parsers_depth_reaches_the_arguments(client: TestClient) -> None:
    # the envelope, args and a key: 1024 levels in all, what the parser takes
    body = _raw_envelope("health", b'{"x":' + b"[" * 1022 + b"]" * 1022 + b"}")
    response = post(client, body, token_for(body, verb="health"))
    assert _status_code(response) == (400, "memory.invalid_arguments")


def _assert_envelope(response: Any, status: int, code: str) -> None:
    assert response.headers["content-type"] == "application/json"
    assert _status_code(response) == (status, code)
    assert response.json()["error"]["retryable"] is False


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"])
@pytest.mark.parametrize(
    "path", ["/bifrost/memory-call", "/bifrost/handshake", "/bifrost/affect-call"]
)
def test_a_wire_route_without_post_is_405_in_the_envelope(
    client: TestClient, method: str, path: str
) -> None:
    body = envelope("health", {})
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token_for(body)}"}
    response = client.request(method, path, content=body, headers=headers)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    if method != "HEAD":  # a HEAD answer has no body
        _assert_envelope(response, 405, "wire.method_not_allowed")
    assert ok(call(client, "health", {}))["status"] == "ok"


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize(
    "path", ["/bifrost", "/bifrost/", "/bifrost/memory", "/bifrost/memory-call/", "/bifrost/a/b"]
)
def test_an_unknown_path_under_bifrost_is_404_in_the_envelope(
    client: TestClient, method: str, path: str
) -> None:
    body = envelope("health", {})
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token_for(body)}"}
    response = client.request(method, path, content=body, headers=headers, follow_redirects=False)
    _assert_envelope(response, 404, "wire.unknown_route")
    assert "allow" not in response.headers
