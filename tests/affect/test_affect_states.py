"""Affect states: one named test per rule of the affect contract, against both stores."""

from __future__ import annotations

from typing import Any

import pytest

from ratatoskr.affect.postgres.store import PgAffectStore
from ratatoskr.affect.store import RatatoskrAffectStore
from ratatoskr.core.errors import (
    IdempotencyConflict,
    InvalidArguments,
    InvalidFilter,
    RevisionMismatch,
    ScopeForbidden,
)
from ratatoskr.postgres.health import durability
from ratatoskr.sqlite.health import DURABILITY
from tests.affect.helpers import T1, T2, FakeClock, ctx, put, state, walk


def test_describe_store_advertises_locking_and_event_log(store: Any) -> None:
    assert store.describe_store() == {
        "optimistic_locking_supported": True,
        "event_log_supported": True,
        "transaction_supported": False,
        "filterable_metadata_fields": [],
    }


def test_health_is_ok_on_a_fresh_store(store: Any) -> None:
    # a store names the durability its writes have; the in-memory reference has none
    reason = DURABILITY["FULL"] if isinstance(store, RatatoskrAffectStore) else None
    if isinstance(store, PgAffectStore):  # the test cluster runs without durability
        reason = durability("off", "off")
    assert store.health() == {"status": "ok", "reason": reason}


def test_put_then_get_returns_the_record_verbatim_plus_revision(store: Any) -> None:
    record = state("s1", nested={"valence": 0.25, "tags": ["a", None, True]}, opaque=[1, 2.5])
    assert put(store, [record], "k1") == {"written": 1, "replayed": False}
    assert store.get("s1") == {**record, "revision": 1}


def test_put_increments_revision_each_write(store: Any) -> None:
    put(store, [state("s1")], "k1")
    put(store, [state("s1", mood="tense")], "k2")
    got = store.get("s1")
    assert got["revision"] == 2 and got["mood"] == "tense"


def test_get_missing_is_none_and_get_many_keeps_named_order_once(store: Any) -> None:
    put(store, [state("a"), state("b"), state("c")], "k1")
    assert store.get("zz") is None
    found = store.get_many(["c", "zz", "a", "c", "b"])
    assert [r["id"] for r in found] == ["c", "a", "b"]


def test_optimistic_locking_zero_means_must_not_exist(store: Any) -> None:
    assert put(store, [state("s1")], "k1", expected_revisions={"s1": 0})["written"] == 1
    with pytest.raises(RevisionMismatch) as info:
        put(store, [state("s1")], "k2", expected_revisions={"s1": 0})
    assert info.value.mismatches == [{"id": "s1", "expected": 0, "actual": 1}]


def test_optimistic_locking_matching_revision_writes(store: Any) -> None:
    put(store, [state("s1")], "k1")
    put(store, [state("s1", mood="glad")], "k2", expected_revisions={"s1": 1})
    assert store.get("s1")["revision"] == 2


def test_stale_revision_rolls_back_the_whole_batch(store: Any) -> None:
    put(store, [state("s1"), state("s2")], "k1")
    with pytest.raises(RevisionMismatch) as info:
        put(
            store,
            [state("s1", mood="x"), state("s2", mood="y"), state("s3")],
            "k2",
            expected_revisions={"s1": 1, "s2": 5},
        )
    assert info.value.mismatches == [{"id": "s2", "expected": 5, "actual": 1}]
    assert [r["mood"] for r in store.get_many(["s1", "s2"])] == ["calm", "calm"]
    assert store.get("s3") is None
    # nothing was remembered either: the same key with a fresh payload is a new call
    assert put(store, [state("s3")], "k2")["replayed"] is False


def test_expected_revisions_naming_an_id_outside_records_is_invalid(store: Any) -> None:
    with pytest.raises(InvalidArguments):
        put(store, [state("s1")], "k1", expected_revisions={"other": 0})


def test_replay_returns_replayed_and_writes_nothing(store: Any) -> None:
    put(store, [state("s1")], "k1")
    assert put(store, [state("s1")], "k1") == {"written": 1, "replayed": True}
    assert store.get("s1")["revision"] == 1


def test_empty_expected_revisions_is_the_same_payload_as_none(store: Any) -> None:
    """The digest holds ``expected_revisions or null``: ``{}`` and no value are one payload."""
    put(store, [state("s1")], "k1")
    again = put(store, [state("s1")], "k1", expected_revisions={})
    assert again == {"written": 1, "replayed": True}
    put(store, [state("s2")], "k2", expected_revisions={})
    assert put(store, [state("s2")], "k2")["replayed"] is True
    assert store.get("s1")["revision"] == 1 and store.get("s2")["revision"] == 1


def test_reused_key_with_other_payload_is_idempotency_conflict(store: Any) -> None:
    put(store, [state("s1")], "k1")
    with pytest.raises(IdempotencyConflict):
        put(store, [state("s1", mood="other")], "k1")
    assert store.get("s1")["mood"] == "calm"


def test_idempotency_key_is_per_actor(store: Any) -> None:
    put(store, [state("s1")], "k1", ctx=ctx(actor="a"))
    assert put(store, [state("s1")], "k1", ctx=ctx(actor="b"))["replayed"] is False
    assert store.get("s1")["revision"] == 2


@pytest.mark.parametrize(
    ("klass", "ttl"), [(None, 86400), ("default", 86400), ("ephemeral", 600), ("durable", 2592000)]
)
def test_idempotency_class_sets_expiry(
    store: Any, clock: FakeClock, klass: str | None, ttl: int
) -> None:
    put(store, [state("s1")], "k1", idempotency_class=klass)
    clock.advance(ttl - 1)
    assert put(store, [state("s1")], "k1", idempotency_class=klass)["replayed"] is True
    clock.advance(1)
    # expired entries count as absent: the same key is a new write, even with another payload
    assert put(store, [state("s1", mood="new")], "k1")["replayed"] is False
    assert store.get("s1")["revision"] == 2


def test_unknown_idempotency_class_is_invalid(store: Any) -> None:
    with pytest.raises(InvalidArguments):
        put(store, [state("s1")], "k1", idempotency_class="forever")


@pytest.mark.parametrize(
    "records",
    [
        [],
        [state(str(i)) for i in range(1001)],
        [{"scope": T1}],
        [{"id": ""}],
        [{"id": "x" * 513}],
        [{"id": 5}],
        [state("a"), state("a")],
        [state("a", bad=float("nan"))],
        [state("a", bad=float("inf"))],
        ["not an object"],
        [{"id": "a", "scope": "t1"}],
        [{"id": "\ud800"}],
    ],
)
def test_invalid_records_are_refused_with_nothing_written(store: Any, records: Any) -> None:
    with pytest.raises(InvalidArguments):
        put(store, records, "k1")
    assert store.list(limit=500)["records"] == []


def test_record_scope_outside_lattice_is_invalid_filter(store: Any) -> None:
    with pytest.raises(InvalidFilter):
        put(store, [state("a", scope={"planet": "earth"})], "k1")


def test_thousand_records_is_the_limit(store: Any) -> None:
    assert put(store, [state(f"s{i:04}") for i in range(1000)], "k1")["written"] == 1000


@pytest.mark.parametrize("key", ["", "k" * 257, 7, None])
def test_bad_idempotency_key_is_invalid(store: Any, key: Any) -> None:
    with pytest.raises(InvalidArguments):
        store.put_many([state("a")], idempotency_key=key, ctx=ctx())


def test_delete_many_deletes_states_and_counts_found(store: Any) -> None:
    put(store, [state("a"), state("b")], "k1")
    assert store.delete_many(["a", "zz", "a"]) == {"deleted": 1}
    assert store.get("a") is None and store.get("b") is not None


@pytest.mark.parametrize("ids", [[], [""], ["x" * 513], "a", [1], [f"i{n}" for n in range(1001)]])
def test_bad_ids_are_invalid(store: Any, ids: Any) -> None:
    for call in (store.get_many, store.delete_many):
        with pytest.raises(InvalidArguments):
            call(ids)


def test_list_orders_by_id_ascending_and_pages(store: Any) -> None:
    ids = ["b", "a", "é", "Z", "a0", "ä", "aa"]
    put(store, [state(i) for i in ids], "k1")
    items, cursors = walk(store.list, "records", limit=2)
    assert [r["id"] for r in items] == sorted(ids)
    assert len(cursors) == 3 and len(set(cursors)) == 3
    assert all(r["revision"] == 1 for r in items)


def test_list_filters_scope_all_and_scope_any(store: Any) -> None:
    put(
        store,
        [
            state("a", {"tenant": "t1", "end_user": "u1"}),
            state("b", {"tenant": "t1", "end_user": "u2"}),
            state("c", {"tenant": "t2", "end_user": "u1"}),
            state("d", {}),
        ],
        "k1",
    )

    def ids(**kw: Any) -> list[str]:
        return [r["id"] for r in store.list(limit=10, **kw)["records"]]

    assert ids() == ["a", "b", "c", "d"]
    assert ids(scope_all={"tenant": "t1"}) == ["a", "b"]
    assert ids(scope_any=[{"end_user": "u1"}, {"tenant": "t2"}]) == ["a", "c"]
    assert ids(scope_all={"tenant": "t1"}, scope_any=[{"end_user": "u2"}]) == ["b"]
    assert ids(scope_any=[{}]) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("limit", [0, 501, True, "5", None])
def test_list_limit_is_one_to_five_hundred(store: Any, limit: Any) -> None:
    with pytest.raises(InvalidArguments):
        store.list(limit=limit)


def test_list_with_bad_filter_shapes(store: Any) -> None:
    with pytest.raises(InvalidArguments):
        store.list(limit=5, scope_all=["tenant"])
    with pytest.raises(InvalidFilter):
        store.list(limit=5, scope_any=[{"planet": "x"}])


# -- confinement by the token scope ------------------------------------------------------


def test_write_outside_token_scope_is_forbidden_with_nothing_written(store: Any) -> None:
    with pytest.raises(ScopeForbidden):
        put(store, [state("a", T1), state("b", T2)], "k1", ctx=ctx(T1))
    assert store.get("a") is None


def test_overwriting_a_state_stored_outside_token_scope_is_forbidden(store: Any) -> None:
    put(store, [state("a", T2)], "k1")
    with pytest.raises(ScopeForbidden):
        put(store, [state("a", T1)], "k2", ctx=ctx(T1))
    assert store.get("a")["scope"] == T2


def test_reads_and_deletes_by_id_outside_token_scope_behave_as_missing(store: Any) -> None:
    put(store, [state("a", T1), state("b", T2)], "k1")
    assert store.get("b", ctx=ctx(T1)) is None
    assert [r["id"] for r in store.get_many(["a", "b"], ctx=ctx(T1))] == ["a"]
    assert store.delete_many(["b"], ctx=ctx(T1)) == {"deleted": 0}
    assert store.get("b") is not None


def test_list_is_anded_with_token_scope(store: Any) -> None:
    put(store, [state("a", T1), state("b", T2)], "k1")
    assert [r["id"] for r in store.list(limit=5, ctx=ctx(T1))["records"]] == ["a"]
    with pytest.raises(ScopeForbidden):
        store.list(limit=5, scope_all=T2, ctx=ctx(T1))
    with pytest.raises(ScopeForbidden):
        store.list(limit=5, scope_any=[T2], ctx=ctx(T1))
