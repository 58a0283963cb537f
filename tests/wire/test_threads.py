"""Storage calls run on a fixed set of threads, so each store opens a bounded number of
connections (one per thread) however the load comes and goes."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from ratatoskr.server.threads import StoreThreads, run_in_store_thread, store_threads

REQUEST = contextvars.ContextVar("request", default="-")


def _who() -> tuple[int, str]:
    return threading.get_ident(), REQUEST.get()


async def _rounds(pool: StoreThreads, calls: int) -> list[set[int]]:
    barrier = threading.Barrier(pool.size)

    def meet() -> int:
        barrier.wait(timeout=10)  # every thread of the pool busy at once
        return threading.get_ident()

    seen = []
    for _ in range(2):
        first = await asyncio.gather(*(pool.run(meet) for _ in range(pool.size)))
        more = await asyncio.gather(*(pool.run(threading.get_ident) for _ in range(calls)))
        seen.append(set(first) | set(more))
    return seen


def test_more_calls_than_threads_reuse_the_same_threads() -> None:
    pool = StoreThreads(3)
    try:
        first, second = asyncio.run(_rounds(pool, 50))
    finally:
        pool.shutdown()
    assert len(first) == 3
    assert second == first  # the threads did not end and get replaced


def test_a_call_sees_the_callers_context() -> None:
    async def call() -> tuple[int, str]:
        REQUEST.set("r-1")
        return await run_in_store_thread(_who)

    ident, seen = asyncio.run(call())
    assert seen == "r-1"
    assert ident != threading.get_ident()
    assert store_threads().size >= 1


@pytest.mark.parametrize("size", [0, 257])
def test_the_size_is_bounded(size: int) -> None:
    with pytest.raises(ValueError, match="store threads"):
        StoreThreads(size)
