"""Writers started at once on their own threads, for the contention tests of both planes."""

from __future__ import annotations

import threading
from collections.abc import Callable


def failures_of_writers(count: int, rounds: int, write: Callable[[int, int], None]) -> list[str]:
    """Run ``write(writer, round)`` for ``rounds`` rounds on each of ``count`` threads, all
    released together; every exception raised, by type and message (none is expected)."""
    failures: list[str] = []
    start = threading.Barrier(count)

    def writer(n: int) -> None:
        start.wait()
        for i in range(rounds):
            try:
                write(n, i)
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures
