"""The seed contract's TESTS for the memory store, one named test each, on every storage
backend (real SQLite files, a real PostgreSQL server; ``tests/backends.py``).

Each behavioural test runs against every backend and against the reference store, so the
oracle of the parity suite is held to the same contract.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ratatoskr.core.errors import (
    IdempotencyConflict,
    InvalidArguments,
    InvalidFilter,
    RevisionMismatch,
)
from ratatoskr.memory.reference import ReferenceMemoryStore
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from ratatoskr.server.settings import load_settings
from tests.backends import BACKENDS, Backend, selected
from tests.memory.helpers import CTX, DIM, chunk, vec

V1_CAPS = {
    "relational_edges_supported": False,
    "optimistic_locking_supported": True,
    "atomic_supersede_supported": False,
    "transaction_supported": False,
    "filterable_metadata_fields": [],
}


@pytest.fixture(params=[*selected(), "reference"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "reference":
        s: Any = ReferenceMemoryStore(DIM)
    else:
        backend = BACKENDS[request.param]
        s = backend.memory(backend.fresh(tmp_path, "memory"), embedding_dim=DIM)
    yield s
    s.close()


def vec_rows(s: RatatoskrMemoryStore) -> list[str]:
    with s.db.read() as conn:
        return sorted(r[0] for r in conn.execute("SELECT chunk_id FROM memory_vec").fetchall())


def chunk_rows(s: RatatoskrMemoryStore) -> list[str]:
    with s.db.read() as conn:
        return sorted(r[0] for r in conn.execute("SELECT chunk_id FROM memory_chunks").fetchall())


# -- open_memory_store ---------------------------------------------------------------------


def test_fresh_db(backend: Backend, tmp_path: Path) -> None:
    # the seed's ":memory:" on SQLite; a fresh, empty schema on PostgreSQL
    location = ":memory:" if backend.name == "sqlite" else backend.fresh(tmp_path, "memory")
    s = backend.memory(location, embedding_dim=8)
    assert s.describe_store() == V1_CAPS
    tables = backend.footprint(s)  # every table of the plane, queried
    assert {"memory_chunks", "memory_idempotency"} <= tables.keys()
    assert set(tables.values()) == {0}
    s.close()


def test_reopen(backend: Backend, tmp_path: Path) -> None:
    location = backend.fresh(tmp_path, "memory")
    first = backend.memory(location, embedding_dim=DIM)
    first.upsert_many([chunk("a", vec(1))], idempotency_key="k1", ctx=CTX)
    first.upsert_many([chunk("a", vec(1, 1))], idempotency_key="k2", ctx=CTX)
    first.close()
    second = backend.memory(location, embedding_dim=DIM)
    assert second.describe_store() == V1_CAPS
    got = second.get("a")
    assert got is not None and got["revision"] == 2 and got["embedding"] == vec(1, 1)
    assert second.upsert_many([chunk("a", vec(1, 1))], idempotency_key="k2", ctx=CTX) == {
        "upserted": 1,
        "replayed": True,
    }
    second.close()


def test_a_new_file_gets_64_kib_pages_whatever_the_settings(tmp_path: Path) -> None:
    """The server passes its own database settings (no page size): a file it creates gets
    the store's page size all the same, as one opened with the defaults does."""
    for name, settings in (
        ("plain.db", None),
        ("served.db", load_settings({"RATATOSKR_HEIMDALL_KEY": "k" * 32}).database),
    ):
        s = open_memory_store(str(tmp_path / name), embedding_dim=DIM, settings=settings)
        with s.db.read() as conn:
            assert conn.execute("PRAGMA page_size").fetchall()[0][0] == 65536
        s.close()


def test_open_rejects_bad_dimension(tmp_path: Path) -> None:
    for bad in (0, -3, True, 2.5):
        with pytest.raises(ValueError, match="embedding_dim"):
            open_memory_store(str(tmp_path / "m.db"), embedding_dim=bad)  # type: ignore[arg-type]


def test_open_rejects_unwritable_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not writable"):
        open_memory_store(str(tmp_path / "missing" / "m.db"), embedding_dim=DIM)


# -- describe_store --------------------------------------------------------------------------


def test_caps(store: Any) -> None:
    assert store.describe_store() == V1_CAPS
    # advertise => implement: none of the gated verbs exists on the store
    for verb in ("upsert_edges", "scan", "atomic_supersede", "patch_many", "mark_invalid"):
        assert not hasattr(store, verb)


# -- upsert_many -----------------------------------------------------------------------------


def test_basic_upsert(store: Any) -> None:
    records = [chunk("a", vec(1), scope={"tenant": "t"}), chunk("b", vec(0, 1), trust_tier=2)]
    assert store.upsert_many(records, idempotency_key="k", ctx=CTX) == {
        "upserted": 2,
        "replayed": False,
    }
    for record in records:
        assert store.get(record["id"]) == {**record, "revision": 1}


def test_replay(store: Any) -> None:
    records = [chunk("a", vec(1))]
    store.upsert_many(records, idempotency_key="k", ctx=CTX)
    again = store.upsert_many(records, idempotency_key="k", ctx=CTX)
    assert again == {"upserted": 1, "replayed": True}
    assert store.get("a")["revision"] == 1


def test_conflict(store: Any) -> None:
    store.upsert_many([chunk("a", vec(1))], idempotency_key="k", ctx=CTX)
    with pytest.raises(IdempotencyConflict):
        store.upsert_many([chunk("a", vec(0, 1))], idempotency_key="k", ctx=CTX)
    assert store.get("a") == {**chunk("a", vec(1)), "revision": 1}


def test_optimistic_lock(store: Any) -> None:
    store.upsert_many([chunk("a", vec(1))], idempotency_key="k1", ctx=CTX)
    batch = [chunk("a", vec(0, 1)), chunk("b", vec(1, 1))]
    with pytest.raises(RevisionMismatch) as err:
        store.upsert_many(batch, idempotency_key="k2", ctx=CTX, expected_revisions={"a": 7})
    assert err.value.mismatches == [{"id": "a", "expected": 7, "actual": 1}]
    assert store.get("a")["embedding"] == vec(1) and store.get("b") is None
    ok = store.upsert_many(
        batch, idempotency_key="k3", ctx=CTX, expected_revisions={"a": 1, "b": 0}
    )
    assert ok["upserted"] == 2
    assert store.get("a")["revision"] == 2 and store.get("b")["revision"] == 1


def test_injection_rule(store: Any) -> None:
    bad_missing = chunk("a", vec(1), origin="injected_context")
    bad_extra = chunk("b", vec(1), origin="observed", injection_source="tool")
    for record in (bad_missing, bad_extra):
        with pytest.raises(InvalidArguments):
            store.upsert_many([chunk("ok", vec(1)), record], idempotency_key="k", ctx=CTX)
    assert store.get("ok") is None
    good = chunk("c", vec(1), origin="injected_context", injection_source="tool")
    assert store.upsert_many([good], idempotency_key="k", ctx=CTX)["upserted"] == 1


# -- search ----------------------------------------------------------------------------------


def test_basic_search(store: Any) -> None:
    store.upsert_many(
        [
            chunk("a", vec(1, 0), scope={"tenant": "t"}),
            chunk("b", vec(1, 1), scope={"tenant": "t"}),
            chunk("c", vec(0, 1), scope={"tenant": "t"}),
        ],
        idempotency_key="k",
        ctx=CTX,
    )
    hits = store.search(vec(1, 0.2), top_k=2)
    assert [h["chunk_id"] for h in hits] == ["a", "b"]
    assert hits[0]["score"] > hits[1]["score"]
    assert hits[0]["recalled_view"] == "about a"
    assert hits[0]["revision"] == 1 and hits[0]["chunk"]["id"] == "a"


@pytest.mark.parametrize("distillate", [None, "", 0, False])
def test_a_distillate_without_content_recalls_the_whole_chunk(store: Any, distillate: Any) -> None:
    record = {**chunk("a", vec(1, 0)), "distillate": distillate}
    store.upsert_many([record], idempotency_key="k", ctx=CTX)
    (hit,) = store.search(vec(1, 0), top_k=1)
    assert hit["recalled_view"] == hit["chunk"]
    assert hit["chunk"]["distillate"] == distillate and type(hit["chunk"]["distillate"]) is type(
        distillate
    )


def test_scope_isolation(store: Any) -> None:
    loud = [chunk(f"x{i}", vec(1, 0.01 * i), scope={"tenant": "other"}) for i in range(30)]
    quiet = [chunk(f"m{i}", vec(0.1, 1, i), scope={"tenant": "mine"}) for i in range(3)]
    store.upsert_many(loud + quiet, idempotency_key="k", ctx=CTX)
    hits = store.search(vec(1), top_k=3, scope_all={"tenant": "mine"})
    assert sorted(h["chunk_id"] for h in hits) == ["m0", "m1", "m2"]


def test_scope_any_union(store: Any) -> None:
    store.upsert_many(
        [
            chunk("subject", vec(1), scope={"tenant": "t", "end_user": "u"}),
            chunk("self", vec(0, 1), scope={"tenant": "t", "agent_self": "a"}),
            chunk("neither", vec(1, 1), scope={"tenant": "t", "end_user": "v"}),
            chunk("elsewhere", vec(1), scope={"tenant": "s", "end_user": "u"}),
        ],
        idempotency_key="k",
        ctx=CTX,
    )
    union = [{"end_user": "u"}, {"agent_self": "a"}]
    hits = store.search(vec(1, 1), top_k=10, scope_any=union)
    assert sorted(h["chunk_id"] for h in hits) == ["elsewhere", "self", "subject"]
    hits = store.search(vec(1, 1), top_k=10, scope_all={"tenant": "t"}, scope_any=union)
    assert sorted(h["chunk_id"] for h in hits) == ["self", "subject"]


def test_empty(store: Any) -> None:
    assert store.search(vec(1), top_k=5) == []
    store.upsert_many(
        [chunk("a", vec(1), scope={"tenant": "t"}), chunk("b", vec(0, 1))],
        idempotency_key="k",
        ctx=CTX,
    )
    assert len(store.search(vec(1), top_k=5, scope_all={}, scope_any=[])) == 2


def test_metadata_filter_rejected(store: Any) -> None:
    with pytest.raises(InvalidArguments):
        store.search(vec(1), top_k=5, metadata_filter={"trust_tier": 1})
    assert store.search(vec(1), top_k=5, metadata_filter={}) == []


def test_lattice_axes(store: Any) -> None:
    with pytest.raises(InvalidFilter):
        store.search(vec(1), top_k=5, scope_all={"planet": "x"})
    with pytest.raises(InvalidFilter):
        store.search(vec(1), top_k=5, scope_any=[{"tenant": "t"}, {"planet": "x"}])
    with pytest.raises(InvalidArguments):
        store.search(vec(1), top_k=5, scope_any={"tenant": "t"})
    store.upsert_many([chunk("a", vec(1), scope={"agent_self": "s"})], idempotency_key="k", ctx=CTX)
    assert [
        h["chunk_id"] for h in store.search(vec(1), top_k=5, scope_all={"agent_self": "s"})
    ] == ["a"]


# -- get / get_many / delete_many --------------------------------------------------------------


def test_get_hit(store: Any) -> None:
    record = chunk("a", vec(1), metadata={"nested": [1, {"x": None}]}, trust_tier="high")
    store.upsert_many([record], idempotency_key="k", ctx=CTX)
    assert store.get("a") == {**record, "revision": 1}


def test_get_absent(store: Any) -> None:
    assert store.get("nope") is None


def test_get_many(store: Any) -> None:
    store.upsert_many([chunk("a", vec(1)), chunk("b", vec(0, 1))], idempotency_key="k", ctx=CTX)
    assert [r["id"] for r in store.get_many(["b", "absent", "a", "b"])] == ["b", "a"]
    assert store.get_many(["absent"]) == []


def test_delete_hit(backend: Backend, tmp_path: Path) -> None:
    s = backend.memory(backend.fresh(tmp_path, "memory"), embedding_dim=DIM)
    s.upsert_many([chunk("a", vec(1)), chunk("b", vec(0.9, 0.1))], idempotency_key="k", ctx=CTX)
    before = backend.footprint(s)["memory_chunks"]
    assert s.delete_many(["a"]) == {"deleted": 1}
    assert backend.footprint(s)["memory_chunks"] == before - 1
    if backend.name == "sqlite":  # the vectors' own index table
        assert chunk_rows(s) == ["b"] and vec_rows(s) == ["b"]
    assert s.get("a") is None and s.get_many(["a", "b"])[0]["id"] == "b"
    assert [h["chunk_id"] for h in s.search(vec(1), top_k=5)] == ["b"]
    s.close()


def test_delete_absent(store: Any) -> None:
    assert store.delete_many(["ghost"]) == {"deleted": 0}
