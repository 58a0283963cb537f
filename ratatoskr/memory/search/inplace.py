"""Regrouping a mirror in place, for when the live mirror and a sorted copy of it do not both
fit the byte budget: its rows are moved into scope order a block at a time, each block one
short hold of the lock (``STEP_BYTES`` of vectors moved), so searches go on between steps.

While rows move, the mirror counts every row as tail (``sorted_n = 0``): a search finds a
value's rows by scanning the axis codes instead of the grouped order, which stays correct
whatever order the rows are in, and only slower. The steps:

1. the target order: the rows alive now, sorted by scope (computed outside the lock; one
   thread at a time changes the mirror: ``worker._changing``);
2. for each block of target places, one step: the rows that belong there move in, and the
   rows they displace move to the places just vacated; every step leaves each chunk in
   exactly one row, so a search between two steps sees a whole mirror;
3. the rows appended meanwhile (the worker keeps following the log between steps) move
   down over the dead rows, a block per step, and the row count shrinks to what is live;
4. each axis's grouped order is built (outside the lock) and the mirror is grouped again.

The extra memory is three int64 per row (the order and the two position maps).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from ratatoskr.core.scope import AXES
from ratatoskr.memory.search.build import grouped_orders
from ratatoskr.memory.search.cosine import I64
from ratatoskr.memory.search.mirror import ARRAYS, VectorMirror

STEP_BYTES = 1 << 20  # vector bytes moved per step (twice: in and out)
# what a row is made of, besides its axis codes
_PER_ROW = tuple(name for name in ARRAYS if name != "codes")

Pause = Callable[[], None]
Step = Callable[[], AbstractContextManager[None]]


def step_rows(dim: int) -> int:
    """Target places filled per step: about ``STEP_BYTES`` of vectors moved each way."""
    return max(16, STEP_BYTES // (4 * dim))


def _move(mirror: VectorMirror, src: I64, dst: I64) -> None:
    """Move the rows at ``src`` to ``dst``, every value read before any is written (the
    places of ``dst`` hold dead rows or rows that move too)."""
    mirror.codes[:, dst] = mirror.codes[:, src]
    array: Any
    for array in _PER_ROW:
        array = getattr(mirror, array)
        array[dst] = array[src]
    rows = mirror.rows
    moved = zip(dst.tolist(), mirror.alive[dst].tolist(), mirror.ids[dst].tolist(), strict=True)
    for place, alive, chunk_id in moved:
        if alive:
            rows[chunk_id] = place


def _vacate(mirror: VectorMirror, places: I64) -> None:
    """Rows whose chunk moved elsewhere: dead, and out of every posting."""
    mirror.alive[places] = False
    mirror.codes[:, places] = 0
    mirror.records[places] = None


def regroup(mirror: VectorMirror, pause: Pause, locked_step: Step) -> None:
    """Sort ``mirror``'s rows by scope where they are (see the module's docstring). Call
    from the one thread changing it; ``locked_step()`` holds its lock for one step."""
    start = mirror.n
    alive = np.flatnonzero(mirror.alive[:start])
    target = alive[np.lexsort(mirror.codes[::-1, alive])]  # place i <- the row at target[i]
    count = len(target)
    where = np.arange(start, dtype=np.int64)  # where the row first at r is now
    holder = np.arange(start, dtype=np.int64)  # which first row the place p holds now
    with locked_step():
        mirror.generation += 1
        mirror.sorted_n = 0
        mirror._by_code, mirror._sorted_codes = [], []
        mirror._starts = [None] * len(AXES)
    block = step_rows(mirror.dim)
    for lo in range(0, count, block):
        hi = min(count, lo + block)
        pause()
        with locked_step():
            mirror.generation += 1
            src = where[target[lo:hi]]  # all >= lo: the places before lo are final
            inside = np.zeros(hi - lo, dtype=bool)
            inside[src[src < hi] - lo] = True
            displaced = lo + np.flatnonzero(~inside)
            sources = np.concatenate((src, displaced))
            places = np.concatenate((np.arange(lo, hi, dtype=np.int64), src[src >= hi]))
            _move(mirror, sources, places)
            first = holder[sources]
            holder[places] = first
            where[first] = places
    _compact(mirror, count, start, block, pause, locked_step)
    pause()
    by_code, sorted_codes = grouped_orders(mirror.codes, count, pause)
    with locked_step():
        mirror.generation += 1
        mirror._by_code, mirror._sorted_codes = by_code, sorted_codes
        mirror._starts = [None] * len(AXES)
        mirror.sorted_n = count


def _compact(
    mirror: VectorMirror, frontier: int, tail: int, block: int, pause: Pause, locked_step: Step
) -> None:
    """Move the live rows from ``tail`` on (appended since the regroup began) down to
    ``frontier`` (the places past the sorted rows hold dead rows), then drop the rest."""
    while True:
        pause()
        with locked_step():
            mirror.generation += 1
            end = mirror.n
            if tail >= end:
                for array in (mirror.alive, mirror.wide):
                    array[frontier:end] = False
                mirror.codes[:, frontier:end] = 0
                for objects in (mirror.ids, mirror.keys, mirror.records):
                    objects[frontier:end] = None  # the places appends fill next
                mirror.n = frontier
                mirror.dead = frontier - int(np.count_nonzero(mirror.alive[:frontier]))
                return
            hi = min(end, tail + block)
            src = tail + np.flatnonzero(mirror.alive[tail:hi])
            dst = np.arange(frontier, frontier + len(src), dtype=np.int64)
            if not np.array_equal(src, dst):
                _move(mirror, src, dst)
                _vacate(mirror, src[src >= frontier + len(src)])
            frontier += len(src)
            tail = hi
