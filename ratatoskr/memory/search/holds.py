"""Points in the mirror worker's work where a test holds it, to search and write while it
is there (a load between its passes, a batch placed but not yet published, a regroup's
copy built): real interleavings, not timed ones."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Stopped(Exception):
    """The store is closing: the worker ends where it is."""


class Hold:
    """A point in the worker's work where a test holds it (``holding``), after passing it
    ``skip`` times."""

    def __init__(self, skip: int = 0) -> None:
        self.skip = skip
        self.reached = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def wait_released(self, stopping: threading.Event) -> None:
        while not self._released.wait(0.05):
            if stopping.is_set():
                raise Stopped


_holds: dict[str, tuple[Hold, object | None]] = {}


@contextmanager
def holding(point: str, worker: object | None = None, skip: int = 0) -> Iterator[Hold]:
    """Tests: the next worker to reach ``point`` (``worker``, or any of this process; after
    ``skip`` passes) waits there until the hold is released (or the block ends). Points:
    ``load-started``, ``load-sorted`` (between the load's two passes), ``load-scanned``,
    ``follow``, ``follow-staged`` (a part of a batch written past the rows, not yet
    published), ``regroup-pause`` (between two steps of a regroup), ``regroup-built``,
    ``regroup-released`` (the replaced rows' objects let go), ``inplace-step`` (each step
    of an in-place regroup)."""
    hold = Hold(skip)
    _holds[point] = (hold, worker)
    try:
        yield hold
    finally:
        if _holds.get(point, (None,))[0] is hold:
            del _holds[point]
        hold.release()


def reach(point: str, worker: object, stopping: threading.Event) -> None:
    """``worker`` is at ``point``: wait there while a test holds it (until ``stopping``)."""
    held = _holds.get(point)
    if held is None or held[1] not in (None, worker):
        return
    hold = held[0]
    if hold.skip > 0:
        hold.skip -= 1
    elif _holds.pop(point, None) is held:
        hold.reached.set()
        hold.wait_released(stopping)
