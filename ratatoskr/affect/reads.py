"""The affect plane's reads (``get_many``, ``list``, ``read_events``), once for every SQL
backend: the same statements in the backend's ``SqlDialect``, the same keyset pages and
signed cursors. A backend supplies how one statement runs (``_fetch``) and its codec.

Scoped reads filter in SQL (``WHERE`` over the axis columns) before ``LIMIT``, never after,
and page by keyset (``(at_us, id)`` for events, ``id`` for states), so concurrent writes
neither skip nor repeat an item. A walk ends at the last item its filter admitted when it
began (its cursors carry that end), so it ends even while writers add items past it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import orjson

from ratatoskr.affect import rules
from ratatoskr.core.context import CallContext
from ratatoskr.core.cursors import CursorCodec, SortKey, make_walk, open_walk
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
        admits, params = sql.scope_condition(call.scope_all, call.scope_any)
        condition, args = admits, list(params)
        end: SortKey | None = None
        if call.cursor is not None:
            after, end = open_walk(self.cursors, call.cursor, tag, (str,))
            condition += f" AND id > {sql.param}"
            args.append(sql.bind(str(after[0])))
            if end is not None:
                condition += f" AND id <= {sql.param}"
                args.append(sql.bind(str(end[0])))
        rows = self._fetch(
            "SELECT id, revision, record_json FROM affect_states "
            f"WHERE {condition} ORDER BY id LIMIT {sql.param}",
            (*args, call.limit + 1),
        )
        page = rows[: call.limit]
        more = len(rows) > call.limit
        if more and end is None:  # the walk's first page: it ends at the last id admitted now
            last = self._fetch(
                f"SELECT id FROM affect_states WHERE {admits} ORDER BY id DESC LIMIT 1", params
            )
            # its own snapshot: the states admitted may all be gone (deleted, or moved out
            # of the filter) by now; the walk then ends at the last one the page saw
            end = (sql.text(last[0][0] if last else rows[-1][0]),)
        return {
            "records": [rules.with_revision(orjson.loads(r), rev) for _, rev, r in page],
            "next_cursor": (
                make_walk(self.cursors, tag, (sql.text(page[-1][0]),), end)
                if more and end is not None
                else None
            ),
        }

    def read_events_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        """The read half of ``read_events``: ``call`` is validated and already confined."""
        sql = self.SQL
        tag = rules.cursor_tag("read_events", call)
        admits, params = sql.scope_condition(call.scope_all, call.scope_any)
        admit_args: list[Any] = list(params)
        if call.since_us is not None:
            admits += f" AND at_us >= {sql.param}"
            admit_args.append(call.since_us)
        if call.until_us is not None:
            admits += f" AND at_us < {sql.param}"
            admit_args.append(call.until_us)
        condition, args = admits, list(admit_args)
        before, beyond = ("<", ">=") if call.descending else (">", "<=")
        end: SortKey | None = None
        if call.cursor is not None:
            after, end = open_walk(
                self.cursors, call.cursor, tag, (int, str), descending=call.descending
            )
            condition += f" AND (at_us, id) {before} ({sql.params(2)})"
            args.extend([after[0], sql.bind(str(after[1]))])
            if end is not None:
                condition += f" AND (at_us, id) {beyond} ({sql.params(2)})"
                args.extend([end[0], sql.bind(str(end[1]))])
        direction, backwards = ("DESC", "ASC") if call.descending else ("ASC", "DESC")
        rows = self._fetch(
            f"SELECT at_us, id, record_json FROM affect_events WHERE {condition} "
            f"ORDER BY at_us {direction}, id {direction} LIMIT {sql.param}",
            (*args, call.limit + 1),
        )
        page = rows[: call.limit]
        more = len(rows) > call.limit
        if more and end is None:  # the walk's first page: it ends at the last event admitted now
            last = self._fetch(
                f"SELECT at_us, id FROM affect_events WHERE {admits} "
                f"ORDER BY at_us {backwards}, id {backwards} LIMIT 1",
                admit_args,
            )
            at, eid = last[0] if last else rows[-1][:2]  # as for ``list``: gone by now
            end = (int(at), sql.text(eid))
        return {
            "events": [orjson.loads(r) for _, _, r in page],
            "next_cursor": (
                make_walk(
                    self.cursors,
                    tag,
                    (page[-1][0], sql.text(page[-1][1])),
                    end,
                    descending=call.descending,
                )
                if more and end is not None
                else None
            ),
        }
