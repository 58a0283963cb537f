"""``admin list`` and ``admin get``: what a filter admits (ids, scope, revision), and whole
records by id.

Listing returns only structure, never content (``AdminStore.list_records``), so it can be
shown to an operator who must not see content. It pages by keyset ``(kind, id)`` with the
store's signed cursors, so a walk visits every record present throughout exactly once and
ends.
"""

from __future__ import annotations

from typing import Any

from ratatoskr.core.filters import Filter
from ratatoskr.ops.stores import PlaneStore

MAX_LIST_LIMIT = 500
DEFAULT_LIST_LIMIT = 50
MAX_GET_IDS = 200  # the operations contract's get: 1..200 ids


def check_limit(value: int, maximum: int, name: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ValueError(f"{name} must be an integer in 1..{maximum:,}")
    return value


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
    page = store.list_records(flt, limit=limit, cursor=cursor)
    return {
        "plane": plane,
        "filter": flt.to_json(),
        "records": page.records,
        "next_cursor": page.next_cursor,
    }


def check_get_ids(ids: list[str]) -> list[str]:
    """``ids`` as ``get`` reads them: 1..``MAX_GET_IDS`` non-empty strings (counted as
    named, repeats included), repeats folded to their first occurrence."""
    if not ids or any(not isinstance(i, str) or not i for i in ids):
        raise ValueError("get needs at least one non-empty id")
    if len(ids) > MAX_GET_IDS:
        raise ValueError(f"get takes at most {MAX_GET_IDS} ids ({len(ids):,} given)")
    return list(dict.fromkeys(ids))


def get_records(store: PlaneStore, ids: list[str]) -> list[dict[str, Any]]:
    """Whole records in the order named, each at most once, missing ones left out.

    On the affect plane an id may name a state and an event: both come back, the state first.
    """
    wanted = check_get_ids(ids)
    return [dict(found) for found in store.get_records(wanted)]
