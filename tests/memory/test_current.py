"""The search that skips SQLite when the mirror is provably current (``search/hits.py``): it
runs without a read transaction only while no commit reached the file, whoever made it; its
hits equal the SQL-only store's, including records the mirror does not hold (long ones) and
embeddings sent in float64; and the pieces it relies on (per-row float64 norms, the sort
cut, the C-packed query check) agree exactly with what they replace."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ratatoskr.core.errors import InvalidArguments
from ratatoskr.memory import rules
from ratatoskr.memory.search import mirror as memory_mirror
from ratatoskr.memory.search.cosine import row_norms
from ratatoskr.memory.search.holds import holding
from ratatoskr.memory.search.ranking import SORT_MAX, _candidates_by_sort, candidates
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from tests.memory.helpers import CTX, DIM, chunk, random_chunks, settled, vec


def no_transaction() -> Any:
    """A ``db.read`` that fails the test if a search opens a read transaction."""

    @contextmanager
    def refuse() -> Iterator[Any]:
        raise AssertionError("the search opened a read transaction")
        yield  # pragma: no cover

    return refuse


def search(store: RatatoskrMemoryStore, top_k: int = 20, **kwargs: Any) -> list[dict[str, Any]]:
    return store.search(vec(1, 1, 0.5), top_k=top_k, **kwargs)


def answered_without_sql(store: RatatoskrMemoryStore, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether a search now answers without a read transaction (the mirror is current)."""
    with monkeypatch.context() as patch:
        patch.setattr(store.db, "read", no_transaction())
        try:
            search(store)
        except AssertionError:
            return False
    return True


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RatatoskrMemoryStore, RatatoskrMemoryStore]]:
    path = str(tmp_path / "m.db")
    store = open_memory_store(path, embedding_dim=DIM)
    sql_only = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    rng = np.random.default_rng(5)
    records = random_chunks(rng, [f"c{i:02d}" for i in range(40)], ["u0", "u1", "u2", "u3"])
    store.upsert_many(records, idempotency_key="fill", ctx=CTX)
    yield store, sql_only
    store.close()
    sql_only.close()


def test_no_transaction_only_while_nothing_was_committed(
    pair: tuple[RatatoskrMemoryStore, RatatoskrMemoryStore],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    store, sql_only = pair
    assert not answered_without_sql(store, monkeypatch)  # no mark yet
    settled(store)  # the worker loaded the mirror and applied the log
    search(store)  # notes the mark
    assert answered_without_sql(store, monkeypatch)
    assert search(store) == search(sql_only)

    # a write by this store, on this thread's own connection
    store.upsert_many([chunk("mine", vec(1, 1, 0.5))], idempotency_key="a", ctx=CTX)
    assert not answered_without_sql(store, monkeypatch)
    assert search(store)[0]["chunk_id"] == "mine"  # beside the mirror, or on it
    settled(store)
    assert search(store)[0]["chunk_id"] == "mine" and answered_without_sql(store, monkeypatch)

    # a write through another connection of this process
    sql_only.delete_many(["mine"])
    assert not answered_without_sql(store, monkeypatch)
    assert search(store) == search(sql_only)
    settled(store)
    assert search(store) == search(sql_only) and answered_without_sql(store, monkeypatch)

    # a hand delete on this thread's connection, outside the store's methods
    with store.db.write() as conn:
        conn.execute("DELETE FROM memory_chunks WHERE chunk_id = 'c01'")
        conn.execute("DELETE FROM memory_vec WHERE chunk_id = 'c01'")
    assert "c01" not in [h["chunk_id"] for h in search(store)]
    assert search(store) == search(sql_only)

    # a write by another process
    settled(store)
    search(store)
    assert answered_without_sql(store, monkeypatch)
    code = textwrap.dedent(
        f"""
        from ratatoskr.memory.store import open_memory_store
        from ratatoskr.core.context import CallContext
        s = open_memory_store({store.db.path!r}, embedding_dim={DIM}, mirror_bytes=0)
        s.upsert_many([{{"id": "there", "embedding": [1.0, 1.0, 0.5] + [0.0] * {DIM - 3}}}],
                      idempotency_key="k", ctx=CallContext(actor="other"))
        s.close()
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert search(store)[0]["chunk_id"] == "there"
    assert search(store) == search(sql_only)


def test_each_acknowledged_write_is_seen_by_the_next_search(
    pair: tuple[RatatoskrMemoryStore, RatatoskrMemoryStore],
) -> None:
    store, sql_only = pair
    for i in range(15):
        writer = store if i % 2 else sql_only
        query = np.random.default_rng(1000 + i).standard_normal(DIM).tolist()
        writer.upsert_many([chunk(f"w{i}", query)], idempotency_key=f"w{i}", ctx=CTX)
        assert store.search(query, top_k=1)[0]["chunk_id"] == f"w{i}"
        assert store.search(query, top_k=1)[0]["chunk_id"] == f"w{i}"  # the mark's path


def test_the_changes_beside_the_mirror_are_kept_with_the_mark(
    pair: tuple[RatatoskrMemoryStore, RatatoskrMemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the worker has not applied a write, the searches after the first one at that
    head answer without a read transaction too, the changes kept with the mark read for
    their own filter (the changed chunks inside it fetched, the file shown unchanged
    since), exactly as the SQL path does; the next commit ends that."""
    store, sql_only = pair
    settled(store)
    worker = store.engine.worker
    assert worker is not None

    def without_sql(**flt: Any) -> list[dict[str, Any]] | None:
        with monkeypatch.context() as patch:
            patch.setattr(store.db, "read", no_transaction())
            try:
                return search(store, **flt)
            except AssertionError:
                return None

    u2: dict[str, Any] = {"scope_all": {"end_user": "u2"}}
    with holding("follow", worker) as follow:
        search(store)  # the worker looks at the log again, and is held there
        assert follow.reached.wait(30)
        moved = chunk("c01", vec(1, 1, 0.5), scope={"end_user": "u9"})
        sql_only.upsert_many([chunk("new", vec(1, 1, 0.4)), moved], idempotency_key="b", ctx=CTX)
        sql_only.delete_many(["c02"])  # of u2
        assert search(store, **u2) == search(sql_only, **u2)  # reads the changes
        assert without_sql(**u2) == search(sql_only, **u2)  # and keeps them with the mark
        assert without_sql() == search(sql_only)  # "new" and "c01" are inside: read too
        assert search(store) == search(sql_only)
        sql_only.upsert_many([chunk("later", vec(1, 1, 0.3))], idempotency_key="c", ctx=CTX)
        assert without_sql(**u2) is None  # a commit since: not proven
        assert search(store, **u2) == search(sql_only, **u2)
    settled(store)
    assert search(store) == search(sql_only)


def test_the_mark_outlives_the_worker_bringing_the_mirror_to_its_head(
    pair: tuple[RatatoskrMemoryStore, RatatoskrMemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker applying the changes a search found past the mirror does not end that
    search's mark: the file is still at the head the mark noted, and now the mirror is too,
    so the next search skips the read transaction and answers as the SQL path does."""
    store, sql_only = pair
    settled(store)
    worker, mirror = store.engine.worker, store.mirror
    assert worker is not None and mirror is not None
    with holding("follow", worker) as follow:
        search(store)
        assert follow.reached.wait(30)
        sql_only.upsert_many([chunk("new", vec(1, 1, 0.4))], idempotency_key="b", ctx=CTX)
        sql_only.delete_many(["c03"])
        assert search(store) == search(sql_only)  # beside the mirror, noted with the mark
        seq = mirror.seq
    settled(store)  # the worker applies them: the mirror is at the mark's head
    assert mirror.seq > seq
    assert answered_without_sql(store, monkeypatch)
    assert search(store) == search(sql_only)
    assert search(store, scope_all={"end_user": "u1"}) == search(
        sql_only, scope_all={"end_user": "u1"}
    )


def test_no_mark_is_used_while_the_mirror_may_hold_changes_past_its_head(
    pair: tuple[RatatoskrMemoryStore, RatatoskrMemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that lands after a search checked its mark, and that the worker has read
    and published in part before the search took the lock, must not be ranked as the
    file at the mark's head: the search takes the read transaction instead."""
    store, sql_only = pair
    settled(store)
    worker, mirror = store.engine.worker, store.mirror
    assert worker is not None and mirror is not None
    u9_scope = {"end_user": "u9"}  # only the batch below is there
    u9: dict[str, Any] = {"scope_all": u9_scope}

    def u9_without_sql() -> bool:
        with monkeypatch.context() as patch:
            patch.setattr(store.db, "read", no_transaction())
            try:
                search(store, **u9)
            except AssertionError:
                return False
        return True

    search(store, **u9)
    noted = store.engine._mark.check(store.db.connection())
    assert noted is not None and noted[1] == mirror.seq and u9_without_sql()
    rng = np.random.default_rng(9)
    batch = [  # float32 vectors and short records: the mirror holds all a hit needs
        chunk(f"b{i:03d}", rng.standard_normal(DIM).astype(np.float32).tolist(), scope=u9_scope)
        for i in range(600)
    ]
    with holding("follow-staged", worker, skip=1) as staged:  # the first part is published
        sql_only.upsert_many(batch, idempotency_key="big", ctx=CTX)
        worker.poke()
        assert staged.reached.wait(30)
        assert mirror.published > mirror.seq == noted[1]
        with monkeypatch.context() as patch:  # as if the commit had come after the check
            patch.setattr(store.engine._mark, "check", lambda conn: noted)
            assert not u9_without_sql()
        assert search(store, top_k=50, **u9) == search(sql_only, top_k=50, **u9)
    settled(store)
    assert search(store, top_k=50, **u9) == search(sql_only, top_k=50, **u9)


def test_records_not_held_and_float64_embeddings_come_back_verbatim(
    pair: tuple[RatatoskrMemoryStore, RatatoskrMemoryStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, sql_only = pair
    long_text = "x" * (memory_mirror.RECORD_INLINE + 10)
    wide = [0.1, 1.0 / 3.0, 0.5] + [0.0] * (DIM - 3)  # not float32-exact: stored in float64
    store.upsert_many(
        [
            chunk("long", vec(1, 1, 0.5), note=long_text),
            chunk("wide", wide),
            chunk("long-wide", [1.0, 1.0 / 7.0, 0.5] + [0.0] * (DIM - 3), note=long_text),
        ],
        idempotency_key="odd",
        ctx=CTX,
    )
    for include in (None, {"embedding": False}):
        beside = search(store, 50, include=include)  # after a write: the overlay, maybe
        settled(store)
        slow = search(store, 50, include=include)  # the full path
        fast = search(store, 50, include=include)
        expected = search(sql_only, 50, include=include)
        assert beside == slow == expected and fast == expected and len(expected) == 43
    by_id = {h["chunk_id"]: h["chunk"] for h in search(store, 50)}
    assert by_id["wide"]["embedding"] == wide and by_id["long"]["note"] == long_text
    assert store.mirror is not None and answered_without_sql(store, monkeypatch)
    row = store.mirror.rows["long"]
    assert store.mirror.records[row] is None and store.mirror.wide[store.mirror.rows["wide"]]


def test_quick_uses_the_mark_too(
    pair: tuple[RatatoskrMemoryStore, RatatoskrMemoryStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, _ = pair
    call = rules.parse_search(vec(1, 1), 5, {"end_user": "u1"}, None, None, None, None, DIM)
    settled(store)
    full = store.search_parsed(call)
    with monkeypatch.context() as patch:
        patch.setattr(store.db, "read", no_transaction())
        assert store.search_quick(call) == full


def test_the_mirror_norms_are_the_rescoring_norms_bit_for_bit(
    pair: tuple[RatatoskrMemoryStore, RatatoskrMemoryStore],
) -> None:
    store, _ = pair
    settled(store)
    store.upsert_many([chunk("late", vec(3, -2, 7))], idempotency_key="late", ctx=CTX)
    settled(store)  # applied after the load: a row of the tail
    mirror = store.mirror
    assert mirror is not None
    live = np.flatnonzero(mirror.alive[: mirror.n])
    expected = row_norms(mirror.matrix[live])
    assert mirror.norms[live].tobytes() == expected.tobytes()
    for r in live.tolist():  # and a row alone gets the same bits as in a batch
        assert mirror.norms[r : r + 1].tobytes() == row_norms(mirror.matrix[r : r + 1]).tobytes()


def test_the_sort_cut_keeps_the_partition_cut() -> None:
    rng = np.random.default_rng(9)
    for t in range(3000):
        n = int(rng.integers(19, SORT_MAX + 1))
        k = int(rng.integers(1, 11))
        scores = rng.standard_normal(n).astype(np.float32)
        if t % 3 == 1:
            scores = np.round(scores, 2) * np.float32(1e-3)  # crowded, with ties
        if t % 3 == 2:
            scores[rng.random(n) < 0.7] = -np.inf  # dead rows
        by_sort = _candidates_by_sort(scores, k, k + 8)
        # the general path, forced by padding past SORT_MAX with dead rows
        padded = np.concatenate((scores, np.full(SORT_MAX, -np.inf, dtype=np.float32)))
        general = candidates(padded, k)
        assert sorted(scores[by_sort].tolist()) == sorted(padded[general].tolist())


@pytest.mark.parametrize(
    "vector",
    [
        [0.25] * DIM,
        [1] + [0.0] * (DIM - 1),
        [True] + [0.0] * (DIM - 1),
        [np.float64(0.5)] * DIM,
        [float("nan")] + [1.0] * (DIM - 1),
        [1e39] + [1.0] * (DIM - 1),
        [0.0] * DIM,
        [0.5] * (DIM - 1),
        "not a list",
        (0.5,) * DIM,
        [2**70] + [0.0] * (DIM - 1),
    ],
)
def test_the_query_check_answers_as_check_vector(vector: Any) -> None:
    try:
        expected: Any = rules.check_vector(vector, DIM, "vector")[0].tobytes()
    except InvalidArguments as exc:
        expected = str(exc)
    try:
        got: Any = rules.check_query(vector, DIM).tobytes()
    except InvalidArguments as exc:
        got = str(exc)
    assert got == expected


@pytest.mark.parametrize("scale", [1e-31, 1e-44, 1e-50, 1e-300])
def test_a_query_too_small_for_float32_is_checked_at_unit_scale(scale: float) -> None:
    """Where float32 would lose the direction (or round it to zero), the query is divided
    by its largest value in float64 first: the same float32 vector as the direction sent
    at unit scale."""
    direction = [1.0, -0.5, 0.25, 0.125] + [0.0] * (DIM - 4)
    tiny = [scale * x for x in direction]
    unit = rules.check_vector(direction, DIM, "vector")[0]
    assert rules.check_query(tiny, DIM).tobytes() == unit.tobytes()
