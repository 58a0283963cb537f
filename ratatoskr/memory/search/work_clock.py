"""The mirror worker's CPU time by what it was doing.

On a machine whose cores are all busy, what the worker's thread spends is what the
searches beside it lose (``in_flight.py``). Its total (``MirrorWorker.cpu_seconds``) says
how much; this says on what: a regroup's copy, the follow's reads of the file, the
bringing in of the rows. The tail benchmark reports it beside the searches' percentiles.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class WorkClock:
    """Thread CPU time (``time.thread_time``) charged to the innermost phase under way: a
    phase's time leaves out the phases nested in it (a follow inside a regroup's pause is
    the follow's). Phases are entered by one thread; ``seconds`` may be read from any."""

    __slots__ = ("_since", "_spent", "_stack")

    def __init__(self) -> None:
        self._spent: dict[str, float] = {}
        self._stack: list[str] = []
        self._since = 0.0

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._charge()
        self._stack.append(name)
        try:
            yield
        finally:
            self._charge()
            self._stack.pop()

    def _charge(self) -> None:
        now = time.thread_time()
        if self._stack:
            top = self._stack[-1]
            self._spent[top] = self._spent.get(top, 0.0) + now - self._since
        self._since = now

    def seconds(self) -> dict[str, float]:
        """CPU seconds per phase so far (a copy; a phase under way counts up to its last
        change of phase)."""
        return dict(self._spent)


def thread_cpu_seconds(thread: threading.Thread) -> float | None:
    """The CPU time ``thread`` has used so far (its own clock); ``None`` when it is not
    running."""
    ident = thread.ident
    if ident is None or not thread.is_alive():
        return None
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except OSError:  # it ended just now
        return None
