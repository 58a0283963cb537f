"""What a valid affect call is: the rules of the affect plane, shared by both stores.

Everything here runs before any storage is touched, and every failure names the field and
the id, never a value. The store reads only ``id``, ``scope`` and (events) ``at``; the rest of
a record is opaque and kept verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ratatoskr.core import idempotency
from ratatoskr.core.canonical import canonical_json, check_json_value, digest
from ratatoskr.core.civil_time import US_PER_DAY, civil_from_days, days_from_civil, is_date
from ratatoskr.core.cursors import filter_tag
from ratatoskr.core.errors import InvalidArguments
from ratatoskr.core.record_ids import MAX_ID_CHARS as MAX_ID_CHARS
from ratatoskr.core.record_ids import MAX_IDS as MAX_IDS
from ratatoskr.core.record_ids import check_id as check_id
from ratatoskr.core.record_ids import check_ids as check_ids
from ratatoskr.core.record_ids import with_revision as with_revision
from ratatoskr.core.scope import (
    Scope,
    confine_filter,
    require_inside,
    validate_filter,
    validate_scope,
)
from ratatoskr.memory.rules import parse_expected

MAX_RECORDS = 1000
MAX_EVENTS = 1000
MAX_LIST_LIMIT = 500
MAX_READ_LIMIT = 1000
ORDERS = ("asc", "desc")

CAPABILITIES: dict[str, Any] = {
    "optimistic_locking_supported": True,
    "event_log_supported": True,
    "transaction_supported": False,
    "filterable_metadata_fields": [],
}
LIMITS = {
    "max_records": MAX_RECORDS,
    "max_events": MAX_EVENTS,
    "max_ids": MAX_IDS,
    "max_list_limit": MAX_LIST_LIMIT,
    "max_read_limit": MAX_READ_LIMIT,
}

# RFC 3339 date-time: the offset is mandatory, fractions of any length.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


@dataclass(frozen=True)
class Item:
    """A state or an event as the store reads it: structural fields plus the verbatim JSON.

    ``at_us`` is the event time in UTC microseconds since the epoch; ``None`` for states.
    """

    id: str
    scope: Scope
    record: dict[str, Any]
    record_json: bytes
    at_us: int | None = None


@dataclass(frozen=True)
class PutCall:
    states: list[Item]
    idempotency_key: str
    idempotency_class: str
    expected_revisions: dict[str, int] | None
    digest: str


@dataclass(frozen=True)
class AppendCall:
    events: list[Item]
    idempotency_key: str
    idempotency_class: str
    digest: str


@dataclass(frozen=True)
class ListCall:
    """A ``list`` or ``read_events`` call; the time fields stay ``None`` for ``list``."""

    scope_all: Scope
    scope_any: list[Scope]
    limit: int
    cursor: str | None
    since_us: int | None = None
    until_us: int | None = None
    descending: bool = False


# -- scalars -------------------------------------------------------------------------


def parse_time(value: Any, field: str) -> int:
    """An RFC 3339 timestamp with offset, as UTC microseconds since the epoch.

    Years 0000..9999 are accepted with any offset (year 0000 is a leap year of the proleptic
    Gregorian calendar); an offset may put the instant in the year before 0000 or after 9999,
    which the signed microsecond count holds like any other. Digits past the microsecond are
    dropped (floor). A missing offset and an impossible date or time are refused.

    A leap second (``:60`` at 23:59 UTC on a month's last day, as RFC 3339 allows it) has no
    place on a microsecond clock: it counts as that minute's last microsecond (the same
    instant as ``23:59:59.999999``), after every earlier time in its ``:59`` and before the
    next minute.
    """
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidArguments(f"{field} must be an RFC 3339 timestamp with an offset")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zulu, sign, off_h, off_m = match.groups()[6:]
    if not is_date(year, month, day):
        raise InvalidArguments(f"{field} names a date that does not exist")
    days = days_from_civil(year, month, day)
    if hour > 23 or minute > 59 or second > 60:
        raise InvalidArguments(f"{field} names a time of day out of range")
    leap = second == 60
    if leap:
        second, fraction = 59, "999999"
    offset_minutes = 0
    if not zulu:
        if int(off_h) > 23 or int(off_m) > 59:
            raise InvalidArguments(f"{field} has an offset out of range")
        offset_minutes = (int(off_h) * 60 + int(off_m)) * (-1 if sign == "-" else 1)
    micros = int((fraction or "").ljust(6, "0")[:6])
    local_seconds = hour * 3600 + minute * 60 + second - offset_minutes * 60
    micros += days * US_PER_DAY + local_seconds * 1_000_000
    if leap and not _before_a_leap_second(micros):
        raise InvalidArguments(f"{field} names a leap second where there can be none")
    return micros


def _before_a_leap_second(micros: int) -> bool:
    """Whether UTC ``micros`` is 23:59:59.999999 on a month's last day: where RFC 3339 lets a
    ``:60`` second stand."""
    following = (micros + 1) // US_PER_DAY  # the day after, in days since the epoch
    return (micros + 1) % US_PER_DAY == 0 and civil_from_days(following)[2] == 1


def parse_limit(value: Any, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidArguments(f"limit must be an integer in 1..{maximum}")
    return value


def parse_cursor(value: Any) -> str | None:
    """Only the type here: the store opens the cursor against the confined filter."""
    if value is not None and not isinstance(value, str):
        raise InvalidArguments("cursor must be null or a string")
    return value


# -- writes --------------------------------------------------------------------------


def parse_item(record: Any, field: str, *, event: bool) -> Item:
    if not isinstance(record, dict):
        raise InvalidArguments(f"{field} must be an object")
    if "id" not in record:
        raise InvalidArguments(f"{field} has no id")
    item_id = check_id(record["id"], f"{field}.id")
    where = f"{field} (id {item_id})"
    scope = validate_scope(record.get("scope", {}), f"{where}.scope")
    at_us = None
    if event:
        if "at" not in record:
            raise InvalidArguments(f"{where} has no at")
        at_us = parse_time(record["at"], f"{where}.at")
    check_json_value(record, where)
    return Item(item_id, scope, record, canonical_json(record, where), at_us)


def _parse_batch(items: Any, name: str, maximum: int, *, event: bool) -> list[Item]:
    if not isinstance(items, list) or not 1 <= len(items) <= maximum:
        raise InvalidArguments(f"{name} must be a list of 1..{maximum} objects")
    parsed = [parse_item(r, f"{name}[{i}]", event=event) for i, r in enumerate(items)]
    ids = [p.id for p in parsed]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise InvalidArguments(f"{name} name the same id twice: {', '.join(dupes[:10])}")
    return parsed


def parse_put(
    records: Any, idempotency_key: Any, expected_revisions: Any, idempotency_class: Any
) -> PutCall:
    key = idempotency.parse_key(idempotency_key)
    klass = idempotency.parse_class(idempotency_class)
    states = _parse_batch(records, "records", MAX_RECORDS, event=False)
    expected = parse_expected(expected_revisions, {s.id for s in states})
    # as on the memory plane: an empty object is the digest's null ("expected_revisions or null")
    payload = digest(
        {"records": records, "expected_revisions": expected_revisions or None}, "records"
    )
    return PutCall(states, key, klass, expected, payload)


def parse_append(events: Any, idempotency_key: Any, idempotency_class: Any) -> AppendCall:
    key = idempotency.parse_key(idempotency_key)
    klass = idempotency.parse_class(idempotency_class)
    parsed = _parse_batch(events, "events", MAX_EVENTS, event=True)
    return AppendCall(parsed, key, klass, digest({"events": events}, "events"))


def confine_writes(items: list[Item], token_scope: Mapping[str, str]) -> None:
    for item in items:
        require_inside(item.scope, token_scope, f"record {item.id}")


def events_equal(stored_json: bytes | str, item: Item) -> bool:
    """Event equality is equality of canonical JSON: ``1`` and ``1.0``, ``true`` and ``1``
    differ, as they would when returned verbatim."""
    stored = stored_json.encode() if isinstance(stored_json, str) else stored_json
    return stored == item.record_json


# -- reads ---------------------------------------------------------------------------


def parse_list(scope_all: Any, scope_any: Any, limit: Any, cursor: Any) -> ListCall:
    all_, any_ = validate_filter(scope_all, scope_any)
    return ListCall(all_, any_, parse_limit(limit, MAX_LIST_LIMIT), parse_cursor(cursor))


def parse_read_events(
    scope_all: Any,
    scope_any: Any,
    since: Any,
    until: Any,
    order: Any,
    limit: Any,
    cursor: Any,
) -> ListCall:
    all_, any_ = validate_filter(scope_all, scope_any)
    if order is not None and order not in ORDERS:
        raise InvalidArguments('order must be null, "asc" or "desc"')
    return ListCall(
        all_,
        any_,
        parse_limit(limit, MAX_READ_LIMIT),
        parse_cursor(cursor),
        None if since is None else parse_time(since, "since"),
        None if until is None else parse_time(until, "until"),
        order == "desc",
    )


def confine_read(call: ListCall, token_scope: Mapping[str, str]) -> ListCall:
    all_, any_ = confine_filter(call.scope_all, call.scope_any, token_scope)
    return replace(call, scope_all=all_, scope_any=any_)


def cursor_tag(kind: str, call: ListCall) -> str:
    """The tag binding a cursor to this (confined) filter; ``scope_any`` order is irrelevant."""
    any_ = sorted({canonical_json(e).decode() for e in call.scope_any})
    return filter_tag(
        f"affect.{kind}",
        [call.scope_all, any_, call.since_us, call.until_us, call.descending],
    )
