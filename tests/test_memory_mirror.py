"""The per-process search mirror stays in step with the file: writes and deletes through
another store instance or another process, direct SQL, restarts, a pruned change log, and a
memory budget it does not fit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from ratatoskr.provider import memory_store
from ratatoskr.provider.memory_store import RatatoskrMemoryStore, open_memory_store
from tests.memory_helpers import CTX, DIM, chunk, vec


def ids(store: RatatoskrMemoryStore, **kwargs: object) -> list[str]:
    return [h["chunk_id"] for h in store.search(vec(1, 1), top_k=50, **kwargs)]  # type: ignore[arg-type]


def test_two_workers_read_each_others_writes(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    a = open_memory_store(path, embedding_dim=DIM)
    b = open_memory_store(path, embedding_dim=DIM)
    assert ids(b) == []  # b's mirror is loaded (empty) before a writes
    for i in range(20):
        a.upsert_many([chunk(f"c{i}", vec(1, i))], idempotency_key=f"k{i}", ctx=CTX)
        assert f"c{i}" in ids(b)  # alternating: every acknowledged write is visible
    a.delete_many(["c3", "c4"])
    assert "c3" not in ids(b) and len(ids(b)) == 18
    a.upsert_many([chunk("c5", vec(1, 1), scope={"tenant": "t"})], idempotency_key="moved", ctx=CTX)
    assert ids(b, scope_all={"tenant": "t"}) == ["c5"]
    assert b.mirror is not None and b.mirror.n == 20
    a.close()
    b.close()


def test_write_from_another_process_is_seen(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    store = open_memory_store(path, embedding_dim=DIM)
    store.upsert_many([chunk("here", vec(1))], idempotency_key="k", ctx=CTX)
    assert ids(store) == ["here"]
    code = textwrap.dedent(
        f"""
        from ratatoskr.provider.memory_store import open_memory_store
        from ratatoskr.wire.context import CallContext
        s = open_memory_store({path!r}, embedding_dim={DIM})
        s.upsert_many([{{"id": "there", "embedding": [1.0, 1.0] + [0.0] * {DIM - 2}}}],
                      idempotency_key="k", ctx=CallContext(actor="other"))
        s.delete_many(["here"])
        s.close()
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert ids(store) == ["there"]
    store.close()


def test_direct_sql_changes_reach_the_mirror(tmp_path: Path) -> None:
    store = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    store.upsert_many([chunk("a", vec(1)), chunk("b", vec(0, 1))], idempotency_key="k", ctx=CTX)
    assert sorted(ids(store)) == ["a", "b"]
    with store.db.write() as conn:  # an operator tool deleting by hand: the trigger logs it
        conn.execute("DELETE FROM memory_chunks WHERE chunk_id = 'a'")
        conn.execute("DELETE FROM memory_vec WHERE chunk_id = 'a'")
    assert ids(store) == ["b"]
    store.close()


def test_restart_reloads_the_mirror(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    first = open_memory_store(path, embedding_dim=DIM)
    first.upsert_many([chunk(f"c{i}", vec(1, i)) for i in range(30)], idempotency_key="k", ctx=CTX)
    first.delete_many(["c0"])
    expected = ids(first)
    first.close()
    second = open_memory_store(path, embedding_dim=DIM)
    assert ids(second) == expected and len(expected) == 29
    second.close()


def test_a_mirror_behind_the_pruned_log_reloads(tmp_path: Path, monkeypatch: object) -> None:
    path = str(tmp_path / "m.db")
    writer = open_memory_store(path, embedding_dim=DIM)
    reader = open_memory_store(path, embedding_dim=DIM)
    writer.upsert_many([chunk("old", vec(1))], idempotency_key="k0", ctx=CTX)
    assert ids(reader) == ["old"]
    setattr(memory_store, "CHANGES_KEPT", 3)  # noqa: B010 - shrink the log for this test
    try:
        for i in range(10):
            writer.upsert_many([chunk(f"n{i}", vec(1, i))], idempotency_key=f"k{i + 1}", ctx=CTX)
        writer.delete_many(["old"])
    finally:
        setattr(memory_store, "CHANGES_KEPT", 200_000)  # noqa: B010
    with writer.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM memory_changes").fetchall()[0][0] <= 4
    assert sorted(ids(reader)) == sorted(f"n{i}" for i in range(10))
    writer.close()
    reader.close()


def test_over_budget_falls_back_to_sql_and_back(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    per_row = DIM * 4 + 4 + 16 + 1 + 160
    store = open_memory_store(path, embedding_dim=DIM, mirror_bytes=per_row * 5)
    sql_only = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    rng = np.random.default_rng(7)
    records = [chunk(f"c{i}", rng.standard_normal(DIM).tolist()) for i in range(8)]
    store.upsert_many(records[:4], idempotency_key="k1", ctx=CTX)
    assert ids(store) == ids(sql_only) and store.mirror is not None
    assert store.mirror.over_budget is False and store.mirror.n == 4
    store.upsert_many(records[4:], idempotency_key="k2", ctx=CTX)
    assert ids(store) == ids(sql_only) and store.mirror.over_budget is True
    store.delete_many(["c0", "c1", "c2", "c3"])
    assert ids(store) == ids(sql_only) and store.mirror.over_budget is False
    store.close()
    sql_only.close()
