"""``RatatoskrMemoryStore.search_quick``, the bounded search the wire runs on its event loop:
it answers exactly what the full search answers, sees every acknowledged write, and defers
(``None``, nothing done) whenever the work would not be small for sure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ratatoskr.memory import rules
from ratatoskr.memory.search import engine
from ratatoskr.memory.search.holds import holding
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from tests.memory.helpers import CTX, DIM, chunk, settled


def call(rng: np.random.Generator, **scope: Any) -> rules.SearchCall:
    vector = rng.standard_normal(DIM).tolist()
    return rules.parse_search(vector, 5, scope.get("all"), scope.get("any"), None, None, None, DIM)


def filled(path: Path, rng: np.random.Generator, n: int = 300) -> RatatoskrMemoryStore:
    store = open_memory_store(str(path), embedding_dim=DIM)
    records = [
        chunk(
            f"c{i:03d}",
            rng.standard_normal(DIM).tolist(),
            scope={"tenant": f"t{i % 3}", "end_user": f"u{i % 30}", "agent_self": f"a{i % 7}"},
        )
        for i in range(n)
    ]
    store.upsert_many(records, idempotency_key="fill", ctx=CTX)
    return store


def test_quick_answers_what_the_full_search_answers(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    store = filled(tmp_path / "m.db", rng)
    settled(store)
    scopes: list[dict[str, Any]] = [
        {"all": {"end_user": "u4"}},
        {"all": {"tenant": "t1", "agent_self": "a3"}},
        {"any": [{"end_user": "u1"}, {"agent_self": "a2"}]},
        {"all": {"tenant": "t2"}, "any": [{"end_user": "u5"}, {"end_user": "u8"}]},
        {"all": {"end_user": "nobody"}},
        {},
    ]
    for scope in scopes:
        for _ in range(5):
            search = call(rng, **scope)
            quick = store.search_quick(search)
            assert quick is not None, scope
            assert quick == store.search_parsed(search), scope
    store.close()


def test_quick_defers_until_the_mirror_is_loaded(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    store = filled(tmp_path / "m.db", rng)
    with holding("load-started") as hold:
        reopened = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
        assert hold.reached.wait(30)
        search = call(rng, all={"end_user": "u3"})
        assert reopened.search_quick(search) is None  # a load takes seconds at scale
        assert reopened.mirror is not None and reopened.mirror.seq == -1  # nothing was done
        full = reopened.search_parsed(search)  # exact SQL, in the threadpool
    settled(reopened)
    assert reopened.search_quick(search) == full
    store.close()
    reopened.close()


def test_quick_defers_a_scope_too_broad(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    store = filled(tmp_path / "m.db", rng)
    settled(store)
    monkeypatch.setattr(engine, "QUICK_FLOATS", 20 * DIM)
    assert store.search_quick(call(rng, all={"end_user": "u7"})) is not None  # 10 rows
    assert store.search_quick(call(rng, all={"tenant": "t0"})) is None  # 100 rows
    assert store.search_quick(call(rng)) is None  # every row
    store.close()


def test_quick_defers_a_large_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    store = filled(tmp_path / "m.db", rng)
    settled(store)

    def search(top_k: int, embedding: bool, **scope: dict[str, str]) -> rules.SearchCall:
        vector = rng.standard_normal(DIM).tolist()
        include = {"embedding": embedding}
        return rules.parse_search(vector, top_k, scope["all"], None, None, include, None, DIM)

    assert store.search_quick(search(100, True, all={"end_user": "u7"})) is not None  # 10 hits
    assert store.search_quick(search(100, True, all={"tenant": "t0"})) is None  # 100 hits
    monkeypatch.setattr(engine, "QUICK_HIT_FLOATS", 5 * DIM)  # 5 embeddings
    assert store.search_quick(search(10, True, all={"end_user": "u7"})) is None
    assert store.search_quick(search(10, False, all={"end_user": "u7"})) is not None
    assert store.search_quick(search(5, True, all={"end_user": "u7"})) is not None
    store.close()


def test_quick_sees_each_acknowledged_write_and_defers_a_long_backlog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(4)
    writer = filled(tmp_path / "m.db", rng)
    reader = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    settled(reader)
    target = rng.standard_normal(DIM).tolist()
    search = rules.parse_search(target, 1, {"end_user": "new"}, None, None, None, None, DIM)
    for i in range(3):  # alternating: each write is visible to the very next quick search
        record = chunk(f"n{i}", target, scope={"end_user": "new"})
        writer.upsert_many([record], idempotency_key=f"n{i}", ctx=CTX)
        hits = reader.search_quick(search)
        assert hits is not None and hits[0]["chunk_id"] == f"n{i}"
        writer.delete_many([f"n{i}"])
        assert reader.search_quick(search) == []
    monkeypatch.setattr(engine, "QUICK_CHANGES", 2)
    many = [chunk(f"m{i}", target, scope={"end_user": "new"}) for i in range(5)]
    with holding("follow", reader.engine.worker) as hold:  # the worker waits before it applies them
        assert hold.reached.wait(30)
        writer.upsert_many(many, idempotency_key="many", ctx=CTX)
        assert reader.search_quick(search) is None  # 5 changes behind: the threadpool
        assert reader.search_parsed(search)[0]["chunk_id"] == "m0"
    settled(reader)
    assert reader.search_quick(search) == reader.search_parsed(search)
    writer.close()
    reader.close()


def test_quick_defers_while_another_thread_holds_the_mirror(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    store = filled(tmp_path / "m.db", rng)
    search = call(rng, all={"end_user": "u2"})
    settled(store)
    expected = store.search_parsed(search)
    assert store.mirror is not None
    with store.mirror.lock:  # e.g. a broad search ranking in the threadpool
        assert store.search_quick(search) is None
    assert store.search_quick(search) == expected
    store.close()


def test_quick_defers_without_a_mirror(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    filled(tmp_path / "m.db", rng).close()
    sql_only = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM, mirror_bytes=0)
    search = call(rng, all={"end_user": "u2"})
    assert sql_only.search_quick(search) is None
    assert len(sql_only.search_parsed(search)) == 5
    sql_only.close()
