"""The per-process search mirror stays in step with the file: writes and deletes through
another store instance or another process, direct SQL, restarts, a pruned change log, and a
memory budget it does not fit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.memory import store as memory_store
from ratatoskr.memory.search import mirror as memory_mirror
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from tests.memory.helpers import CTX, DIM, chunk, settled, vec


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
    settled(b)  # the worker follows in the background: once it is up to the log,
    assert b.mirror is not None and b.mirror.n - b.mirror.dead == 18  # one row per chunk
    a.close()
    b.close()


def test_write_from_another_process_is_seen(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    store = open_memory_store(path, embedding_dim=DIM)
    store.upsert_many([chunk("here", vec(1))], idempotency_key="k", ctx=CTX)
    assert ids(store) == ["here"]
    code = textwrap.dedent(
        f"""
        from ratatoskr.memory.store import open_memory_store
        from ratatoskr.core.context import CallContext
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
    # the budget counts each row's arrays and Python bookkeeping, plus the record JSON it
    # holds (under 64 characters for these records)
    per_row = memory_mirror.bytes_per_row(DIM) + 64
    store = open_memory_store(path, embedding_dim=DIM, mirror_bytes=per_row * 5)
    sql_only = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    rng = np.random.default_rng(7)
    records = [chunk(f"c{i}", rng.standard_normal(DIM).tolist()) for i in range(8)]
    store.upsert_many(records[:4], idempotency_key="k1", ctx=CTX)
    settled(store)
    assert ids(store) == ids(sql_only) and store.mirror is not None
    assert store.mirror.over_budget is False and store.mirror.n == 4
    store.upsert_many(records[4:], idempotency_key="k2", ctx=CTX)
    assert ids(store) == ids(sql_only)  # beside the mirror, or in SQL once it is dropped
    assert store.engine.wait_until(lambda m: m.over_budget, 30)
    assert ids(store) == ids(sql_only) and not store.mirror.ready
    assert store.health()["status"] == "ok"  # over its budget is a setting, not a load
    store.delete_many(["c0", "c1", "c2", "c3"])
    settled(store)
    assert ids(store) == ids(sql_only) and store.mirror.over_budget is False
    store.close()
    sql_only.close()


def hits(store: RatatoskrMemoryStore, query: list[float], **kwargs: object) -> list[tuple]:  # type: ignore[type-arg]
    found = store.search(query, top_k=25, **kwargs)  # type: ignore[arg-type]
    return [(h["chunk_id"], round(h["score"], 12), h["revision"]) for h in found]


FILTERS: list[dict[str, object]] = [
    {},
    {"scope_all": {"tenant": "t1"}},
    {"scope_all": {"end_user": "u3"}},
    {"scope_all": {"tenant": "t0", "agent_self": "a1"}},
    {"scope_any": [{"end_user": "u1"}, {"agent_self": "a2"}]},
    {"scope_any": [{"end_user": "u0"}, {"end_user": "u5"}]},
    {"scope_all": {"tenant": "t2"}, "scope_any": [{"agent_self": "a0"}, {"end_user": "u4"}]},
    {"scope_any": [{"tenant": "t1"}, {}]},
    {"scope_all": {"tenant": "nobody"}},
]


def scoped(rng: np.random.Generator, i: int) -> dict[str, object]:
    user = int(rng.integers(0, 6))
    scope = {"tenant": f"t{user % 3}", "end_user": f"u{user}"}
    if rng.random() < 0.7:
        scope["agent_self"] = f"a{int(rng.integers(0, 3))}"
    return chunk(f"c{i}", rng.standard_normal(DIM).tolist(), scope=scope)


def test_grouped_rows_answer_like_sql_through_moves_deletes_and_regrouping(
    tmp_path: Path,
) -> None:
    """Random writes, scope moves and deletes from another store instance: after each, the
    mirror (grouped rows, slices, the unsorted tail, regrouping) answers exactly as SQL."""
    path = str(tmp_path / "m.db")
    writer = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    sql_only = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    rng = np.random.default_rng(11)
    writer.upsert_many([scoped(rng, i) for i in range(600)], idempotency_key="seed", ctx=CTX)
    mirrored = open_memory_store(path, embedding_dim=DIM)  # loads the 600, grouped
    query = rng.standard_normal(DIM).tolist()
    assert hits(mirrored, query) == hits(sql_only, query)  # in SQL, or on the mirror
    settled(mirrored)
    assert hits(mirrored, query) == hits(sql_only, query)  # on the mirror, grouped
    assert mirrored.mirror is not None and mirrored.mirror.sorted_n == 600
    for step in range(12):
        ids_ = rng.choice(600 + 450 * step, size=450, replace=False)
        batch = [scoped(rng, int(i)) for i in ids_] + [
            scoped(rng, 600 + 450 * step + j) for j in range(450)
        ]
        writer.upsert_many(batch[:1000], idempotency_key=f"s{step}", ctx=CTX)
        doomed = [f"c{int(i)}" for i in rng.choice(600 + 450 * step, size=40, replace=False)]
        writer.delete_many(doomed)
        query = rng.standard_normal(DIM).tolist()
        for flt in FILTERS:
            assert hits(mirrored, query, **flt) == hits(sql_only, query, **flt), (step, flt)
    # The tail and the holes outgrew their share at least once, so the worker regrouped
    # (while these searches ran, or after them).
    assert mirrored.engine.wait_until(lambda m: m.regroups >= 1, 60)
    settled(mirrored)
    for flt in FILTERS:
        assert hits(mirrored, query, **flt) == hits(sql_only, query, **flt), flt
    for store in (writer, mirrored, sql_only):
        store.close()


@given(
    st.lists(st.integers(0, 200), unique=True).map(sorted),
    st.lists(st.integers(-5, 210)),
)
def test_rows_less_the_excluded_ones_are_a_set_difference(
    rows: list[int], exclude: list[int]
) -> None:
    got = memory_mirror.without(np.array(rows, dtype=np.int64), np.array(exclude, dtype=np.int64))
    assert got.tolist() == [r for r in rows if r not in set(exclude)]


def _vma_flags(address: int) -> list[str]:
    """The kernel's ``VmFlags`` of this process's mapping that holds ``address``."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(part, 16) for part in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "VmFlags:":
            return line.split()[1:]
    raise AssertionError("no mapping holds the address")


def test_the_mirror_object_arrays_go_without_huge_page_advice_and_the_matrix_keeps_it() -> None:
    rows = 4_000_000  # 32 MB of pointers: past numpy's 4 MiB threshold for the advice
    held = memory_mirror.objects(rows)
    assert held.dtype == object and held[0] is None and held[-1] is None
    assert "hg" not in _vma_flags(held.ctypes.data + (8 << 20))
    plain = np.empty(rows, dtype=object)  # numpy's own default, and the switch put back after
    matrix = np.zeros((rows // 96, 768), dtype=np.float32)
    assert "hg" in _vma_flags(plain.ctypes.data + (8 << 20))
    assert "hg" in _vma_flags(matrix.ctypes.data + (8 << 20))


def test_a_columns_codes_are_those_its_values_get_one_at_a_time() -> None:
    one, batch = memory_mirror.VectorMirror(DIM, 1 << 20), memory_mirror.VectorMirror(DIM, 1 << 20)
    for values in (["u1", "u2", None, "u1"], ["u3", "u2", "u4", None], [None, None], []):
        assert batch.codes_of(2, values) == [one._code(2, v) for v in values]
    assert batch.values == one.values and batch.values[2] == {"u1": 1, "u2": 2, "u3": 3, "u4": 4}
    assert batch.codes_of(0, ["t1"]) == [1]  # each axis numbers its own values
