"""The affect plane's calls, prepared once for every caller: parse, then confine.

The wire's verb table and every store's keyword API go through these functions, so a store
only writes the halves that touch storage (``put_parsed``, ``append_parsed``,
``list_parsed``, ``read_events_parsed``) and inherits the rest from ``AffectCalls``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ratatoskr.affect import rules
from ratatoskr.core.context import CallContext


def prepare_put(args: Mapping[str, Any], ctx: CallContext) -> rules.PutCall:
    """A ``put_many`` call validated and confined to the token's scope; no storage."""
    call = rules.parse_put(
        args.get("records"),
        args.get("idempotency_key"),
        args.get("expected_revisions"),
        args.get("idempotency_class"),
    )
    rules.confine_writes(call.states, ctx.scope)
    return call


def prepare_append(args: Mapping[str, Any], ctx: CallContext) -> rules.AppendCall:
    """An ``append_events`` call validated and confined; no storage."""
    call = rules.parse_append(
        args.get("events"), args.get("idempotency_key"), args.get("idempotency_class")
    )
    rules.confine_writes(call.events, ctx.scope)
    return call


def prepare_list(args: Mapping[str, Any], ctx: CallContext | None) -> rules.ListCall:
    """A ``list`` call validated and, given a context, confined."""
    call = rules.parse_list(
        args.get("scope_all"), args.get("scope_any"), args.get("limit"), args.get("cursor")
    )
    return call if ctx is None else rules.confine_read(call, ctx.scope)


def prepare_read_events(args: Mapping[str, Any], ctx: CallContext | None) -> rules.ListCall:
    """A ``read_events`` call validated and, given a context, confined."""
    call = rules.parse_read_events(
        args.get("scope_all"),
        args.get("scope_any"),
        args.get("since"),
        args.get("until"),
        args.get("order"),
        args.get("limit"),
        args.get("cursor"),
    )
    return call if ctx is None else rules.confine_read(call, ctx.scope)


class AffectCalls:
    """The keyword API of an affect store over its parsed halves."""

    def put_parsed(self, call: rules.PutCall, ctx: CallContext) -> dict[str, Any]:
        raise NotImplementedError

    def append_parsed(self, call: rules.AppendCall, ctx: CallContext) -> dict[str, Any]:
        raise NotImplementedError

    def list_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        raise NotImplementedError

    def read_events_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        raise NotImplementedError

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get(self, id: str, *, ctx: CallContext | None = None) -> dict[str, Any] | None:
        found = self.get_many([rules.check_id(id, "id")], ctx=ctx)
        return found[0] if found else None

    def put_many(
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
        return self.put_parsed(prepare_put(args, ctx), ctx)

    def append_events(
        self,
        events: list[dict[str, Any]],
        *,
        idempotency_key: str,
        ctx: CallContext,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        args = {
            "events": events,
            "idempotency_key": idempotency_key,
            "idempotency_class": idempotency_class,
        }
        return self.append_parsed(prepare_append(args, ctx), ctx)

    def read_events(
        self,
        *,
        limit: int,
        scope_all: dict[str, str] | None = None,
        scope_any: list[dict[str, str]] | None = None,
        since: str | None = None,
        until: str | None = None,
        order: str | None = None,
        cursor: str | None = None,
        ctx: CallContext | None = None,
    ) -> dict[str, Any]:
        args = {
            "limit": limit,
            "scope_all": scope_all,
            "scope_any": scope_any,
            "since": since,
            "until": until,
            "order": order,
            "cursor": cursor,
        }
        return self.read_events_parsed(prepare_read_events(args, ctx))

    # ``list`` last: inside the class body the name would shadow the builtin in annotations.
    def list(
        self,
        *,
        limit: int,
        scope_all: dict[str, str] | None = None,
        scope_any: list[dict[str, str]] | None = None,
        cursor: str | None = None,
        ctx: CallContext | None = None,
    ) -> dict[str, Any]:
        """States admitted by the filter, by id ascending, one page of at most ``limit``."""
        args = {"limit": limit, "scope_all": scope_all, "scope_any": scope_any, "cursor": cursor}
        return self.list_parsed(prepare_list(args, ctx))
