"""The affect plane over HTTP: the real app over a real SQLite file, tokens minted per call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from ratatoskr.affect.store import RatatoskrAffectStore, open_affect_store
from ratatoskr.sqlite.jti import JtiLedger
from tests.apps import affect_app
from tests.wire.helpers import KEY, TENANT, call, envelope, error_code, ok, post, token_for


@pytest.fixture
def affect_store(tmp_path: Path) -> Iterator[RatatoskrAffectStore]:
    s = open_affect_store(str(tmp_path / "affect.db"))
    yield s
    s.close()


@pytest.fixture
def client(affect_store: RatatoskrAffectStore, tmp_path: Path) -> Iterator[TestClient]:
    ledger = JtiLedger(str(tmp_path / "affect.jti.db"))
    with TestClient(affect_app(affect_store, KEY, ledger=ledger)) as c:
        yield c
    ledger.close()


def affect(client: TestClient, verb: str, args: dict[str, Any], **kw: Any) -> Any:
    return call(client, verb, args, plane="affect", **kw)


def state(sid: str, **extra: Any) -> dict[str, Any]:
    return {"id": sid, "scope": dict(TENANT), "warmth": 0.5, **extra}


def event(eid: str, at: str) -> dict[str, Any]:
    return {"id": eid, "scope": dict(TENANT), "at": at, "appraisal": {"joy": 0.2}}


def test_handshake_lists_affect_verbs_and_limits(client: TestClient) -> None:
    result = ok(call(client, "handshake", {}, plane="*"))
    plane = result["planes"]["affect"]
    assert plane["verbs"] == [
        "describe_store",
        "health",
        "put_many",
        "get",
        "get_many",
        "list",
        "delete_many",
        "append_events",
        "read_events",
    ]
    assert plane["capabilities"]["event_log_supported"] is True
    assert plane["limits"]["max_list_limit"] == 500
    assert "memory" not in result["planes"]


def test_memory_route_is_404_on_the_affect_app(client: TestClient) -> None:
    response = call(client, "health", {}, plane="memory")
    assert response.status_code == 404


def test_put_get_list_delete_round_trip(client: TestClient) -> None:
    records = [state("s1"), state("s2", nested={"a": [1, None]})]
    put = {"records": records, "idempotency_key": "k1"}
    assert ok(affect(client, "put_many", put)) == {
        "written": 2,
        "replayed": False,
    }
    assert ok(affect(client, "put_many", put))["replayed"] is True
    assert ok(affect(client, "get", {"id": "s2"})) == {**records[1], "revision": 1}
    page = ok(affect(client, "list", {"limit": 1}))
    assert [r["id"] for r in page["records"]] == ["s1"]
    page = ok(affect(client, "list", {"limit": 1, "cursor": page["next_cursor"]}))
    assert [r["id"] for r in page["records"]] == ["s2"] and page["next_cursor"] is None
    assert ok(affect(client, "delete_many", {"ids": ["s1"]})) == {"deleted": 1}


def test_stale_revision_is_409_with_mismatches(client: TestClient) -> None:
    put = {"records": [state("s1")], "idempotency_key": "k1", "expected_revisions": {"s1": 3}}
    response = affect(client, "put_many", put)
    assert (response.status_code, error_code(response)) == (409, "affect.revision_mismatch")
    assert response.json()["error"]["details"]["mismatches"] == [
        {"id": "s1", "expected": 3, "actual": 0}
    ]


def test_events_append_read_and_conflict(client: TestClient) -> None:
    events = [event("e2", "2026-01-01T00:00:01Z"), event("e1", "2026-01-01T01:00:00+01:00")]
    args = {"events": events, "idempotency_key": "k1"}
    assert ok(affect(client, "append_events", args))["appended"] == 2
    read = ok(affect(client, "read_events", {"limit": 10, "order": "desc"}))
    assert [e["id"] for e in read["events"]] == ["e2", "e1"]
    assert read["events"][1] == events[1]
    clash = {"events": [{**events[0], "appraisal": {}}], "idempotency_key": "k2"}
    response = affect(client, "append_events", clash)
    assert (response.status_code, error_code(response)) == (409, "affect.event_conflict")


@pytest.mark.parametrize(
    ("verb", "args"),
    [
        ("read_events", {"limit": 5, "cursor": "forged.cursor"}),
        ("list", {"limit": 5, "cursor": "AAAA.BBBB"}),
        ("list", {"limit": 501}),
        ("read_events", {"limit": 5, "since": "2026-01-01T00:00:00"}),
        ("append_events", {"events": [event("e", "2026-01-01T00:00:00")], "idempotency_key": "k"}),
        ("get", {"chunk_id": "x"}),
    ],
)
def test_invalid_arguments_are_400(client: TestClient, verb: str, args: dict[str, Any]) -> None:
    response = affect(client, verb, args)
    assert (response.status_code, error_code(response)) == (400, "affect.invalid_arguments")
    assert "forged" not in response.json()["error"]["message"]


def test_cursor_from_another_token_scope_is_invalid(client: TestClient) -> None:
    records = [state("s1"), state("s2")]
    affect(client, "put_many", {"records": records, "idempotency_key": "k"})
    page = ok(affect(client, "list", {"limit": 1}))
    narrowed = {"tenant": "acme", "end_user": "u1"}
    response = affect(client, "list", {"limit": 1, "cursor": page["next_cursor"]}, scope=narrowed)
    assert (response.status_code, error_code(response)) == (400, "affect.invalid_arguments")


def test_confinement_over_http(client: TestClient) -> None:
    foreign = {"records": [{"id": "x", "scope": {"tenant": "other"}}], "idempotency_key": "k"}
    response = affect(client, "put_many", foreign)
    assert (response.status_code, error_code(response)) == (403, "scope.forbidden")
    response = affect(client, "read_events", {"limit": 5, "scope_all": {"tenant": "other"}})
    assert (response.status_code, error_code(response)) == (403, "scope.forbidden")


def test_mutating_token_cannot_be_replayed(client: TestClient) -> None:
    body = envelope(
        "append_events", {"events": [event("e", "2026-01-01T00:00:00Z")], "idempotency_key": "k"}
    )
    token = token_for(body, plane="affect", verb="append_events")
    assert post(client, body, token, path="/bifrost/affect-call").status_code == 200
    again = post(client, body, token, path="/bifrost/affect-call")
    assert (again.status_code, error_code(again)) == (401, "auth.token_replayed")


def test_unknown_verb_is_404(client: TestClient) -> None:
    response = affect(client, "search", {})
    assert (response.status_code, error_code(response)) == (404, "affect.unknown_verb")


@pytest.mark.parametrize("literal", [b"-9223372036854775809", b"18446744073709551616"])
def test_an_integer_beyond_64_bits_is_refused_not_stored_as_a_float(
    client: TestClient, literal: bytes
) -> None:
    record = orjson.dumps(state("s1"))[:-1] + b',"counter":' + literal + b"}"
    body = (
        b'{"wire":"0.6","verb":"put_many","args":{"records":['
        + record
        + b'],"idempotency_key":"k"}}'
    )
    token = token_for(body, plane="affect", verb="put_many")
    response = post(client, body, token, path="/bifrost/affect-call")
    assert (response.status_code, error_code(response)) == (400, "wire.malformed_envelope")
    assert response.json()["error"]["message"] == "the body holds an integer beyond 64 bits"
    assert affect(client, "get", {"id": "s1"}).json()["result"] is None
    edges = orjson.dumps(state("s1"))[:-1] + b',"low":-9223372036854775808}'
    body = b'{"wire":"0.6","verb":"put_many","args":{"records":[' + edges
    body += b'],"idempotency_key":"k2"}}'
    token = token_for(body, plane="affect", verb="put_many")
    ok(post(client, body, token, path="/bifrost/affect-call"))
    assert ok(affect(client, "get", {"id": "s1"}))["low"] == -(1 << 63)
