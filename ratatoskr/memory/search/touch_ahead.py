"""Writing the mirror's next places before a follow fills them.

The mirror's arrays have room past their rows (``mirror.headroom``), and those pages are
not touched until rows are appended, so they cost no memory before. The first write to
such a page costs a page fault, and numpy advises huge pages for the matrix: where the
kernel compacts memory to back one (``defrag`` set to ``madvise``), bringing in one
writer's batch of 500 rows took 8 to 14 ms at 1M x 384, nearly all of it in that first
write, on whichever thread followed the log (a long search's, ``worker.follow_here``).

The worker instead writes zeros into the places just past the rows, a step at a time
between its other steps, so a follow writes into pages that are there already. Only the
next ``AHEAD_BYTES`` of vectors are written: the rest of the room still costs nothing.
The places past the rows hold no row (nothing reads them, and ``alive`` is false
there), and only the thread changing the mirror writes them (``worker._changing``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from ratatoskr.memory.search.mirror import ARRAYS, VectorMirror
from ratatoskr.memory.search.work_clock import WorkClock

AHEAD_BYTES = 16 << 20  # vectors' worth of places kept written past the rows
STEP_BYTES = 2 << 20  # written per step: one huge page of vectors


class TouchAhead:
    """How far past the rows the current arrays' places have been written."""

    __slots__ = ("_matrix", "upto")

    def __init__(self) -> None:
        # the matrix the count is of: a regroup or a growth brings new arrays, whose places
        # past the rows are untouched again (a weak reference: never keeps old arrays alive)
        self._matrix: weakref.ref[object] | None = None
        self.upto = 0

    def due(self, mirror: VectorMirror) -> tuple[int, int] | None:
        """The places of the next step, ``(lo, hi)``, or ``None`` when those ahead of the
        rows are written already."""
        if self._matrix is None or self._matrix() is not mirror.matrix:
            self._matrix, self.upto = weakref.ref(mirror.matrix), mirror.n
        row_bytes = 4 * mirror.dim
        end = min(len(mirror.alive), mirror.n + max(1, AHEAD_BYTES // row_bytes))
        lo = max(self.upto, mirror.n)
        if lo >= end:
            return None
        return lo, min(end, lo + max(1, STEP_BYTES // row_bytes))

    def touch(self, mirror: VectorMirror, lo: int, hi: int) -> None:
        """Write zeros into places ``lo:hi`` past the rows (as ``due`` gave them)."""
        write_places(mirror, lo, hi)
        self.upto = hi

    def run(
        self,
        mirror: VectorMirror,
        before_step: Callable[[], None],
        work: WorkClock,
        steps: int | None = None,
    ) -> None:
        """Write the places due, each step after ``before_step`` (the worker letting the
        searches under way return) and on ``work``'s clock: all of them, or ``steps``."""
        done = 0
        while mirror.ready and done != steps and (places := self.due(mirror)):
            before_step()
            with work.phase("touch ahead"):
                self.touch(mirror, *places)
            done += 1


def write_places(mirror: VectorMirror, lo: int, hi: int) -> None:
    """Write zeros into places ``lo:hi`` that hold no row, in each per-row array numpy
    leaves untouched (an object array is filled with None as it is made:
    ``mirror.objects``), so their pages are there before a row is written into them."""
    for name in ARRAYS:
        array = getattr(mirror, name)
        if name == "codes":  # one row per axis, a column per row
            array[:, lo:hi] = 0
        elif array.dtype != object:
            array[lo:hi] = 0
