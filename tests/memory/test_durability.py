"""Durability with real processes: a SIGKILL mid-batch and four concurrent writers."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from ratatoskr.core.context import CallContext
from ratatoskr.memory.store import open_memory_store
from tests.memory.helpers import loaded

WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from ratatoskr.memory.store import open_memory_store
    from ratatoskr.core.context import CallContext

    path, name, batches, size, dim = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    store = open_memory_store(path, embedding_dim=dim)
    ctx = CallContext(actor=name)
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    for b in range(batches):
        records = [
            {"id": f"{name}-{b}-{i}", "embedding": rng.standard_normal(dim).tolist(),
             "scope": {"tenant": name}, "distillate": "x" * 200}
            for i in range(size)
        ]
        print(f"begin {b}", flush=True)
        store.upsert_many(records, idempotency_key=f"{name}-{b}", ctx=ctx)
        print(f"done {b}", flush=True)
    store.close()
    """
)


def spawn(path: Path, name: str, batches: int, size: int, dim: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), name, str(batches), str(size), str(dim)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def batch_counts(path: Path, prefix: str) -> dict[int, tuple[int, int]]:
    store = open_memory_store(str(path), embedding_dim=64)
    counts: dict[int, list[int]] = {}
    with store.db.read() as conn:
        for table in ("memory_chunks", "memory_vec"):
            for (chunk_id,) in conn.execute(f"SELECT chunk_id FROM {table}").fetchall():
                name, batch, _ = chunk_id.rsplit("-", 2)
                if name == prefix:
                    pair = counts.setdefault(int(batch), [0, 0])
                    pair[0 if table == "memory_chunks" else 1] += 1
    store.close()
    return {b: (c[0], c[1]) for b, c in counts.items()}


def test_sigkill_mid_batch_leaves_all_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    open_memory_store(str(path), embedding_dim=64).close()
    child = spawn(path, "victim", batches=50, size=1000, dim=64)
    assert child.stdout is not None
    for line in child.stdout:
        if line.strip() == "begin 3":
            os.kill(child.pid, signal.SIGKILL)
            break
    child.wait()
    assert child.returncode == -signal.SIGKILL
    counts = batch_counts(path, "victim")
    assert {0, 1, 2} <= set(counts)
    for batch, (chunks, vectors) in counts.items():
        assert chunks == vectors == 1000, (
            f"batch {batch} is partial: {chunks} chunks, {vectors} vectors"
        )
    # the file is healthy and writable after the crash, and a retry converges
    store = open_memory_store(str(path), embedding_dim=64)
    loaded(store)
    assert store.health()["status"] == "ok"
    with store.db.read() as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    retry = [{"id": "victim-3-0", "embedding": [1.0] * 64}]
    store.upsert_many(retry, idempotency_key="retry", ctx=CallContext(actor="victim"))
    store.close()


def test_four_processes_writing_one_file_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    open_memory_store(str(path), embedding_dim=64).close()
    writers = [spawn(path, f"w{i}", batches=25, size=40, dim=64) for i in range(4)]
    for w in writers:
        _, err = w.communicate(timeout=300)
        assert w.returncode == 0, err[-2000:]
        assert "Busy" not in err
    for i in range(4):
        counts = batch_counts(path, f"w{i}")
        assert counts == {b: (40, 40) for b in range(25)}


def test_rewriting_the_same_chunks_does_not_grow_the_vector_index(tmp_path: Path) -> None:
    """A store whose writes only rewrite existing ids keeps its vec0 index (and so its file)
    the same size: each rewrite updates the vector in its slot instead of freeing one slot
    and filling another (sqlite-vec frees a 1,024-slot chunk only once it is empty, so
    scattered rewrites as delete + insert spread the vectors over ever more chunks)."""
    rng = random.Random(7)
    store = open_memory_store(str(tmp_path / "m.db"), embedding_dim=4)
    ctx = CallContext(actor="a")

    def record(i: int) -> dict[str, object]:
        return {"id": f"c{i}", "embedding": [rng.uniform(0.1, 1.0) for _ in range(4)]}

    for lo in range(0, 2048, 512):
        fill = [record(i) for i in range(lo, lo + 512)]
        store.upsert_many(fill, idempotency_key=f"fill-{lo}", ctx=ctx)
    last: dict[str, object] = {}
    for rewrite in range(30):  # 300 scattered ids at a time
        batch = [record(i) for i in rng.sample(range(2048), 300)]
        store.upsert_many(batch, idempotency_key=f"rewrite-{rewrite}", ctx=ctx)
        last = batch[0]
    with store.db.read() as conn:
        chunks = conn.execute("SELECT count(*) FROM memory_vec_chunks").fetchall()[0][0]
    assert chunks == 2  # 2,048 vectors in 1,024-slot chunks, however often rewritten
    store.close()
    sql_only = open_memory_store(str(tmp_path / "m.db"), embedding_dim=4, mirror_bytes=0)
    hit = sql_only.search(last["embedding"], top_k=1)[0]  # type: ignore[arg-type]
    assert hit["chunk_id"] == last["id"]  # unscoped in SQL is a vec0 KNN: it has the newest
    sql_only.close()
