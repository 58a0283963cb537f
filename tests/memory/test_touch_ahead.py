"""The worker writes the places just past the mirror's rows before a follow fills them, so
the first write to those pages is not paid by a search following the log; it writes only
those places, a bounded number ahead, and starts again on the new arrays of a regroup or
a growth."""

from __future__ import annotations

import gc
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

from ratatoskr.memory.search import touch_ahead
from ratatoskr.memory.search.mirror import VectorMirror
from ratatoskr.memory.search.touch_ahead import TouchAhead
from ratatoskr.memory.search.worker import MirrorWorker
from tests.memory.helpers import DIM
from tests.memory.test_tail import filled

AHEAD_ROWS = 64
STEP_ROWS = 16


@pytest.fixture
def small_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few rows ahead, in steps of a few rows (the defaults are megabytes)."""
    monkeypatch.setattr(touch_ahead, "AHEAD_BYTES", AHEAD_ROWS * 4 * DIM)
    monkeypatch.setattr(touch_ahead, "STEP_BYTES", STEP_ROWS * 4 * DIM)


def _mirror(capacity: int, rows: int) -> VectorMirror:
    mirror = VectorMirror(DIM, 1 << 30)
    mirror._reset(capacity)
    mirror.n = rows
    return mirror


@pytest.mark.usefixtures("small_steps")
def test_the_steps_cover_the_places_ahead_of_the_rows_and_no_more() -> None:
    mirror = _mirror(capacity=200, rows=10)
    ahead = TouchAhead()
    steps = []
    while (places := ahead.due(mirror)) is not None:
        steps.append(places)
        ahead.touch(mirror, *places)
    assert steps == [(10, 26), (26, 42), (42, 58), (58, 74)]
    mirror.n = 30  # rows appended: the places ahead move with them
    assert ahead.due(mirror) == (74, 90)
    near_the_end = _mirror(capacity=40, rows=30)
    assert TouchAhead().due(near_the_end) == (30, 40)  # never past the arrays


@pytest.mark.usefixtures("small_steps")
def test_new_arrays_are_written_ahead_from_their_rows_and_old_ones_are_not_kept() -> None:
    mirror = _mirror(capacity=200, rows=100)
    ahead = TouchAhead()
    while (places := ahead.due(mirror)) is not None:
        ahead.touch(mirror, *places)
    old = weakref.ref(mirror.matrix)
    mirror._reset(400)  # a regroup's copy or a growth: new arrays
    mirror.n = 50
    gc.collect()
    assert old() is None
    assert ahead.due(mirror) == (50, 66)


@pytest.mark.usefixtures("small_steps")
def test_the_worker_writes_the_places_past_the_rows_and_answers_stay_exact(
    tmp_path: Path,
) -> None:
    pair = filled(tmp_path, seed=5)
    mirror = pair.ours.mirror
    worker = pair.ours.engine.worker
    assert mirror is not None and worker is not None
    for _ in range(5):
        pair.write(40, rewrite=10, delete=5)
        with worker._changing:  # as no follow is under way: poison the places ahead
            n = mirror.n
            mirror.matrix[n : n + AHEAD_ROWS] = np.nan
            mirror.norms[n : n + AHEAD_ROWS] = np.nan
            worker._touched.upto = n
        pair.agree()
        _written_ahead(worker, mirror)  # the worker, a cycle later
        with worker._changing:
            n = mirror.n
            assert not np.isnan(mirror.matrix[n : n + AHEAD_ROWS]).any()
            assert not np.isnan(mirror.norms[n : n + AHEAD_ROWS]).any()
        pair.agree()
    pair.ours.close()


def _written_ahead(worker: MirrorWorker, mirror: VectorMirror, timeout: float = 30.0) -> None:
    """Wait (bounded) until the worker has written the places ahead of the rows."""
    deadline = time.monotonic() + timeout
    while True:
        with worker._changing:  # between two of its cycles
            if worker._touched.upto >= mirror.n + AHEAD_ROWS:
                return
        assert time.monotonic() < deadline, "the worker did not write the places ahead"
        time.sleep(0.005)
