"""Waiting for another process's write lock: short, even sleeps instead of SQLite's back-off.

SQLite's own busy handler (``sqlite3_busy_timeout``) sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25,
50, 50, 100 ms between tries, so a writer that finds the lock held by a ~15 ms batch of
another gunicorn worker wakes on average well after it was released, and the file is idle
in between: two processes writing batches into one file then store fewer chunks per second
together than one alone. Here a waiting writer tries again every half millisecond (a try is
one lock attempt on the WAL index) until the busy timeout.
"""

from __future__ import annotations

import threading
import time

STEP_SECONDS = 0.0005


class BusyWait:
    """A busy handler (``Connection.set_busy_handler``) that gives up after ``timeout_ms``."""

    def __init__(self, timeout_ms: int, step_seconds: float = STEP_SECONDS) -> None:
        self.timeout = timeout_ms / 1000
        self.step = step_seconds
        self._local = threading.local()

    def __call__(self, prior_calls: int) -> bool:
        now = time.monotonic()
        if prior_calls == 0:
            self._local.since = now
        if now - getattr(self._local, "since", now) >= self.timeout:
            return False
        time.sleep(self.step)
        return True
