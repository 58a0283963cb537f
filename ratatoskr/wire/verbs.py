"""What every plane's verb table shares: the store verbs both planes have (descriptor,
health, reads and deletes by id) and the argument schema pieces of the lattice."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ratatoskr.core.context import CallContext
from ratatoskr.core.record_ids import MAX_ID_CHARS, MAX_IDS, check_ids
from ratatoskr.core.scope import AXES, MAX_SCOPE_ANY, MAX_VALUE_CHARS
from ratatoskr.wire.plane import Verb, no_args


class IdStore(Protocol):
    """The methods every plane store has, whatever else it holds."""

    def describe_store(self) -> dict[str, Any]: ...
    def health(self) -> dict[str, Any]: ...
    def get_many(
        self, ids: list[str], *, ctx: CallContext | None = None
    ) -> list[dict[str, Any]]: ...
    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]: ...


# -- argument schemas (documentation and fuzzing) ---------------------------------------

STRING_ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS}
IDS: dict[str, Any] = {"type": "array", "items": STRING_ID, "minItems": 1, "maxItems": MAX_IDS}
IDEMPOTENCY_KEY: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 256}
IDEMPOTENCY_CLASS: dict[str, Any] = {
    "type": "string",
    "nullable": True,
    "enum": ["default", "ephemeral", "durable"],
}
EXPECTED_REVISIONS: dict[str, Any] = {
    "type": "object",
    "nullable": True,
    "additionalProperties": {"type": "integer", "minimum": 0},
}
SCOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        axis: {"type": "string", "minLength": 1, "maxLength": MAX_VALUE_CHARS} for axis in AXES
    },
    "additionalProperties": False,
}
FILTER_SCHEMA: dict[str, Any] = {
    "scope_all": {**SCOPE_SCHEMA, "nullable": True},
    "scope_any": {
        "type": "array",
        "items": SCOPE_SCHEMA,
        "maxItems": MAX_SCOPE_ANY,
        "nullable": True,
    },
}


def args_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A closed object schema: unknown argument keys are invalid on every verb."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def verb(name: str, prepare: Any, execute: Any, schema: dict[str, Any], **kw: Any) -> Verb:
    """A verb whose accepted argument keys are exactly its schema's properties."""
    return Verb(
        name, prepare, execute, args=frozenset(schema["properties"]), args_schema=schema, **kw
    )


# -- the verbs every plane has ----------------------------------------------------------


def _prepare_ids(args: Mapping[str, Any], ctx: CallContext) -> list[str]:
    return check_ids(args.get("ids"))


def _describe_store(store: IdStore, prepared: None, ctx: CallContext) -> dict[str, Any]:
    return store.describe_store()


def _health(store: IdStore, prepared: None, ctx: CallContext) -> dict[str, Any]:
    return store.health()


def _get_many(store: IdStore, ids: list[str], ctx: CallContext) -> list[dict[str, Any]]:
    return store.get_many(ids, ctx=ctx)


def _delete_many(store: IdStore, ids: list[str], ctx: CallContext) -> dict[str, int]:
    return store.delete_many(ids, ctx=ctx)


def describe_store_verb() -> Verb:
    return verb("describe_store", no_args, _describe_store, args_schema({}, []))


def health_verb() -> Verb:
    return verb("health", no_args, _health, args_schema({}, []))


def get_many_verb() -> Verb:
    ids = args_schema({"ids": IDS}, ["ids"])
    return verb("get_many", _prepare_ids, _get_many, ids, counted=("ids",))


def delete_many_verb() -> Verb:
    ids = args_schema({"ids": IDS}, ["ids"])
    return verb("delete_many", _prepare_ids, _delete_many, ids, mutating=True, counted=("ids",))
