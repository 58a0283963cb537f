"""``admin list`` and ``admin get``: what a filter admits (ids, scope, revision), and whole
records by id.

Listing reads only structural columns, never ``record_json``, so it can be shown to an
operator who must not see content. It pages by keyset ``(kind, id)`` with the shared signed
cursors, so a walk visits every record present throughout exactly once and ends.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from ratatoskr.core.filters import MEMORY, Filter
from ratatoskr.ops.filters import Table, condition, tables_for
from ratatoskr.ops.stores import PlaneStore
from ratatoskr.sqlite.cursors import CursorCodec, filter_tag

MAX_LIST_LIMIT = 500
DEFAULT_LIST_LIMIT = 50
MAX_GET_IDS = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_limit(value: int, maximum: int, name: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ValueError(f"{name} must be an integer in 1..{maximum:,}")
    return value


def iso_time(at_us: int) -> str:
    """An event time (UTC microseconds) as RFC 3339, as the wire writes it."""
    return (_EPOCH + timedelta(microseconds=at_us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _select(table: Table) -> str:
    return ", ".join(
        [
            table.id_column,
            "revision" if table.has_revision else "NULL",
            "scope_json",
            "origin" if table.has_origin else "NULL",
            "at_us" if table.has_time else "NULL",
        ]
    )


def _item(table: Table, row: tuple[Any, ...]) -> dict[str, Any]:
    record_id, revision, scope_json, origin, at_us = row
    item: dict[str, Any] = {
        "kind": table.kind,
        "id": record_id,
        "revision": revision,
        "scope": orjson.loads(scope_json),
    }
    if table.has_origin:
        item["origin"] = origin
    if table.has_time:
        item["at"] = iso_time(at_us)
    return item


def list_records(
    store: PlaneStore,
    plane: str,
    flt: Filter,
    *,
    limit: int = DEFAULT_LIST_LIMIT,
    cursor: str | None = None,
) -> dict[str, Any]:
    """One page of the records ``flt`` admits, by kind then id, and the cursor to the next."""
    check_limit(limit, MAX_LIST_LIMIT)
    codec = CursorCodec.for_database(store.db)
    tag = filter_tag(f"admin.list.{plane}", flt.to_json())
    after = None if cursor is None else codec.open(cursor, tag, (str, str)).key
    items: list[dict[str, Any]] = []
    with store.db.read() as conn:
        for table in tables_for(plane, flt):
            if after is not None and table.kind < str(after[0]):
                continue
            where, args = condition(table, flt)
            if after is not None and table.kind == after[0]:
                where += f" AND {table.id_column} > ?"
                args.append(after[1])
            rows = conn.execute(
                f"SELECT {_select(table)} FROM {table.name} WHERE {where} "
                f"ORDER BY {table.id_column} LIMIT ?",
                (*args, limit + 1 - len(items)),
            ).fetchall()
            items.extend(_item(table, row) for row in rows)
            if len(items) > limit:
                break
    page = items[:limit]
    more = len(items) > limit
    return {
        "plane": plane,
        "filter": flt.to_json(),
        "records": page,
        "next_cursor": codec.make(tag, (page[-1]["kind"], page[-1]["id"])) if more else None,
    }


def get_records(store: PlaneStore, plane: str, ids: list[str]) -> list[dict[str, Any]]:
    """Whole records in the order named, each at most once, missing ones left out.

    On the affect plane an id may name a state and an event (separate tables): both come
    back, the state first.
    """
    wanted = list(dict.fromkeys(ids))
    if not wanted or any(not isinstance(i, str) or not i for i in wanted):
        raise ValueError("get needs at least one non-empty id")
    if len(wanted) > MAX_GET_IDS:
        raise ValueError(f"get takes at most {MAX_GET_IDS} ids")
    found: dict[str, list[dict[str, Any]]] = {}
    if plane == MEMORY:
        for record in store.get_many(wanted):
            found.setdefault(_record_id(record), []).append({"kind": "chunk", "record": record})
    else:
        for record in store.get_many(wanted):
            found.setdefault(_record_id(record), []).append({"kind": "state", "record": record})
        marks = ",".join("?" * len(wanted))
        with store.db.read() as conn:
            rows = conn.execute(
                f"SELECT id, record_json FROM affect_events WHERE id IN ({marks})", wanted
            ).fetchall()
        for event_id, record_json in rows:
            found.setdefault(event_id, []).append(
                {"kind": "event", "record": orjson.loads(record_json)}
            )
    return [{"id": i, **hit} for i in wanted for hit in found.get(i, [])]


def _record_id(record: dict[str, Any]) -> str:
    for key in ("id", "chunk_id", "memory_id"):
        if isinstance(record.get(key), str):
            return str(record[key])
    raise ValueError("a stored record has no id")
