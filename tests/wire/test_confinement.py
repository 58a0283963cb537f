"""Confinement by the token scope on every verb: T = {"tenant": "acme"}."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from ratatoskr.core.context import CallContext
from ratatoskr.memory.store import RatatoskrMemoryStore
from tests.wire.helpers import call, error_code, ok, record, vec

OPERATOR = CallContext(actor="operator")  # unscoped: the whole store, as on the host


@pytest.fixture
def seeded(store: RatatoskrMemoryStore) -> RatatoskrMemoryStore:
    """Two records inside T and one outside it, written directly by the operator."""
    store.upsert_many(
        [
            record("in-1", vec(1, 0), scope={"tenant": "acme", "end_user": "u1"}),
            record("in-2", vec(1, 1), scope={"tenant": "acme", "end_user": "u2"}),
            record("out", vec(1, 0.1), scope={"tenant": "globex", "end_user": "u1"}),
        ],
        idempotency_key="seed",
        ctx=OPERATOR,
    )
    return store


def _forbidden(response: Any) -> None:
    assert (response.status_code, error_code(response)) == (403, "scope.forbidden")


@pytest.mark.parametrize(
    "scope", [{"tenant": "globex"}, {}, {"end_user": "u1"}], ids=["other", "none", "partial"]
)
def test_writes_outside_the_token_scope_write_nothing(
    client: TestClient, store: RatatoskrMemoryStore, scope: dict[str, str]
) -> None:
    records = [record("fine", vec(1)), record("bad", vec(0, 1), scope=scope)]
    _forbidden(call(client, "upsert_many", {"records": records, "idempotency_key": "k"}))
    assert store.get_many(["fine", "bad"]) == []


def test_writes_inside_the_token_scope_may_be_narrower(
    client: TestClient, store: RatatoskrMemoryStore
) -> None:
    narrow = record("n", vec(1), scope={"tenant": "acme", "agent_self": "a1"})
    ok(call(client, "upsert_many", {"records": [narrow], "idempotency_key": "k"}))
    assert store.get("n") is not None


def test_overwriting_a_record_outside_the_scope_is_forbidden(
    client: TestClient, seeded: RatatoskrMemoryStore
) -> None:
    hijack = record("out", vec(1), scope={"tenant": "acme"})
    _forbidden(call(client, "upsert_many", {"records": [hijack], "idempotency_key": "k"}))
    assert seeded.get("out", ctx=OPERATOR)["scope"] == {"tenant": "globex", "end_user": "u1"}  # type: ignore[index]


def test_search_sees_only_the_token_scope(client: TestClient, seeded: RatatoskrMemoryStore) -> None:
    hits = ok(call(client, "search", {"vector": vec(1, 0), "top_k": 10}))
    assert [h["chunk_id"] for h in hits] == ["in-1", "in-2"]
    hits = ok(
        call(client, "search", {"vector": vec(1), "top_k": 10, "scope_all": {"end_user": "u1"}})
    )
    assert [h["chunk_id"] for h in hits] == ["in-1"]
    hits = ok(
        call(
            client,
            "search",
            {"vector": vec(1), "top_k": 10, "scope_any": [{"end_user": "u1"}, {"tenant": "acme"}]},
        )
    )
    assert {h["chunk_id"] for h in hits} == {"in-1", "in-2"}


@pytest.mark.parametrize(
    "filters",
    [
        {"scope_all": {"tenant": "globex"}},
        {"scope_any": [{"tenant": "globex"}]},
        {"scope_any": [{"end_user": "u1"}, {"tenant": "globex", "end_user": "u1"}]},
    ],
)
def test_filters_contradicting_the_token_scope_are_forbidden(
    client: TestClient, seeded: RatatoskrMemoryStore, filters: dict[str, Any]
) -> None:
    _forbidden(call(client, "search", {"vector": vec(1), "top_k": 10, **filters}))


def test_get_outside_the_scope_is_missing(client: TestClient, seeded: RatatoskrMemoryStore) -> None:
    assert ok(call(client, "get", {"chunk_id": "out"})) is None
    assert ok(call(client, "get", {"chunk_id": "in-1"}))["id"] == "in-1"


def test_get_many_leaves_out_records_outside_the_scope(
    client: TestClient, seeded: RatatoskrMemoryStore
) -> None:
    found = ok(call(client, "get_many", {"ids": ["out", "in-2", "nothing", "in-1"]}))
    assert [r["id"] for r in found] == ["in-2", "in-1"]


def test_delete_many_does_not_count_or_touch_records_outside_the_scope(
    client: TestClient, seeded: RatatoskrMemoryStore
) -> None:
    assert ok(call(client, "delete_many", {"ids": ["out", "in-1", "nothing"]})) == {"deleted": 1}
    assert seeded.get("out") is not None
    assert seeded.get("in-1") is None


def test_describe_and_health_need_no_scope_match(client: TestClient) -> None:
    ok(call(client, "describe_store", {}, scope={"tenant": "anyone"}))
    ok(call(client, "health", {}, scope={"tenant": "anyone"}))


def test_the_actor_comes_from_the_token_not_the_args(client: TestClient) -> None:
    """Idempotency is actor-scoped: the same key under two token subjects does not collide."""
    args = {"records": [record("a", vec(1))], "idempotency_key": "shared"}
    ok(call(client, "upsert_many", args, sub="alice"))
    other = {"records": [record("a", vec(0, 1))], "idempotency_key": "shared"}
    assert ok(call(client, "upsert_many", other, sub="bob"))["replayed"] is False
