"""Reads and deletes by id over a reference store's dictionary, the same on both planes:
a record outside the token scope behaves as missing."""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping
from typing import Any, Protocol

from ratatoskr.core.context import CallContext
from ratatoskr.core.record_ids import check_ids
from ratatoskr.core.scope import contains


class Scoped(Protocol):
    record: dict[str, Any]
    scope: dict[str, str]
    revision: int


def get_many(
    table: Mapping[str, Scoped], ids: list[str], ctx: CallContext | None
) -> list[dict[str, Any]]:
    """Found records plus ``revision``, in the order named, each once."""
    token_scope = ctx.scope if ctx else {}
    out = []
    for record_id in check_ids(ids):
        stored = table.get(record_id)
        if stored is not None and contains(stored.scope, token_scope):
            out.append({**copy.deepcopy(stored.record), "revision": stored.revision})
    return out


def delete_many(
    table: MutableMapping[str, Any], ids: list[str], ctx: CallContext | None
) -> dict[str, int]:
    """Remove the named records inside the token scope; count only those."""
    token_scope = ctx.scope if ctx else {}
    deleted = 0
    for record_id in check_ids(ids):
        stored = table.get(record_id)
        if stored is not None and contains(stored.scope, token_scope):
            del table[record_id]
            deleted += 1
    return {"deleted": deleted}
