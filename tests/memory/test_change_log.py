"""The change log says what each change left (the chunk stored with its scope, or deleted),
so a search ahead of its mirror reads the log alone; entries written before it said so
(a file migrated from an older schema) are read with the table joined, and answer alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from ratatoskr.memory.reference import ReferenceMemoryStore
from ratatoskr.memory.search import inplace
from ratatoskr.memory.search import mirror as memory_mirror
from ratatoskr.memory.search.holds import holding
from ratatoskr.memory.search.overlay import ChangedRows, Overlay
from ratatoskr.memory.store import open_memory_store
from tests.memory.helpers import CTX, DIM, chunk, random_chunks, settled, vec

SCOPES = [
    {"tenant": "t1", "end_user": "u1"},
    {"tenant": "t1", "group": "g", "end_user": "u2", "agent_self": "a"},
    {},
]


def log_since(path: Path, seq: int) -> list[tuple[object, ...]]:
    conn = apsw.Connection(str(path))
    try:
        rows: list[tuple[object, ...]] = conn.execute(
            "SELECT chunk_id, tenant, grp, end_user, agent_self, stored FROM memory_changes "
            "WHERE seq > ? ORDER BY seq",
            (seq,),
        ).fetchall()
        return rows
    finally:
        conn.close()


def test_each_entry_says_what_the_change_left(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = open_memory_store(str(path), embedding_dim=DIM, mirror_bytes=0)
    rng = np.random.default_rng(1)
    store.upsert_many(
        [chunk(f"c{i}", rng.standard_normal(DIM).tolist(), scope=s) for i, s in enumerate(SCOPES)],
        idempotency_key="k1",
        ctx=CTX,
    )
    store.delete_many(["c0"])
    moved = {"tenant": "t2", "end_user": "u9"}
    store.upsert_many(
        [chunk("c1", rng.standard_normal(DIM).tolist(), scope=moved)], idempotency_key="k2", ctx=CTX
    )
    store.close()
    assert sorted(log_since(path, 0)[:3]) == [
        ("c0", "t1", None, "u1", None, 1),
        ("c1", "t1", "g", "u2", "a", 1),
        ("c2", None, None, None, None, 1),
    ]
    assert log_since(path, 3) == [
        ("c0", None, None, None, None, 0),
        ("c1", "t2", None, "u9", None, 1),
    ]


def test_entries_that_do_not_say_it_are_read_with_the_table(tmp_path: Path) -> None:
    """Entries as a file migrated from the older log holds them (no scope, no ``stored``):
    a search ahead of its mirror over them answers as the reference does."""
    path = tmp_path / "m.db"
    writer = open_memory_store(str(path), embedding_dim=DIM, mirror_bytes=0)
    ref = ReferenceMemoryStore(DIM)
    rng = np.random.default_rng(2)

    def write(ids: range, key: str) -> None:
        batch = [
            chunk(f"c{i}", rng.standard_normal(DIM).tolist(), scope=SCOPES[i % 2]) for i in ids
        ]
        writer.upsert_many(batch, idempotency_key=key, ctx=CTX)
        ref.upsert_many(batch, idempotency_key=key, ctx=CTX)

    write(range(40), "k0")
    ours = open_memory_store(str(path), embedding_dim=DIM)
    settled(ours)
    assert ours.mirror is not None and ours.engine.worker is not None
    with holding("follow", ours.engine.worker) as follow:
        ours.search(rng.standard_normal(DIM).tolist(), top_k=3)  # the worker looks again
        assert follow.reached.wait(30)
        seq = ours.mirror.seq
        write(range(30, 60), "k1")  # rewrites (some moved) and new chunks
        writer.delete_many(["c3", "c35"])
        ref.delete_many(["c3", "c35"])
        conn = apsw.Connection(str(path))
        conn.execute(
            "UPDATE memory_changes SET tenant = NULL, grp = NULL, end_user = NULL, "
            "agent_self = NULL, stored = NULL WHERE seq > ?",
            (seq,),
        )
        conn.close()
        filters: list[dict[str, Any]] = [
            {},
            {"scope_all": {"end_user": "u1"}},
            {"scope_all": {"tenant": "t1"}},
        ]
        for flt in filters:
            query = rng.standard_normal(DIM).tolist()
            assert ours.search(query, top_k=10, **flt) == ref.search(query, top_k=10, **flt)
        assert ours.engine.routes["overlay"] + ours.engine.routes["overlay-shared"] >= 3
    settled(ours)
    query = rng.standard_normal(DIM).tolist()
    assert ours.search(query, top_k=10) == ref.search(query, top_k=10)
    ours.close()
    writer.close()


def test_a_file_with_the_older_log_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = open_memory_store(str(path), embedding_dim=DIM, mirror_bytes=0)
    store.upsert_many([chunk("c1", [1.0] * DIM, scope=SCOPES[0])], idempotency_key="k", ctx=CTX)
    store.close()
    conn = apsw.Connection(str(path))  # back to the older log, as such a file has it
    for column in ("tenant", "grp", "end_user", "agent_self", "stored"):
        conn.execute(f"ALTER TABLE memory_changes DROP COLUMN {column}")
    conn.execute("DROP TRIGGER memory_chunks_delete")
    conn.execute(
        "CREATE TRIGGER memory_chunks_delete AFTER DELETE ON memory_chunks "
        "BEGIN INSERT INTO memory_changes (chunk_id) VALUES (old.chunk_id); END"
    )
    conn.execute("DROP INDEX memory_chunks_far_norm")
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    store = open_memory_store(str(path), embedding_dim=DIM)
    assert store.db.schema_version() == 4
    store.delete_many(["c1"])
    assert log_since(path, 0) == [
        ("c1", None, None, None, None, None),
        ("c1", None, None, None, None, 0),
    ]
    assert store.search([1.0] * DIM, top_k=1) == []
    store.close()


def test_a_search_reads_the_changes_past_the_mirror_once_and_extends_them(
    tmp_path: Path,
) -> None:
    """The first search at a new head reads the changed ids and their last entries; the
    searches after it at that head, whatever their filter, take that read, and the first
    one after the next commit extends it by the new entries alone. A chunk moved twice,
    deleted after a move or written again after a delete answers by its last entry."""
    path = tmp_path / "m.db"
    writer = open_memory_store(str(path), embedding_dim=DIM, mirror_bytes=0)
    ref = ReferenceMemoryStore(DIM)
    rng = np.random.default_rng(3)

    def cid(i: int) -> str:  # some ids that JSON has to escape: the log is read as JSON
        return f"c{i}" + ('\x00"\\\u2028é😀' if i % 3 == 0 else "")

    def write(ids: list[int], key: str, scope_of: Any) -> None:
        batch = [chunk(cid(i), rng.standard_normal(DIM).tolist(), scope=scope_of(i)) for i in ids]
        writer.upsert_many(batch, idempotency_key=key, ctx=CTX)
        ref.upsert_many(batch, idempotency_key=key, ctx=CTX)

    def delete(ids: list[int]) -> None:
        writer.delete_many([cid(i) for i in ids])
        ref.delete_many([cid(i) for i in ids])

    write(list(range(40)), "k0", lambda i: SCOPES[i % 2])
    ours = open_memory_store(str(path), embedding_dim=DIM)
    settled(ours)
    assert ours.engine.worker is not None
    filters: list[dict[str, Any]] = [
        {"scope_all": {"end_user": "u1"}},
        {},
        {"scope_all": {"tenant": "t1"}},
        {"scope_all": {"end_user": "u9"}},  # c31 and c32 were inside it, then left it
        {"scope_any": [{"end_user": "u2"}, {"end_user": "u9"}]},
    ]

    def agree() -> None:
        for flt in filters:
            query = rng.standard_normal(DIM).tolist()
            assert ours.search(query, top_k=12, **flt) == ref.search(query, top_k=12, **flt)

    with holding("follow", ours.engine.worker) as follow:
        ours.search(rng.standard_normal(DIM).tolist(), top_k=3)  # the worker looks again
        assert follow.reached.wait(30)
        write(list(range(30, 50)), "k1", lambda i: {"end_user": "u9"})  # moved, and new
        delete([0, 1, 45])
        write(list(range(34, 40)), "k1b", lambda i: SCOPES[0])  # moved twice in one read
        agree()
        assert ours.engine.routes["overlay"] == 1  # one read at this head, shared after
        write([31, 32, 45], "k2", lambda i: SCOPES[i % 2])  # moved back; written again
        delete([33, 2, 4, 6, 8, 10, 12])  # new to this stretch: not in the first read
        agree()
        assert ours.engine.routes["overlay"] == 2  # extended once
    settled(ours)
    agree()
    ours.close()
    writer.close()


def test_a_search_whose_best_rows_mostly_changed_answers_exactly(tmp_path: Path) -> None:
    """A batch that rewrote most of the store, the best rows of every query among them:
    a search ahead of its mirror leaves out all their stale rows and answers exactly."""
    path = tmp_path / "m.db"
    writer = open_memory_store(str(path), embedding_dim=DIM, mirror_bytes=0)
    ref = ReferenceMemoryStore(DIM)
    rng = np.random.default_rng(4)
    anchor = rng.standard_normal(DIM)

    def write(ids: range, key: str, spread: float) -> None:
        batch = [chunk(f"c{i}", (anchor + spread * rng.standard_normal(DIM)).tolist()) for i in ids]
        writer.upsert_many(batch, idempotency_key=key, ctx=CTX)
        ref.upsert_many(batch, idempotency_key=key, ctx=CTX)

    write(range(60), "k0", 0.1)  # all near the anchor: each is among the best of a query
    ours = open_memory_store(str(path), embedding_dim=DIM)
    settled(ours)
    assert ours.engine.worker is not None
    with holding("follow", ours.engine.worker) as follow:
        ours.search(rng.standard_normal(DIM).tolist(), top_k=3)  # the worker looks again
        assert follow.reached.wait(30)
        write(range(50), "k1", 3.0)  # most rewritten, far from the anchor now
        writer.delete_many(["c55"])
        ref.delete_many(["c55"])
        for top_k in (5, 10, 20):
            query = (anchor + 0.05 * rng.standard_normal(DIM)).tolist()
            assert ours.search(query, top_k=top_k) == ref.search(query, top_k=top_k)
        assert ours.engine.routes["sql"] == 0
    ours.close()
    writer.close()


@pytest.mark.parametrize("copy_fits", [True, False], ids=["beside", "in-place"])
def test_a_regrouped_mirror_ahead_of_which_chunks_changed_leaves_out_their_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy_fits: bool
) -> None:
    """A regroup, beside the mirror or in place, carries each row's id hash with it: a
    search ahead of the regrouped mirror, whose filter admits few rows beside the changed
    chunks, still leaves out the stale rows of those chunks (each the best of its query)."""
    monkeypatch.setattr(memory_mirror, "REGROUP_MIN", 32)
    monkeypatch.setattr(inplace, "STEP_BYTES", 32 * 4 * DIM)
    path = tmp_path / "m.db"
    writer = open_memory_store(str(path), embedding_dim=DIM, mirror_bytes=0)
    ref = ReferenceMemoryStore(DIM)
    rng = np.random.default_rng(6)
    users = [f"u{i}" for i in range(12)]

    def write(ids: list[str], key: str) -> None:
        batch = random_chunks(rng, ids, users)
        writer.upsert_many(batch, idempotency_key=key, ctx=CTX)
        ref.upsert_many(batch, idempotency_key=key, ctx=CTX)

    write([f"c{i}" for i in range(400)], "k0")
    budget = None if copy_fits else memory_mirror.bytes_per_row(DIM) * 900
    ours = open_memory_store(str(path), embedding_dim=DIM, mirror_bytes=budget)
    settled(ours)
    ours.search(rng.standard_normal(DIM).tolist(), top_k=3)  # searched: a regroup may run
    write([f"c{i}" for i in range(400, 550)] + [f"c{i}" for i in range(0, 400, 10)], "k1")
    assert ours.engine.wait_until(lambda m: m.regroups >= 1, 30)
    settled(ours)
    assert ours.engine.worker is not None
    u3 = {"end_user": "u3"}
    held = ref.search(vec(1), top_k=100, scope_all=u3)
    with holding("follow", ours.engine.worker) as follow:
        ours.search(rng.standard_normal(DIM).tolist(), top_k=3)  # the worker looks again
        assert follow.reached.wait(30)
        # three of u3's chunks rewritten, with twenty others: the filter's rows are few
        # beside the changed chunks, so they are checked against them one by one
        rewritten = [h["chunk_id"] for h in held[:3]] + [f"c{i}" for i in range(1, 400, 20)]
        write(rewritten, "k2")
        for hit in held[:3]:
            query = hit["chunk"]["embedding"]  # its stale row would answer it with score 1
            expected = ref.search(query, top_k=5, scope_all=u3)
            assert ours.search(query, top_k=5, scope_all=u3) == expected
        assert ours.engine.routes["sql"] == 0
    ours.close()
    writer.close()


def test_a_row_whose_id_hash_matches_a_changed_ids_is_kept_unless_its_id_changed(
    tmp_path: Path,
) -> None:
    """Two ids may share a hash: a search leaves a row out only when its id itself is
    among the changed ones (a collision forged here in the mirror's hashes)."""
    store = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    rng = np.random.default_rng(7)
    store.upsert_many(
        random_chunks(rng, ["a", "b", "c", "d"], ["u1"]), idempotency_key="k", ctx=CTX
    )
    settled(store)
    mirror = store.mirror
    assert mirror is not None
    rows = mirror.admitted({"end_user": "u1"}, [])
    assert rows is not None
    row_of = {mirror.ids[r]: int(r) for r in rows}
    overlay = Overlay(frozenset({"b", "zz"}), [], ChangedRows())
    with mirror.lock:
        mirror.id_hashes[row_of["c"]] = hash("zz")  # "c" did not change: same hash as "zz"
        kept = overlay.kept(mirror, rows)
    assert sorted(mirror.ids[kept].tolist()) == ["a", "c", "d"]
    store.close()
