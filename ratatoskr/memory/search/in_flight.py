"""The searches running in one process right now, counted so the mirror worker can step
aside for them.

On a machine whose cores are all busy (a search, a writer, the worker), a worker step that
runs beside a search takes a core from it: the scheduler preempts the search until the
step ends, and a 0.3 ms search returns after 4 ms. The worker therefore works in short
steps and, before each, waits until the searches under way have returned (at most
``worker.QUIET_WAIT_SECONDS``, so a process that never stops searching still follows its
writes), and not at all for a search that has run that long already: a long search (a
whole tenant at a million rows) would hold the worker back for nothing. The searches
themselves never wait for the worker.
"""

from __future__ import annotations

import threading
import time


class InFlight:
    """A count of the calls between ``begin`` and ``end`` (any thread)."""

    __slots__ = ("_lock", "count", "since")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0  # read without the lock: a stale value costs one short wait or none
        self.since = 0.0  # when the count last rose from zero (``time.monotonic``)

    def begin(self) -> None:
        with self._lock:
            if self.count == 0:
                self.since = time.monotonic()
            self.count += 1

    def end(self) -> None:
        with self._lock:
            self.count -= 1

    @property
    def idle(self) -> bool:
        return self.count == 0
