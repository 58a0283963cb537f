"""Affect events: immutability, equality, time handling and ordering, against both stores."""

from __future__ import annotations

from typing import Any

import pytest

from ratatoskr.affect.rules import parse_time
from ratatoskr.core.errors import (
    EventConflict,
    IdempotencyConflict,
    InvalidArguments,
    ScopeForbidden,
)
from tests.affect.helpers import T1, T2, FakeClock, append, ctx, event, walk


def ids_of(page: dict[str, Any]) -> list[str]:
    return [e["id"] for e in page["events"]]


def test_append_then_read_returns_events_verbatim(store: Any) -> None:
    e = event("e1", "2026-11-29T10:12:03.5Z", payload={"v": [1, 2.5, None]})
    assert append(store, [e], "k1") == {"appended": 1, "replayed": False}
    assert store.read_events(limit=10)["events"] == [e]


def test_at_is_returned_verbatim_not_normalised(store: Any) -> None:
    e = event("e1", "2026-11-29t12:12:03.123456789+02:00")
    append(store, [e], "k1")
    assert store.read_events(limit=10)["events"][0]["at"] == "2026-11-29t12:12:03.123456789+02:00"


def test_equal_event_again_is_not_an_error_and_not_counted(store: Any) -> None:
    append(store, [event("e1", "2026-01-01T00:00:00Z")], "k1")
    result = append(
        store, [event("e1", "2026-01-01T00:00:00Z"), event("e2", "2026-01-01T00:00:01Z")], "k2"
    )
    assert result == {"appended": 1, "replayed": False}
    assert ids_of(store.read_events(limit=10)) == ["e1", "e2"]


def test_equal_means_json_equal_regardless_of_key_order(store: Any) -> None:
    append(store, [{"id": "e1", "at": "2026-01-01T00:00:00Z", "a": 1, "b": 2}], "k1")
    again = {"b": 2, "a": 1, "at": "2026-01-01T00:00:00Z", "id": "e1"}
    assert append(store, [again], "k2")["appended"] == 0


def test_different_event_with_stored_id_is_conflict_and_nothing_appended(store: Any) -> None:
    append(store, [event("e1", "2026-01-01T00:00:00Z")], "k1")
    with pytest.raises(EventConflict) as info:
        append(
            store,
            [
                event("e2", "2026-01-01T00:00:01Z"),
                event("e1", "2026-01-01T00:00:00Z", kind="anger"),
            ],
            "k2",
        )
    assert info.value.details == {"ids": ["e1"]}
    assert ids_of(store.read_events(limit=10)) == ["e1"]


@pytest.mark.parametrize("other", [{"n": 1.0}, {"n": True}, {"at": "2026-01-01T00:00:00+00:00"}])
def test_equality_is_strict_json_equality(store: Any, other: dict[str, Any]) -> None:
    base = {"id": "e1", "at": "2026-01-01T00:00:00Z", "n": 1}
    append(store, [base], "k1")
    with pytest.raises(EventConflict):
        append(store, [{**base, **other}], "k2")


def test_append_replay_answers_first_count_and_conflict_on_other_payload(store: Any) -> None:
    append(store, [event("e1", "2026-01-01T00:00:00Z")], "k0")
    batch = [event("e1", "2026-01-01T00:00:00Z"), event("e2", "2026-01-01T00:00:01Z")]
    assert append(store, batch, "k1") == {"appended": 1, "replayed": False}
    assert append(store, batch, "k1") == {"appended": 1, "replayed": True}
    with pytest.raises(IdempotencyConflict):
        append(store, [event("e3", "2026-01-01T00:00:02Z")], "k1")
    assert ids_of(store.read_events(limit=10)) == ["e1", "e2"]


def test_append_idempotency_expires_by_class(store: Any, clock: FakeClock) -> None:
    append(store, [event("e1", "2026-01-01T00:00:00Z")], "k1", idempotency_class="ephemeral")
    clock.advance(600)
    result = append(store, [event("e2", "2026-01-01T00:00:00Z")], "k1")
    assert result == {"appended": 1, "replayed": False}


def test_put_and_append_keys_do_not_collide(store: Any) -> None:
    store.put_many([{"id": "s", "scope": T1}], idempotency_key="k", ctx=ctx())
    assert append(store, [event("e1", "2026-01-01T00:00:00Z")], "k")["replayed"] is False


def test_duplicate_ids_in_one_batch_are_invalid(store: Any) -> None:
    with pytest.raises(InvalidArguments):
        append(store, [event("e1", "2026-01-01T00:00:00Z")] * 2, "k1")


@pytest.mark.parametrize(
    "at",
    [
        "2026-11-29T10:12:03",
        "2026-11-29T10:12:03.5",
        "2026-11-29 10:12:03Z",
        "2026-11-29",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "0000-02-30T00:00:00Z",
        "0100-02-29T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:00:60Z",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T00:00:00+0100",
        "２026-01-01T00:00:00Z",
        "",
        1767225600,
        None,
    ],
)
def test_timestamp_without_offset_or_out_of_range_is_invalid(store: Any, at: Any) -> None:
    with pytest.raises(InvalidArguments):
        append(store, [event("e1", at)], "k1")
    if at is not None:  # null since/until means "unbounded"
        with pytest.raises(InvalidArguments):
            store.read_events(limit=5, since=at)
        with pytest.raises(InvalidArguments):
            store.read_events(limit=5, until=at)


def test_event_without_at_is_invalid(store: Any) -> None:
    with pytest.raises(InvalidArguments):
        append(store, [{"id": "e1", "scope": T1}], "k1")


def test_parse_time_normalises_to_utc_microseconds() -> None:
    assert parse_time("1970-01-01T00:00:00Z", "at") == 0
    assert parse_time("1970-01-01T01:00:00+01:00", "at") == 0
    assert parse_time("1969-12-31T23:59:59.999999Z", "at") == -1
    assert parse_time("1970-01-01T00:00:00.0000019Z", "at") == 1
    assert parse_time("2026-11-29T10:12:03.5Z", "at") == 1795947123500000
    assert parse_time("0001-01-01T00:00:00+23:59", "at") < parse_time("0001-01-01T00:00:00Z", "at")
    assert parse_time("9999-12-31T23:59:59.999999-23:59", "at") > 0


def test_year_0000_is_a_leap_year_before_0001() -> None:
    """RFC 3339 years run from 0000 (the proleptic Gregorian calendar's, a leap year)."""
    year_0 = parse_time("0000-01-01T00:00:00Z", "at")
    assert year_0 == -62_167_219_200_000_000
    assert parse_time("0001-01-01T00:00:00Z", "at") - year_0 == 366 * 86_400_000_000
    assert parse_time("0000-02-29T00:00:00Z", "at") == year_0 + 59 * 86_400_000_000
    assert parse_time("0001-01-01T00:00:00+01:00", "at") == parse_time("0000-12-31T23:00:00Z", "at")
    # an offset may put a time of year 0000 or 9999 in the year before or after, once in UTC
    assert parse_time("0000-01-01T00:00:00+01:00", "at") == year_0 - 3_600_000_000
    assert (
        parse_time("9999-12-31T23:30:00-01:00", "at")
        == parse_time("9999-12-31T23:59:59.999999Z", "at") + 1_800_000_001
    )
    assert parse_time("0000-12-31T23:59:60Z", "at") == parse_time(
        "0000-12-31T23:59:59.999999Z", "at"
    )


def test_events_of_year_0000_are_stored_and_ordered_by_their_utc_instant(store: Any) -> None:
    times = {
        "before-0000": "0000-01-01T00:00:00+01:00",  # -0001-12-31T23:00:00Z
        "start-0000": "0000-01-01T00:00:00Z",
        "leap-day-0000": "0000-02-29T12:00:00Z",
        "end-0000": "0001-01-01T00:00:00+01:00",  # 0000-12-31T23:00:00Z
        "start-0001": "0001-01-01T00:00:00Z",
        "epoch": "1970-01-01T00:00:00Z",
        "after-9999": "9999-12-31T23:30:00-01:00",  # 10000-01-01T00:30:00Z
    }
    events = [event(eid, at) for eid, at in times.items()]
    assert append(store, events[::-1], "k1") == {"appended": 7, "replayed": False}
    read = store.read_events(limit=10)["events"]
    assert [e["id"] for e in read] == list(times)
    assert [e["at"] for e in read] == list(times.values())  # verbatim
    items, _ = walk(store.read_events, "events", limit=2, order="desc")
    assert [e["id"] for e in items] == list(times)[::-1]
    page = store.read_events(limit=10, since="0000-01-01T00:00:00Z", until="0001-01-01T00:00:00Z")
    assert ids_of(page) == ["start-0000", "leap-day-0000", "end-0000"]
    assert ids_of(store.read_events(limit=10, until="0000-01-01T00:00:00Z")) == ["before-0000"]


def test_a_leap_second_is_its_minutes_last_microsecond() -> None:
    """RFC 3339 allows ``:60`` at 23:59 UTC on a month's last day; a microsecond clock has no
    place for it, so it is the instant 23:59:59.999999: after every earlier time in its ``:59``
    and before the next minute."""
    leap = parse_time("2016-12-31T23:59:60Z", "at")
    assert leap == parse_time("2016-12-31T23:59:59.999999Z", "at")
    assert leap == parse_time("2016-12-31T23:59:60.5Z", "at")
    assert leap == parse_time("2017-01-01T05:29:60+05:30", "at")  # the same second, elsewhere
    assert (
        parse_time("2016-12-31T23:59:59.9Z", "at") < leap < parse_time("2017-01-01T00:00:00Z", "at")
    )
    assert parse_time("2015-06-30T23:59:60Z", "at") == parse_time("2015-07-01T00:00:00Z", "at") - 1
    for nowhere in ("2016-12-30T23:59:60Z", "2016-12-31T23:58:60Z", "2016-12-31T23:59:60+01:00"):
        with pytest.raises(InvalidArguments, match="leap second"):
            parse_time(nowhere, "at")


def test_events_order_by_at_then_id_with_ties(store: Any) -> None:
    append(
        store,
        [
            event("c", "2026-01-01T01:00:00+01:00"),  # same instant as "a" and "b"
            event("b", "2026-01-01T00:00:00Z"),
            event("a", "2025-12-31T19:00:00-05:00"),
            event("z", "2025-12-31T23:59:59.999999Z"),
            event("d", "2026-01-01T00:00:00.000001Z"),
        ],
        "k1",
    )
    assert ids_of(store.read_events(limit=10)) == ["z", "a", "b", "c", "d"]
    assert ids_of(store.read_events(limit=10, order="asc")) == ["z", "a", "b", "c", "d"]
    assert ids_of(store.read_events(limit=10, order="desc")) == ["d", "c", "b", "a", "z"]


def test_a_leap_second_ties_with_its_minutes_last_microsecond(store: Any) -> None:
    """The leap second is the instant 23:59:59.999999: events there and at the leap second
    are ordered by id, and a bound at the leap second admits or excludes them together."""
    append(
        store,
        [
            event("b-leap", "2016-12-31T23:59:60Z"),
            event("a-last", "2016-12-31T23:59:59.999999Z"),
            event("c-floor", "2016-12-31T23:59:59.9999999Z"),
            event("0-before", "2016-12-31T23:59:59.999998Z"),
            event("9-after", "2017-01-01T00:00:00Z"),
        ],
        "k1",
    )
    order = ["0-before", "a-last", "b-leap", "c-floor", "9-after"]
    assert ids_of(store.read_events(limit=10)) == order
    assert ids_of(store.read_events(limit=10, since="2016-12-31T23:59:60Z")) == order[1:]
    assert ids_of(store.read_events(limit=10, until="2016-12-31T23:59:60Z")) == order[:1]


def test_since_inclusive_until_exclusive(store: Any) -> None:
    append(store, [event(f"e{h}", f"2026-01-01T{h:02}:00:00Z") for h in range(6)], "k1")
    page = store.read_events(limit=10, since="2026-01-01T01:00:00Z", until="2026-01-01T04:00:00Z")
    assert ids_of(page) == ["e1", "e2", "e3"]
    page = store.read_events(limit=10, since="2026-01-01T05:00:00+01:00", order="desc")
    assert ids_of(page) == ["e5", "e4"]
    assert ids_of(store.read_events(limit=10, until="2026-01-01T00:00:00.000001Z")) == ["e0"]
    assert (
        ids_of(
            store.read_events(limit=10, since="2026-01-02T00:00:00Z", until="2026-01-01T00:00:00Z")
        )
        == []
    )


def test_read_events_paging_both_directions(store: Any) -> None:
    append(store, [event(f"e{i:02}", f"2026-01-01T00:00:{i // 3:02}Z") for i in range(20)], "k1")
    for order, expected in (("asc", sorted), ("desc", lambda x: sorted(x, reverse=True))):
        items, cursors = walk(store.read_events, "events", limit=3, order=order)
        assert [e["id"] for e in items] == expected([f"e{i:02}" for i in range(20)])
        assert len(cursors) == 6 and len(set(cursors)) == 6


def test_read_events_filters_and_confines_scope(store: Any) -> None:
    append(
        store,
        [
            event("a", "2026-01-01T00:00:00Z", {"tenant": "t1", "end_user": "u1"}),
            event("b", "2026-01-01T00:00:01Z", {"tenant": "t2", "end_user": "u1"}),
            event("c", "2026-01-01T00:00:02Z", {"tenant": "t1", "end_user": "u2"}),
        ],
        "k1",
    )
    assert ids_of(store.read_events(limit=5, scope_any=[{"end_user": "u1"}])) == ["a", "b"]
    assert ids_of(store.read_events(limit=5, ctx=ctx(T1))) == ["a", "c"]
    assert ids_of(store.read_events(limit=5, scope_any=[{"end_user": "u1"}], ctx=ctx(T1))) == ["a"]
    with pytest.raises(ScopeForbidden):
        store.read_events(limit=5, scope_all=T2, ctx=ctx(T1))


def test_append_outside_token_scope_is_forbidden_with_nothing_appended(store: Any) -> None:
    with pytest.raises(ScopeForbidden):
        append(
            store,
            [event("a", "2026-01-01T00:00:00Z", T1), event("b", "2026-01-01T00:00:00Z", T2)],
            "k1",
            ctx=ctx(T1),
        )
    assert store.read_events(limit=5)["events"] == []


def test_event_id_stored_outside_token_scope_is_forbidden(store: Any) -> None:
    append(store, [event("a", "2026-01-01T00:00:00Z", T2)], "k1")
    with pytest.raises(ScopeForbidden):
        append(store, [event("a", "2026-01-01T00:00:00Z", T1)], "k2", ctx=ctx(T1))


def test_delete_many_never_touches_events(store: Any) -> None:
    append(store, [event("a", "2026-01-01T00:00:00Z")], "k1")
    assert store.delete_many(["a"]) == {"deleted": 0}
    assert ids_of(store.read_events(limit=5)) == ["a"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"limit": 0},
        {"limit": 1001},
        {"limit": 5, "order": "up"},
        {"limit": 5, "order": "ASC"},
        {"limit": 5, "cursor": 12},
    ],
)
def test_read_events_argument_limits(store: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArguments):
        store.read_events(**kwargs)


def test_thousand_events_is_the_limit_and_read_limit(store: Any) -> None:
    batch = [event(f"e{i:04}", "2026-01-01T00:00:00Z") for i in range(1000)]
    assert append(store, batch, "k1")["appended"] == 1000
    page = store.read_events(limit=1000)
    assert len(page["events"]) == 1000 and page["next_cursor"] is None
    with pytest.raises(InvalidArguments):
        append(store, batch + [event("x", "2026-01-01T00:00:00Z")], "k2")
