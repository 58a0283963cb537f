"""The affect plane's reads (``get_many``, ``list``, ``read_events``), once for every SQL
backend: the same statements in the backend's ``SqlDialect``, the same keyset pages and
signed cursors. A backend supplies how one statement runs (``_fetch``) and its codec.

Scoped reads filter in SQL (``WHERE`` over the axis columns) before ``LIMIT``, never after,
and page by keyset (``(at_us, id)`` for events, ``id`` for states), so concurrent writes
neither skip nor repeat an item.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import orjson

from ratatoskr.affect import rules
from ratatoskr.core.context import CallContext
from ratatoskr.core.cursors import CursorCodec
from ratatoskr.core.scope import contains
from ratatoskr.core.sql_dialect import SqlDialect


class AffectReads:
    """Mixed into each affect store (before ``AffectCalls``)."""

    SQL: ClassVar[SqlDialect]
    cursors: CursorCodec

    def _fetch(self, statement: str, args: Sequence[Any]) -> list[Any]:
        """The rows of one read statement, which is its own snapshot."""
        raise NotImplementedError

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}
        among, args = self.SQL.among("id", wanted)
        rows = self._fetch(
            f"SELECT id, revision, scope_json, record_json FROM affect_states WHERE {among}", args
        )
        text = self.SQL.text
        by_id = {
            text(i): rules.with_revision(orjson.loads(record), revision)
            for i, revision, scope, record in rows
            if contains(orjson.loads(scope), token_scope)
        }
        return [by_id[i] for i in wanted if i in by_id]

    def list_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        """The read half of ``list``: ``call`` is validated and already confined."""
        sql = self.SQL
        tag = rules.cursor_tag("list", call)
        condition, params = sql.scope_condition(call.scope_all, call.scope_any)
        args: list[Any] = list(params)
        if call.cursor is not None:
            condition += f" AND id > {sql.param}"
            args.append(sql.bind(str(self.cursors.open(call.cursor, tag, (str,)).key[0])))
        rows = self._fetch(
            "SELECT id, revision, record_json FROM affect_states "
            f"WHERE {condition} ORDER BY id LIMIT {sql.param}",
            (*args, call.limit + 1),
        )
        page = rows[: call.limit]
        more = len(rows) > call.limit
        return {
            "records": [rules.with_revision(orjson.loads(r), rev) for _, rev, r in page],
            "next_cursor": self.cursors.make(tag, (sql.text(page[-1][0]),)) if more else None,
        }

    def read_events_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        """The read half of ``read_events``: ``call`` is validated and already confined."""
        sql = self.SQL
        tag = rules.cursor_tag("read_events", call)
        condition, params = sql.scope_condition(call.scope_all, call.scope_any)
        args: list[Any] = list(params)
        if call.since_us is not None:
            condition += f" AND at_us >= {sql.param}"
            args.append(call.since_us)
        if call.until_us is not None:
            condition += f" AND at_us < {sql.param}"
            args.append(call.until_us)
        if call.cursor is not None:
            after = self.cursors.open(call.cursor, tag, (int, str), descending=call.descending)
            condition += f" AND (at_us, id) {'<' if call.descending else '>'} ({sql.params(2)})"
            args.extend([after.key[0], sql.bind(str(after.key[1]))])
        direction = "DESC" if call.descending else "ASC"
        rows = self._fetch(
            f"SELECT at_us, id, record_json FROM affect_events WHERE {condition} "
            f"ORDER BY at_us {direction}, id {direction} LIMIT {sql.param}",
            (*args, call.limit + 1),
        )
        page = rows[: call.limit]
        more = len(rows) > call.limit
        last = page[-1] if page else None
        return {
            "events": [orjson.loads(r) for _, _, r in page],
            "next_cursor": (
                self.cursors.make(tag, (last[0], sql.text(last[1])), descending=call.descending)
                if more and last is not None
                else None
            ),
        }
