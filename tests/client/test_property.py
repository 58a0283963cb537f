"""The same calls through ``Client`` (a real server, over HTTP) and on the stores themselves
(in this process, in a place of their own on the server's backend) give the same results
and the same errors.

Each example runs as a fresh tenant and actor on both sides, so their states start equal
and stay apart from every other example's. Cursors are compared by whether there is one:
each store signs its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.client import Client, RatatoskrError
from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import BifrostError
from tests.backends import BACKENDS
from tests.server.harness import DIM, KEY, Server

_examples = itertools.count()


class Stores:
    def __init__(self, backend_name: str, root: Path) -> None:
        backend = BACKENDS[backend_name]
        self.memory: Any = backend.memory(backend.fresh(root, "memory"), embedding_dim=DIM)
        self.affect: Any = backend.affect(backend.fresh(root, "affect"))

    def close(self) -> None:
        self.memory.close()
        self.affect.close()


@pytest.fixture(scope="module")
def stores(backend_name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    own = Stores(backend_name, tmp_path_factory.mktemp("own-stores"))
    yield own
    own.close()


# -- the calls ----------------------------------------------------------------------------

values = st.sampled_from([0.0, 1.0, -1.0, 0.5, 0.1, -0.25, 3.0, 1e-3])
vector = st.lists(values, min_size=DIM, max_size=DIM).filter(any)
users = st.sampled_from(["u1", "u2"])
ids = st.sampled_from(["a", "b", "c", "d"])
keys = st.sampled_from(["k1", "k2", "k3"])


@st.composite
def chunk(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": draw(ids),
        "embedding": draw(vector),
        "scope": {"end_user": draw(users)},  # the tenant is added per example
    }
    if draw(st.booleans()):
        record["distillate"] = draw(st.sampled_from(["x", "y", "z"]))
    return record


@st.composite
def state(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "id": draw(ids),
        "scope": {"end_user": draw(users)},
        "mood": draw(st.integers(0, 3)),
    }


@st.composite
def event(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "id": draw(ids),
        "at": draw(st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-02T10:00:00+02:00"])),
        "scope": {"end_user": draw(users)},
        "kind": draw(st.sampled_from(["joy", "calm"])),
    }


scope_filter = st.one_of(st.none(), st.builds(lambda u: {"end_user": u}, users))
call = st.one_of(
    st.tuples(
        st.just("upsert_many"),
        st.lists(chunk(), min_size=1, max_size=3),
        keys,
        st.one_of(st.none(), st.dictionaries(ids, st.integers(0, 2), max_size=2)),
    ),
    st.tuples(
        st.just("search"),
        vector,
        st.integers(1, 5),
        scope_filter,
        st.one_of(st.none(), st.lists(st.builds(lambda u: {"end_user": u}, users), max_size=2)),
        st.booleans(),
    ),
    st.tuples(st.just("get"), ids),
    st.tuples(st.just("get_many"), st.lists(ids, min_size=1, max_size=3)),
    st.tuples(st.just("delete_many"), st.lists(ids, min_size=1, max_size=2)),
    st.tuples(st.just("put_many"), st.lists(state(), min_size=1, max_size=3), keys),
    st.tuples(st.just("affect_get_many"), st.lists(ids, min_size=1, max_size=3)),
    st.tuples(st.just("list"), st.integers(1, 3), scope_filter),
    st.tuples(st.just("append_events"), st.lists(event(), min_size=1, max_size=2), keys),
    st.tuples(st.just("read_events"), st.integers(1, 3), st.sampled_from([None, "asc", "desc"])),
)


def in_tenant(items: list[dict[str, Any]], tenant: str) -> list[dict[str, Any]]:
    """Records of this example: its tenant in their scope, its prefix on their ids."""
    return [
        {**item, "id": f"{tenant}-{item['id']}", "scope": {**item["scope"], "tenant": tenant}}
        for item in items
    ]


def named(ids_: list[str], tenant: str) -> list[str]:
    return [f"{tenant}-{i}" for i in ids_]


def run(step: tuple[Any, ...], tenant: str, client: Client, own: Stores, ctx: CallContext) -> Any:
    """One step on both sides: their outcomes (a result, or an error's class, code and
    message)."""
    verb, *a = step
    memory, affect = own.memory, own.affect
    if verb == "upsert_many":
        records, key = in_tenant(a[0], tenant), a[1]
        expected = None if a[2] is None else {f"{tenant}-{k}": v for k, v in a[2].items()}
        return both(
            lambda: client.memory.upsert_many(
                records, idempotency_key=key, expected_revisions=expected
            ),
            lambda: memory.upsert_many(
                records, idempotency_key=key, ctx=ctx, expected_revisions=expected
            ),
            "memory",
        )
    if verb == "search":
        query, top_k, scope_all, scope_any, embedding = a
        options = {"scope_all": scope_all, "scope_any": scope_any}
        include = {"embedding": embedding}
        vector_np = np.asarray(query, dtype=np.float32)  # the client sends an array
        return both(
            lambda: client.memory.search(vector_np, top_k=top_k, include=include, **options),
            lambda: memory.search(
                vector_np.tolist(), top_k=top_k, include=include, ctx=ctx, **options
            ),
            "memory",
        )
    if verb == "get":
        chunk_id = f"{tenant}-{a[0]}"
        return both(lambda: client.memory.get(chunk_id), lambda: memory.get(chunk_id, ctx=ctx))
    if verb in ("get_many", "delete_many"):
        wanted = named(a[0], tenant)
        return both(
            lambda: getattr(client.memory, verb)(wanted),
            lambda: getattr(memory, verb)(wanted, ctx=ctx),
            "memory",
        )
    if verb == "put_many":
        records, key = in_tenant(a[0], tenant), a[1]
        return both(
            lambda: client.affect.put_many(records, idempotency_key=key),
            lambda: affect.put_many(records, idempotency_key=key, ctx=ctx),
            "affect",
        )
    if verb == "affect_get_many":
        wanted = named(a[0], tenant)
        return both(
            lambda: client.affect.get_many(wanted),
            lambda: affect.get_many(wanted, ctx=ctx),
            "affect",
        )
    if verb == "list":
        limit, scope_all = a
        return both(
            lambda: client.affect.list(limit=limit, scope_all=scope_all),
            lambda: affect.list(limit=limit, scope_all=scope_all, ctx=ctx),
            "affect",
        )
    if verb == "append_events":
        events, key = in_tenant(a[0], tenant), a[1]
        return both(
            lambda: client.affect.append_events(events, idempotency_key=key),
            lambda: affect.append_events(events, idempotency_key=key, ctx=ctx),
            "affect",
        )
    assert verb == "read_events"
    limit, order = a
    return both(
        lambda: client.affect.read_events(limit=limit, order=order),
        lambda: affect.read_events(limit=limit, order=order, ctx=ctx),
        "affect",
    )


def both(through: Callable[[], Any], own: Callable[[], Any], plane: str = "memory") -> Any:
    try:
        theirs: Any = ("ok", cursorless(through()))
    except RatatoskrError as error:
        theirs = ("error", type(error).__name__, error.code, error.message)
    try:
        ours: Any = ("ok", cursorless(own()))
    except BifrostError as error:
        ours = ("error", type(error).__name__, error.wire_code(plane), error.message)
    assert theirs == ours
    return theirs


def cursorless(result: Any) -> Any:
    if isinstance(result, dict) and "next_cursor" in result:
        return {**result, "next_cursor": result["next_cursor"] is not None}
    return result


@given(st.lists(call, min_size=1, max_size=8))
def test_client_results_are_the_stores_own(
    server: Server, stores: Stores, steps: list[Any]
) -> None:
    tenant = f"prop-{next(_examples)}"
    ctx = CallContext(actor=tenant, scope={"tenant": tenant})
    with Client(server.url, key=KEY, scope={"tenant": tenant}, actor=tenant) as client:
        for step in steps:
            run(step, tenant, client, stores, ctx)
