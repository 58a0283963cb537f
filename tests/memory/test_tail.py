"""No search waits for the mirror: while its worker loads it, regroups it (beside it, or in
place when a copy does not fit the budget), or fails to, every search answers exactly what
the reference store answers, and the plane says it is degraded only while it loads.

The worker runs in its own thread throughout; a test holds it at a named point
(``worker.holding``) to search and write while it is there, then lets it go on while the
test keeps searching and writing, so both interleave for real."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ratatoskr.memory.reference import ReferenceMemoryStore
from ratatoskr.memory.search import inplace
from ratatoskr.memory.search import mirror as memory_mirror
from ratatoskr.memory.search import worker as worker_module
from ratatoskr.memory.search.engine import LOADING_REASON
from ratatoskr.memory.search.holds import Hold, holding
from ratatoskr.memory.search.in_flight import InFlight
from ratatoskr.memory.search.worker import MirrorWorker
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from tests.memory.helpers import CTX, DIM, chunk, loaded, settled

FILTERS: list[dict[str, Any]] = [
    {},
    {"scope_all": {"tenant": "t1"}},
    {"scope_all": {"end_user": "u3"}},
    {"scope_all": {"agent_self": "a2"}},
    {"scope_any": [{"end_user": "u1"}, {"agent_self": "a4"}]},
    {"scope_all": {"tenant": "t0"}, "scope_any": [{"end_user": "u6"}, {"end_user": "u9"}]},
]


class Pair:
    """Our store and the reference, written alike; ``agree`` compares their searches."""

    def __init__(self, ours: RatatoskrMemoryStore, rng: np.random.Generator) -> None:
        self.ours = ours
        self.ref = ReferenceMemoryStore(DIM)
        self.rng = rng
        self.next_id = 0
        self.writes = 0

    def record(self, cid: str) -> dict[str, Any]:
        rng = self.rng
        user = int(rng.integers(0, 12))
        scope = {"tenant": f"t{user % 3}", "end_user": f"u{user}"}
        if rng.random() < 0.8:
            scope["agent_self"] = f"a{int(rng.integers(0, 6))}"
        if rng.random() < 0.3:  # a small grid: exact ties, broken by id
            vector = rng.integers(-1, 2, size=DIM).astype(float)
            vector[0] = 1.0
        else:
            vector = rng.standard_normal(DIM)
        return chunk(cid, vector.tolist(), scope=scope)

    def write(self, new: int, rewrite: int = 0, delete: int = 0, via: Any = None) -> None:
        """``new`` chunks, ``rewrite`` existing ones (new vector, often a new scope) and
        ``delete`` deleted, through ``via`` (another store on the file) or ours."""
        known = self.next_id
        batch = [self.record(f"c{self.next_id + i:05d}") for i in range(new)]
        self.next_id += new
        if known and rewrite:
            picked = self.rng.choice(known, size=min(rewrite, known), replace=False)
            batch += [self.record(f"c{int(i):05d}") for i in picked]
        key = f"w{self.writes}"
        self.writes += 1
        writer = via or self.ours
        if batch:
            writer.upsert_many(batch, idempotency_key=key, ctx=CTX)
            self.ref.upsert_many(batch, idempotency_key=key, ctx=CTX)
        if known and delete:
            doomed = [f"c{int(i):05d}" for i in self.rng.choice(known, size=delete)]
            writer.delete_many(doomed)
            self.ref.delete_many(doomed)

    def agree(self) -> None:
        query = self.rng.standard_normal(DIM).tolist()
        for flt in FILTERS:
            for top_k in (1, 7):
                ours = exactly(self.ours.search(query, top_k=top_k, **flt))
                assert ours == exactly(self.ref.search(query, top_k=top_k, **flt)), flt


def exactly(hits: list[dict[str, Any]]) -> list[Any]:
    """Hits with each score as its bits."""
    return [{**h, "score": np.float64(h["score"]).tobytes()} for h in hits]


def not_sql(store: RatatoskrMemoryStore) -> int:
    routes = store.engine.routes
    return routes["current"] + routes["mirror"] + routes["overlay"] + routes["overlay-shared"]


def test_searches_during_the_first_load_answer_as_the_reference(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    writer = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    pair = Pair(writer, np.random.default_rng(1))
    pair.write(600)
    with holding("load-sorted") as sorted_, holding("load-scanned") as scanned:
        pair.ours = open_memory_store(path, embedding_dim=DIM)
        assert sorted_.reached.wait(30)
        # between the load's passes: rows deleted, moved, rewritten and added under it
        pair.write(40, rewrite=60, delete=30, via=writer)
        pair.agree()
        sorted_.release()
        assert scanned.reached.wait(30)
        health = pair.ours.health()
        assert health["status"] == "degraded" and health["reason"].startswith(LOADING_REASON)
        pair.write(30, rewrite=30, delete=10, via=writer)  # for the load to catch up with
        pair.agree()
        assert not pair.ours.mirror.ready and not_sql(pair.ours) == 0  # type: ignore[union-attr]
        assert pair.ours.engine.routes["sql"] > 0
    for _ in range(20):  # the worker catches up and swaps the mirror in meanwhile
        pair.write(5, rewrite=5, delete=2, via=writer)
        pair.agree()
    settled(pair.ours)
    pair.agree()
    assert not_sql(pair.ours) > 0 and pair.ours.health()["status"] == "ok"
    pair.ours.close()
    writer.close()


def test_searches_while_the_worker_applies_a_batch_answer_as_the_reference(
    tmp_path: Path,
) -> None:
    """The worker reads a batch and writes its new rows past the mirror's last one before
    publishing them: a search meanwhile takes the changes from the worker's read, and,
    once the log moves past it, reads them itself; both answer as the reference does."""
    pair = filled(tmp_path, 8)
    ours = pair.ours
    with staged_batch(pair):
        assert ours.mirror is not None
        n = ours.mirror.n
        pair.agree()  # at the head the worker read: its read is shared, no statement
        assert ours.engine.routes["overlay-shared"] > 0 and ours.mirror.n == n
        read_before = ours.engine.routes["overlay"]
        pair.write(10, rewrite=10, delete=5)  # the log moves past the worker's read
        pair.agree()
        assert ours.engine.routes["overlay"] == read_before + 1  # read once, then shared
    settled(ours)
    pair.agree()
    assert ours.engine.routes["sql"] == 0
    ours.close()


def test_the_changed_rows_one_search_found_serve_the_next_until_the_rows_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mirror's rows of the changed chunks are looked up once per view and shared;
    once the worker publishes a part of the batch, the next search looks them up again,
    and every search answers as the reference does."""
    monkeypatch.setattr(worker_module, "STEP_ROWS", 8)  # a batch published in parts
    pair = filled(tmp_path, 9)
    ours = pair.ours
    with staged_batch(pair) as (worker, first):
        assert ours.mirror is not None
        pair.agree()  # the whole-mirror search finds the rows; the rest take them
        view = worker.ahead
        assert view is not None and view.found.rows is not None
        assert view.found.generation == ours.mirror.generation
        held = ours.mirror.rows.rows_of(view.changed)
        assert len(view.found.rows) == sum(row >= 0 for row in held)
        with holding("follow-staged", worker) as second:
            first.release()
            assert second.reached.wait(30)  # a part published: the rows changed
            assert worker.ahead is view and view.found.generation != ours.mirror.generation
            pair.agree()
            assert view.found.generation == ours.mirror.generation
    settled(ours)
    pair.agree()
    assert ours.engine.routes["sql"] == 0
    ours.close()


@contextmanager
def staged_batch(pair: Pair) -> Iterator[tuple[MirrorWorker, Hold]]:
    """Our worker held at ``follow-staged``: a batch of 30 new, 20 rewritten and 10 deleted
    chunks read and written past the mirror's rows, not yet published."""
    worker = pair.ours.engine.worker
    assert worker is not None
    with holding("follow-staged", worker) as staged:
        pair.write(30, rewrite=20, delete=10)
        assert staged.reached.wait(30)
        yield worker, staged


def filled(tmp_path: Path, seed: int, mirror_bytes: int | None = None) -> Pair:
    """A pair with 400 chunks, ours opened on them (so its load groups them) and current."""
    path = str(tmp_path / "m.db")
    writer = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    pair = Pair(writer, np.random.default_rng(seed))
    pair.write(400)
    writer.close()
    pair.ours = open_memory_store(path, embedding_dim=DIM, mirror_bytes=mirror_bytes)
    settled(pair.ours)
    assert pair.ours.mirror is not None and pair.ours.mirror.sorted_n == 400
    pair.agree()  # on the mirror: a regroup is due only for a mirror being searched
    return pair


@pytest.fixture
def small_regroups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regroups due after a few dozen rows of tail, and in-place steps of 32 rows."""
    monkeypatch.setattr(memory_mirror, "REGROUP_MIN", 32)
    monkeypatch.setattr(inplace, "STEP_BYTES", 32 * 4 * DIM)


@pytest.mark.usefixtures("small_regroups")
def test_searches_during_a_regroup_answer_as_the_reference(tmp_path: Path) -> None:
    pair = filled(tmp_path, 2)
    ours = pair.ours
    sql_before = ours.engine.routes["sql"]
    with holding("regroup-built", ours.engine.worker) as built:
        pair.write(150, rewrite=40)  # the tail outgrows its share: the worker regroups
        assert built.reached.wait(30)
        for _ in range(5):  # the copy is built; the live mirror serves, changes beside it
            pair.write(10, rewrite=10, delete=5)
            pair.agree()
        assert ours.mirror is not None and ours.mirror.ready and ours.mirror.regroups == 0
    for _ in range(20):  # it catches the copy up and swaps it in meanwhile
        pair.write(5, rewrite=5, delete=2)
        pair.agree()
    assert ours.engine.wait_until(lambda m: m.regroups >= 1, 30)
    settled(ours)
    pair.agree()
    assert ours.engine.routes["sql"] == sql_before  # no search waited, none went to SQL
    ours.close()


@pytest.mark.usefixtures("small_regroups")
def test_searches_during_an_in_place_regroup_answer_as_the_reference(tmp_path: Path) -> None:
    # room for the live mirror as it grows here, not for a copy of it beside
    per_row = memory_mirror.bytes_per_row(DIM)
    pair = filled(tmp_path, 3, mirror_bytes=per_row * 900)
    ours = pair.ours
    sql_before = ours.engine.routes["sql"]
    with holding("inplace-step", ours.engine.worker, skip=4) as step:
        pair.write(150, rewrite=40)
        assert step.reached.wait(30)
        assert ours.mirror is not None and ours.mirror.sorted_n == 0  # rows on the move
        for _ in range(5):
            pair.write(10, rewrite=10, delete=5)
            pair.agree()
    for _ in range(20):  # the remaining steps run between these searches
        pair.write(5, rewrite=5, delete=2)
        pair.agree()
    assert ours.engine.wait_until(lambda m: m.regroups >= 1, 30)
    settled(ours)
    pair.agree()
    mirror = ours.mirror
    # grouped again (a regroup the last writes made due may be under way: it ends too)
    assert ours.engine.wait_until(lambda m: m.sorted_n > 0, 30)
    assert mirror.ready and not mirror.over_budget
    assert ours.engine.routes["sql"] == sql_before
    assert ours.engine.worker is not None and ours.engine.worker.max_pause > 0
    ours.close()


@pytest.mark.usefixtures("small_regroups")
def test_a_regroup_that_fails_leaves_the_live_mirror_serving(tmp_path: Path) -> None:
    pair = filled(tmp_path, 4)
    ours = pair.ours
    path = tmp_path / "m.db"
    aside = tmp_path / "m.db.aside"
    worker = ours.engine.worker
    assert worker is not None and ours.mirror is not None
    with holding("regroup-built", worker) as built:
        pair.write(150, rewrite=40)
        assert built.reached.wait(30)
        pair.agree()
        os.rename(path, aside)  # the file replaced under the store, mid-regroup
        path.write_bytes(b"not the database " * 512)
        assert ours.health()["status"] == "down"
        built.release()
        assert ours.engine.wait_until(lambda m: worker.failures > 0, 30)
    assert ours.mirror.ready and ours.mirror.regroups == 0  # the live mirror, kept
    os.replace(aside, path)
    sql_before = ours.engine.routes["sql"]
    served = not_sql(ours)
    pair.agree()  # served by the live mirror (its tail and the changes beside it)
    assert ours.engine.routes["sql"] == sql_before and not_sql(ours) > served
    assert ours.engine.wait_until(lambda m: m.regroups >= 1, 30)  # tried again, and done
    settled(ours)
    pair.agree()
    assert ours.health()["status"] == "ok"
    ours.close()


def test_a_store_closes_mid_load(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    writer = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    Pair(writer, np.random.default_rng(5)).write(300)
    writer.close()
    with holding("load-sorted") as hold:
        store = open_memory_store(path, embedding_dim=DIM)
        assert hold.reached.wait(30)
        store.close()  # the worker, held in the load, ends
    worker = store.engine.worker
    assert worker is not None and not worker._thread.is_alive()
    again = open_memory_store(path, embedding_dim=DIM)
    loaded(again)
    assert again.health()["status"] == "ok"
    again.close()


def test_a_store_nobody_searches_does_not_follow_and_its_next_search_is_exact(
    tmp_path: Path,
) -> None:
    pair = filled(tmp_path, seed=7)
    mirror = pair.ours.mirror
    assert mirror is not None
    worker = pair.ours.engine.worker
    assert worker is not None
    worker._asked_at = float("-inf")  # as if the last search were long ago
    seq = mirror.seq
    for _ in range(5):  # a write-only spell: the worker polls and leaves the log be
        pair.write(20, rewrite=10, delete=3)
    assert not worker.wait_until(lambda m: m.seq > seq, 0.3)
    pair.agree()  # the first search answers beside the mirror, exactly, and is noted
    assert pair.ours.engine.routes["overlay"] > 0
    with pair.ours.db.read() as conn:
        head = int(conn.execute("SELECT max(seq) FROM memory_changes").fetchall()[0][0])
    assert worker.wait_until(lambda m: m.seq >= head, 30)
    pair.agree()
    pair.ours.close()


def test_the_worker_reports_the_cpu_its_thread_has_used(tmp_path: Path) -> None:
    pair = filled(tmp_path, seed=11)
    worker = pair.ours.engine.worker
    mirror = pair.ours.mirror
    assert worker is not None and mirror is not None
    loaded_cpu = worker.cpu_seconds()
    assert loaded_cpu is not None and loaded_cpu > 0  # the load ran on its thread
    seq = mirror.seq
    pair.write(200, rewrite=50, delete=20)
    pair.agree()  # a search: the worker follows the writes
    assert worker.wait_until(lambda m: m.seq > seq, 30)
    followed_cpu = worker.cpu_seconds()
    assert followed_cpu is not None and followed_cpu > loaded_cpu
    phases = worker.cpu_by_phase()
    assert phases["load"] > 0 and phases["follow: read"] > 0 and phases["follow: place"] > 0
    assert sum(phases.values()) <= followed_cpu  # a part of the thread's time, by phase
    pair.ours.close()
    assert worker.cpu_seconds() is None


@pytest.mark.usefixtures("small_regroups")
def test_the_worker_reports_a_regroups_cpu_apart_from_the_follows(tmp_path: Path) -> None:
    pair = filled(tmp_path, seed=19)
    worker, mirror = pair.ours.engine.worker, pair.ours.mirror
    assert worker is not None and mirror is not None
    assert "regroup: build" not in worker.cpu_by_phase()  # loaded, nothing to regroup
    regroups = mirror.regroups
    pair.write(80, rewrite=10, delete=10)  # a tail past an eighth of the 400 rows
    pair.agree()  # a mirror being searched regroups when its tail passes its share
    assert worker.wait_until(lambda m: m.regroups > regroups, 30)
    phases = worker.cpu_by_phase()
    assert phases["regroup: build"] > 0 and phases["regroup: catch up"] > 0
    assert phases["follow: read"] > 0
    pair.ours.close()


def _head(store: RatatoskrMemoryStore) -> int:
    with store.db.read() as conn:
        return int(conn.execute("SELECT max(seq) FROM memory_changes").fetchall()[0][0])


def _written_under_a_search(
    pair: Pair, batches: int = 1, new: int = 40, began_ago: float = 0.0
) -> tuple[MirrorWorker, InFlight, int]:
    """A search under way in ``pair.ours`` (as long as the test says; begun ``began_ago``
    seconds ago), then ``batches`` writes of ``new`` chunks and a few rewrites and
    deletes: the worker, the count and the log's head, the worker woken."""
    in_flight, worker = pair.ours.engine.in_flight, pair.ours.engine.worker
    assert worker is not None
    in_flight.begin()
    in_flight.since -= began_ago
    for _ in range(batches):
        pair.write(new, rewrite=10, delete=5)
    head = _head(pair.ours)
    worker.poke()
    return worker, in_flight, head


def test_the_worker_follows_the_writes_only_once_the_searches_under_way_return(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "QUIET_WAIT_SECONDS", 3600.0)  # no bound: it waits
    pair = filled(tmp_path, seed=13)
    worker, in_flight, head = _written_under_a_search(pair)
    assert not worker.wait_until(lambda m: m.seq >= head, 0.5)
    pair.agree()  # the searches meanwhile answer beside the mirror, exactly
    in_flight.end()
    assert in_flight.idle
    assert worker.wait_until(lambda m: m.seq >= head, 30)
    pair.agree()
    pair.ours.close()


def test_searches_that_never_stop_do_not_stop_the_worker_following(tmp_path: Path) -> None:
    pair = filled(tmp_path, seed=17)
    # always a search under way, and more rows than one step takes: each step waits its
    # bound, then runs
    worker, in_flight, head = _written_under_a_search(pair, batches=3, new=300)
    assert worker.wait_until(lambda m: m.seq >= head, 30)
    pair.agree()
    in_flight.end()
    pair.ours.close()


def test_a_search_under_way_for_longer_than_the_wait_does_not_hold_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "QUIET_WAIT_SECONDS", 5.0)  # three steps: 15 s
    pair = filled(tmp_path, seed=23)
    worker, in_flight, head = _written_under_a_search(pair, began_ago=60.0)
    assert worker.wait_until(lambda m: m.seq >= head, 3.0)
    in_flight.end()
    pair.agree()
    pair.ours.close()
