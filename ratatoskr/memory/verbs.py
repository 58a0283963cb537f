"""The memory plane's verb table: which verbs, which args, and the store call behind each.

Argument rules live in ``rules`` and ``calls`` (shared by every store); this table routes
them so that validation and confinement (``prepare``) run before the replay check and the
store (``execute``). Any store with the methods of ``MemoryVerbs`` (``memory.interface``)
can serve it: the SQLite store, or the reference store the parity tests put behind the
same app.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ratatoskr.core.context import CallContext
from ratatoskr.memory import calls, rules
from ratatoskr.memory.body import split_search, split_upsert
from ratatoskr.memory.interface import MemoryVerbs
from ratatoskr.wire import verbs as shared
from ratatoskr.wire.plane import DEFERRED, Plane, Verb, VerbTable

PLANE = "memory"
GATED_VERBS = frozenset(
    {
        "upsert_edges",
        "get_edges_for",
        "scan",
        "mark_invalid",
        "mark_superseded",
        "patch_many",
        "atomic_supersede",
    }
)


# -- prepare: validation and confinement, no storage ------------------------------------


def _prepare_upsert(dim: int) -> Any:
    return lambda args, ctx: calls.prepare_upsert(args, ctx, dim)


def _prepare_search(dim: int) -> Any:
    return lambda args, ctx: calls.prepare_search(args, ctx, dim)


def _prepare_get(args: Mapping[str, Any], ctx: CallContext) -> str:
    return rules.check_id(args.get("chunk_id"), "chunk_id")


# -- execute: the store -----------------------------------------------------------------


def _upsert(store: MemoryVerbs, call: rules.UpsertCall, ctx: CallContext) -> dict[str, Any]:
    return store.upsert_parsed(call, ctx)


def _search(store: MemoryVerbs, call: rules.SearchCall, ctx: CallContext) -> list[dict[str, Any]]:
    return store.search_parsed(call)


def _search_quick(store: MemoryVerbs, call: rules.SearchCall, ctx: CallContext) -> Any:
    hits = store.search_quick(call)
    return DEFERRED if hits is None else hits


def _get(store: MemoryVerbs, chunk_id: str, ctx: CallContext) -> dict[str, Any] | None:
    return store.get(chunk_id, ctx=ctx)


# -- argument schemas (documentation and fuzzing) ---------------------------------------

_VECTOR = {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 4096}
_RECORD = {
    "type": "object",
    "description": "stored verbatim; the store reads only id, embedding, scope, origin, "
    "injection_source",
    "properties": {
        "id": shared.STRING_ID,
        "embedding": _VECTOR,
        "scope": shared.SCOPE_SCHEMA,
        "origin": {"type": "string"},
        "injection_source": {},
        "distillate": {},
    },
    "additionalProperties": True,
}


UPSERT_ARGS = shared.args_schema(
    {
        "records": {
            "type": "array",
            "items": _RECORD,
            "minItems": 1,
            "maxItems": rules.MAX_RECORDS,
        },
        "idempotency_key": shared.IDEMPOTENCY_KEY,
        "expected_revisions": shared.EXPECTED_REVISIONS,
        "idempotency_class": shared.IDEMPOTENCY_CLASS,
    },
    ["records", "idempotency_key"],
)
SEARCH_ARGS = shared.args_schema(
    {
        "vector": _VECTOR,
        "top_k": {"type": "integer", "minimum": 1, "maximum": rules.MAX_TOP_K},
        **shared.FILTER_SCHEMA,
        "metadata_filter": {"type": "object", "nullable": True, "maxProperties": 0},
        "include": {
            "type": "object",
            "nullable": True,
            "properties": {"embedding": {"type": "boolean"}},
            "additionalProperties": False,
        },
        "fidelity_target": {
            "type": "number",
            "nullable": True,
            "exclusiveMinimum": True,
            "minimum": 0,
            "maximum": 1,
        },
    },
    ["vector", "top_k"],
)


def _table(dim: int) -> VerbTable:
    return VerbTable(
        plane=PLANE,
        verbs=(
            shared.describe_store_verb(),
            shared.health_verb(),
            Verb(
                "upsert_many",
                _prepare_upsert(dim),
                _upsert,
                mutating=True,
                args=frozenset(UPSERT_ARGS["properties"]),
                counted=("records",),
                args_schema=UPSERT_ARGS,
                split=split_upsert,
            ),
            Verb(
                "search",
                _prepare_search(dim),
                _search,
                quick=_search_quick,
                args=frozenset(SEARCH_ARGS["properties"]),
                counted=("scope_any",),
                args_schema=SEARCH_ARGS,
                split=split_search,
            ),
            Verb(
                "get",
                _prepare_get,
                _get,
                args=frozenset({"chunk_id"}),
                args_schema=shared.args_schema({"chunk_id": shared.STRING_ID}, ["chunk_id"]),
            ),
            shared.get_many_verb(),
            shared.delete_many_verb(),
        ),
        unsupported=GATED_VERBS,
        describe=_describe,
    )


def _describe(store: MemoryVerbs) -> dict[str, Any]:
    return {
        "capabilities": store.describe_store(),
        "limits": dict(rules.LIMITS),
        "embedding_dim": store.embedding_dim,
    }


def memory_table(embedding_dim: int) -> VerbTable:
    """The memory verb table for vectors of ``embedding_dim`` numbers."""
    return _table(embedding_dim)


def memory_plane(store: MemoryVerbs) -> Plane:
    """The memory plane over ``store``."""
    return Plane(memory_table(store.embedding_dim), store)
