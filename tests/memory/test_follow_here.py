"""A long search follows the change log on its own thread once its hits are computed, so
the worker's follow does not run beside the next short search: the mirror is at the log's
head when that search comes, every answer stays the reference's, a short search never
follows, and a search finding the worker changing the mirror leaves it to the worker."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from ratatoskr.memory import rules
from ratatoskr.memory import store as memory_store
from ratatoskr.memory.search import build, inplace
from ratatoskr.memory.search import engine as engine_module
from ratatoskr.memory.search import mirror as memory_mirror
from ratatoskr.memory.search import worker as worker_module
from ratatoskr.memory.search.holds import holding
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from tests.memory.helpers import DIM, settled
from tests.memory.test_tail import FILTERS, Pair, exactly, filled


def _head(store: RatatoskrMemoryStore) -> int:
    with store.db.read() as conn:
        return int(conn.execute("SELECT max(seq) FROM memory_changes").fetchall()[0][0])


def _seq(store: RatatoskrMemoryStore) -> int:
    assert store.mirror is not None
    return store.mirror.seq


@pytest.fixture
def quiet_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker follows only when poked (its poll an hour), and a search of every chunk
    is long (400 chunks), one user's is not."""
    monkeypatch.setattr(worker_module, "POLL_SECONDS", 3600.0)
    monkeypatch.setattr(engine_module, "FOLLOW_HERE_FLOATS", 200 * DIM)


def _behind(pair: Pair) -> int:
    """Writes the worker, asleep, does not follow: the log's head, past the mirror."""
    pair.write(60, rewrite=20, delete=10)
    head = _head(pair.ours)
    assert _seq(pair.ours) < head
    return head


def _follows_between_steps(pair: Pair, skip: int) -> None:
    """With the worker held between two steps of a regroup (after ``skip``), long searches
    follow the writes made meanwhile, each answering as the reference."""
    ours, worker = pair.ours, pair.ours.engine.worker
    assert worker is not None and ours.mirror is not None
    with holding("regroup-pause", worker, skip=skip) as paused:
        pair.write(150, rewrite=40)  # the tail outgrows its share
        worker.poke()
        assert paused.reached.wait(30)
        for _ in range(3):
            head = _behind(pair)
            ours.search(pair.rng.standard_normal(DIM).tolist(), top_k=3)  # long: follows
            assert _seq(ours) == head
            pair.agree()
        assert ours.mirror.regroups == 0


@pytest.mark.usefixtures("quiet_worker")
def test_a_long_search_leaves_the_mirror_at_the_head_and_a_short_one_does_not(
    tmp_path: Path,
) -> None:
    pair = filled(tmp_path, seed=31)
    ours, rng = pair.ours, pair.rng
    assert ours.engine.worker is not None
    for _ in range(3):
        head = _behind(pair)
        before = _seq(ours)
        ours.search(rng.standard_normal(DIM).tolist(), top_k=3, scope_all={"end_user": "u3"})
        assert _seq(ours) == before  # short: answered beside the mirror, nothing followed
        ours.search(rng.standard_normal(DIM).tolist(), top_k=3)  # every chunk: long
        assert _seq(ours) == head  # followed on this thread before the call returned
        pair.agree()
    assert ours.engine.worker.here_by_phase().get("follow: place", 0.0) > 0.0
    ours.close()


@pytest.mark.usefixtures("quiet_worker")
def test_a_long_search_leaves_the_log_to_a_worker_changing_the_mirror(tmp_path: Path) -> None:
    pair = filled(tmp_path, seed=37)
    ours = pair.ours
    worker = ours.engine.worker
    assert worker is not None
    head = _behind(pair)
    with holding("follow-staged", worker) as staged:
        worker.poke()
        assert staged.reached.wait(30)  # mid-batch: part of it placed, not yet published
        before, here = _seq(ours), worker.here_by_phase()
        pair.agree()  # long searches among them: each answers, none follows
        assert _seq(ours) == before
        assert worker.here_by_phase() == here
    settled(ours)
    assert _seq(ours) >= head
    pair.agree()
    ours.close()


@pytest.mark.usefixtures("quiet_worker")
@pytest.mark.parametrize("in_place", [False, True], ids=["beside", "in-place"])
def test_a_long_search_follows_the_log_between_two_steps_of_a_regroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place: bool
) -> None:
    monkeypatch.setattr(memory_mirror, "REGROUP_MIN", 32)
    monkeypatch.setattr(inplace, "STEP_BYTES", 32 * 4 * DIM)
    # in place: room for the live mirror as it grows here, not for a copy beside it
    budget = memory_mirror.bytes_per_row(DIM) * 900 if in_place else None
    pair = filled(tmp_path, seed=53, mirror_bytes=budget)
    ours, worker = pair.ours, pair.ours.engine.worker
    assert worker is not None
    _follows_between_steps(pair, skip=2)
    worker.poke()
    assert ours.engine.wait_until(lambda m: m.regroups >= 1, 30)
    settled(ours)
    pair.agree()
    ours.close()


@pytest.mark.usefixtures("quiet_worker")
def test_a_quick_search_never_follows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "FOLLOW_HERE_FLOATS", 1)  # any search is long
    pair = filled(tmp_path, seed=47)
    ours = pair.ours
    pair.write(6)  # few entries: within what a quick search reads beside the mirror
    head, before = _head(ours), _seq(ours)
    assert before < head
    vector = pair.rng.standard_normal(DIM).tolist()
    search = rules.parse_search(vector, 5, {"end_user": "u3"}, None, None, None, None, DIM)
    quick = ours.search_quick(search)
    assert quick is not None
    assert _seq(ours) == before  # on the event loop: nothing followed
    assert ours.search_parsed(search) == quick  # the same search in a thread follows
    assert _seq(ours) == head
    ours.close()


def test_after_a_search_followed_the_worker_still_follows_when_poked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "DEFER_SECONDS", 3600.0)  # left to searches for good
    monkeypatch.setattr(engine_module, "FOLLOW_HERE_FLOATS", 200 * DIM)
    pair = filled(tmp_path, seed=41)
    ours, rng = pair.ours, pair.rng
    pair.write(30, rewrite=10, delete=5)
    ours.search(rng.standard_normal(DIM).tolist(), top_k=3)  # long: follows, or the worker did
    pair.write(30, rewrite=10, delete=5)
    settled(ours)  # pokes the worker, as a search far behind does: it follows at once
    pair.agree()
    ours.close()


def test_searching_threads_follow_beside_the_worker_and_a_writer_and_answer_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads run long searches (each follows the log when it can) while a third
    writes through another store on the file and the worker follows too; at each pause
    of the writer both threads' searches answer as the reference."""
    monkeypatch.setattr(engine_module, "FOLLOW_HERE_FLOATS", 200 * DIM)
    pair = filled(tmp_path, seed=43)
    ours = pair.ours
    writer = open_memory_store(ours.db.path, embedding_dim=DIM, mirror_bytes=0)
    rounds = 12
    written = [0]  # the rounds the writer has written
    checked = threading.Barrier(3)  # both threads have compared their searches
    failures: list[BaseException] = []

    def search(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for round_ in range(1, rounds + 1):
                while written[0] < round_:  # long searches while the round is written
                    ours.search(rng.standard_normal(DIM).tolist(), top_k=5)
                for flt in FILTERS:
                    query = rng.standard_normal(DIM).tolist()
                    hits = exactly(ours.search(query, top_k=7, **flt))
                    assert hits == exactly(pair.ref.search(query, top_k=7, **flt)), flt
                checked.wait(timeout=60)
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)
            checked.abort()

    threads = [threading.Thread(target=search, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    try:
        for round_ in range(1, rounds + 1):
            pair.write(25, rewrite=15, delete=8, via=writer)
            written[0] = round_
            checked.wait(timeout=60)
    finally:
        for thread in threads:
            thread.join(60)
        writer.close()
    assert not failures, failures
    assert ours.engine.worker is not None
    assert ours.engine.worker.here_by_phase().get("follow: place", 0.0) > 0.0
    ours.close()


@pytest.mark.usefixtures("quiet_worker")
def test_a_follow_that_fails_leaves_it_to_the_worker_and_answers_stay_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = filled(tmp_path, seed=61)
    ours = pair.ours
    worker = ours.engine.worker
    assert worker is not None and ours.mirror is not None
    monkeypatch.setattr(memory_store, "CHANGES_KEPT", 5)  # the log pruned past the mirror
    _behind(pair)
    assert not worker.follow_here()  # it cannot say what changed: the worker reloads
    pair.agree()  # meanwhile in SQL, exactly
    reloads = ours.mirror.reloads
    worker.poke()  # as a search finding the log far ahead does: the worker drops it
    assert ours.engine.wait_until(lambda m: not m.ready, 30)
    worker.poke()  # and loads it again (at its next look; its poll is an hour here)
    assert ours.engine.wait_until(lambda m: m.ready and m.reloads > reloads, 30)
    settled(ours)
    pair.agree()
    ours.close()


@pytest.mark.usefixtures("quiet_worker")
@pytest.mark.parametrize("steps", [0, 3, 8, 17])
def test_a_long_search_follows_the_log_while_a_regroup_builds_its_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: int
) -> None:
    """The copy is built while the live mirror is not the worker's: a long search's thread
    follows the log into it mid-build (rewriting and deleting rows the build is copying),
    and the copy swapped in afterwards holds every change, as the reference does."""
    monkeypatch.setattr(memory_mirror, "REGROUP_MIN", 32)
    monkeypatch.setattr(build, "BLOCK_BYTES", 64 * 4 * DIM)  # many steps, each a few rows
    monkeypatch.setattr(build, "LIST_BLOCK", 64)
    monkeypatch.setattr(build, "INDEX_BLOCK", 64)
    pair = filled(tmp_path, seed=59 + steps)
    ours, rng = pair.ours, pair.rng
    worker = ours.engine.worker
    assert worker is not None and ours.mirror is not None
    with holding("regroup-built", worker) as built:  # held before the build goes on
        _follows_between_steps(pair, skip=steps)
        assert built.reached.wait(30)  # built; not caught up with the log
        head = _behind(pair)
        ours.search(rng.standard_normal(DIM).tolist(), top_k=3)
        assert _seq(ours) == head  # the worker is not changing the live mirror
        pair.agree()
    assert ours.engine.wait_until(lambda m: m.regroups >= 1, 30)
    settled(ours)
    assert ours.mirror.sorted_n > 0
    pair.agree()
    ours.close()
