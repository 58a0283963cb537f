"""The affect plane's verb table: which verbs, which args, and the store call behind each.

Argument rules live in ``affect.rules`` (shared with both stores); this table only routes
them so that validation and confinement (``prepare``) run before the replay check and the
store (``execute``). Cursors are opened by the store, which holds their secret, against the
already confined filter. Any store with the methods of ``AffectVerbs``
(``affect.interface``) can serve it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ratatoskr.affect import calls, rules
from ratatoskr.affect.interface import AffectVerbs
from ratatoskr.core.context import CallContext
from ratatoskr.wire import verbs as shared
from ratatoskr.wire.plane import Plane, VerbTable

PLANE = "affect"


# -- prepare: validation and confinement, no storage ------------------------------------


def _prepare_get(args: Mapping[str, Any], ctx: CallContext) -> str:
    return rules.check_id(args.get("id"), "id")


# -- execute: the store -----------------------------------------------------------------


def _put(store: AffectVerbs, call: rules.PutCall, ctx: CallContext) -> dict[str, Any]:
    return store.put_parsed(call, ctx)


def _append(store: AffectVerbs, call: rules.AppendCall, ctx: CallContext) -> dict[str, Any]:
    return store.append_parsed(call, ctx)


def _list(store: AffectVerbs, call: rules.ListCall, ctx: CallContext) -> dict[str, Any]:
    return store.list_parsed(call)


def _read_events(store: AffectVerbs, call: rules.ListCall, ctx: CallContext) -> dict[str, Any]:
    return store.read_events_parsed(call)


def _get(store: AffectVerbs, state_id: str, ctx: CallContext) -> dict[str, Any] | None:
    return store.get(state_id, ctx=ctx)


# -- argument schemas (documentation and fuzzing) ---------------------------------------

_TIME = {"type": "string", "format": "date-time", "description": "RFC 3339 with an offset"}
_CURSOR = {"type": "string", "nullable": True, "description": "next_cursor of the last page"}
_STATE = {
    "type": "object",
    "description": "stored verbatim; the store reads only id and scope",
    "properties": {"id": shared.STRING_ID, "scope": shared.SCOPE_SCHEMA},
    "required": ["id"],
    "additionalProperties": True,
}
_EVENT = {
    "type": "object",
    "description": "immutable, stored verbatim; the store reads only id, scope and at",
    "properties": {"id": shared.STRING_ID, "scope": shared.SCOPE_SCHEMA, "at": _TIME},
    "required": ["id", "at"],
    "additionalProperties": True,
}


PUT_ARGS = shared.args_schema(
    {
        "records": {"type": "array", "items": _STATE, "minItems": 1, "maxItems": rules.MAX_RECORDS},
        "idempotency_key": shared.IDEMPOTENCY_KEY,
        "expected_revisions": shared.EXPECTED_REVISIONS,
        "idempotency_class": shared.IDEMPOTENCY_CLASS,
    },
    ["records", "idempotency_key"],
)
APPEND_ARGS = shared.args_schema(
    {
        "events": {"type": "array", "items": _EVENT, "minItems": 1, "maxItems": rules.MAX_EVENTS},
        "idempotency_key": shared.IDEMPOTENCY_KEY,
        "idempotency_class": shared.IDEMPOTENCY_CLASS,
    },
    ["events", "idempotency_key"],
)
LIST_ARGS = shared.args_schema(
    {
        **shared.FILTER_SCHEMA,
        "limit": {"type": "integer", "minimum": 1, "maximum": rules.MAX_LIST_LIMIT},
        "cursor": _CURSOR,
    },
    ["limit"],
)
READ_EVENTS_ARGS = shared.args_schema(
    {
        **shared.FILTER_SCHEMA,
        "since": {**_TIME, "nullable": True},
        "until": {**_TIME, "nullable": True},
        "order": {"type": "string", "nullable": True, "enum": list(rules.ORDERS)},
        "limit": {"type": "integer", "minimum": 1, "maximum": rules.MAX_READ_LIMIT},
        "cursor": _CURSOR,
    },
    ["limit"],
)


AFFECT_TABLE = VerbTable(
    plane=PLANE,
    verbs=(
        shared.describe_store_verb(),
        shared.health_verb(),
        shared.verb(
            "put_many", calls.prepare_put, _put, PUT_ARGS, mutating=True, counted=("records",)
        ),
        shared.verb(
            "get", _prepare_get, _get, shared.args_schema({"id": shared.STRING_ID}, ["id"])
        ),
        shared.get_many_verb(),
        shared.verb("list", calls.prepare_list, _list, LIST_ARGS, counted=("scope_any",)),
        shared.delete_many_verb(),
        shared.verb(
            "append_events",
            calls.prepare_append,
            _append,
            APPEND_ARGS,
            mutating=True,
            counted=("events",),
        ),
        shared.verb(
            "read_events",
            calls.prepare_read_events,
            _read_events,
            READ_EVENTS_ARGS,
            counted=("scope_any",),
        ),
    ),
    unsupported=frozenset(),
    describe=lambda store: {
        "capabilities": store.describe_store(),
        "limits": dict(rules.LIMITS),
    },
)


def affect_plane(store: AffectVerbs) -> Plane:
    """The affect plane over ``store``."""
    return Plane(AFFECT_TABLE, store)
