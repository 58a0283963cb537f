"""The memory plane's calls, prepared once for every caller: parse, then confine.

The wire's verb table and every store's keyword API (``upsert_many``, ``search``) go through
these functions, so a store (SQLite, the reference oracle, any other backend) only writes the
halves that touch storage, ``upsert_parsed`` and ``search_parsed``, and inherits the rest from
``MemoryCalls``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ratatoskr.core.context import CallContext
from ratatoskr.memory import rules


def prepare_upsert(args: Mapping[str, Any], ctx: CallContext, dim: int) -> rules.UpsertCall:
    """An ``upsert_many`` call validated and confined to the token's scope; no storage."""
    call = rules.parse_upsert(
        args.get("records"),
        args.get("idempotency_key"),
        args.get("expected_revisions"),
        args.get("idempotency_class"),
        dim,
    )
    rules.confine_writes(call.chunks, ctx.scope)
    return call


def prepare_search(args: Mapping[str, Any], ctx: CallContext | None, dim: int) -> rules.SearchCall:
    """A ``search`` call validated and, given a context, confined; no storage."""
    call = rules.parse_search(
        args.get("vector"),
        args.get("top_k"),
        args.get("scope_all"),
        args.get("scope_any"),
        args.get("metadata_filter"),
        args.get("include"),
        args.get("fidelity_target"),
        dim,
    )
    return call if ctx is None else rules.confine_search(call, ctx.scope)


class MemoryCalls:
    """The keyword API of a memory store over its parsed halves."""

    embedding_dim: int

    def upsert_parsed(self, call: rules.UpsertCall, ctx: CallContext) -> dict[str, Any]:
        raise NotImplementedError

    def search_parsed(self, call: rules.SearchCall) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get(self, chunk_id: str, *, ctx: CallContext | None = None) -> dict[str, Any] | None:
        found = self.get_many([rules.check_id(chunk_id, "chunk_id")], ctx=ctx)
        return found[0] if found else None

    def upsert_many(
        self,
        records: list[dict[str, Any]],
        *,
        idempotency_key: str,
        ctx: CallContext,
        expected_revisions: dict[str, int] | None = None,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        args = {
            "records": records,
            "idempotency_key": idempotency_key,
            "expected_revisions": expected_revisions,
            "idempotency_class": idempotency_class,
        }
        return self.upsert_parsed(prepare_upsert(args, ctx, self.embedding_dim), ctx)

    def search(
        self,
        vector: list[float],
        *,
        top_k: int,
        scope_all: dict[str, str] | None = None,
        scope_any: list[dict[str, str]] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        include: dict[str, Any] | None = None,
        fidelity_target: float | None = None,
        ctx: CallContext | None = None,
    ) -> list[dict[str, Any]]:
        args = {
            "vector": vector,
            "top_k": top_k,
            "scope_all": scope_all,
            "scope_any": scope_any,
            "metadata_filter": metadata_filter,
            "include": include,
            "fidelity_target": fidelity_target,
        }
        return self.search_parsed(prepare_search(args, ctx, self.embedding_dim))
