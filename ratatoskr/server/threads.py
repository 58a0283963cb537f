"""The threads storage calls run on: a fixed set per process that never ends.

A SQLite store keeps one connection per thread that used it (each with its own page cache,
up to ``DatabaseSettings.cache_kib``) and closes them only when the store closes. Starlette's
``run_in_threadpool`` runs on anyio's pool, which ends a thread idle for 10 s and starts a
new one when calls pile up again: under uneven load every new thread opened new connections
while the old ones stayed with the store, so a worker's descriptors and RSS grew for as long
as it served. These threads live as long as the process, so a worker holds at most
``size`` connections per file: the memory bound is ``size x files x cache``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

# calls in flight on storage per worker; more wait for a thread. 16 is twice the 8 concurrent
# calls the benchmarks drive per server, and bounds a worker to 16 connections per file
DEFAULT_STORE_THREADS = 16
MAX_STORE_THREADS = 256

P = ParamSpec("P")
T = TypeVar("T")


class StoreThreads:
    """A fixed-size pool; its threads start on demand and end only with ``shutdown``."""

    def __init__(self, size: int = DEFAULT_STORE_THREADS) -> None:
        if not 1 <= size <= MAX_STORE_THREADS:
            raise ValueError(f"store threads must be 1..{MAX_STORE_THREADS}")
        self.size = size
        self.pid = os.getpid()
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="store")

    async def run(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``func(*args, **kwargs)`` on a store thread, with the caller's context variables."""
        call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)


_configured_size = DEFAULT_STORE_THREADS
_pool: StoreThreads | None = None


def configure_store_threads(size: int) -> None:
    """Size this process's pool (the server does it in each worker's lifespan, before any
    call); a pool of another size already running is shut down once its calls are done."""
    global _configured_size, _pool
    if not 1 <= size <= MAX_STORE_THREADS:
        raise ValueError(f"store threads must be 1..{MAX_STORE_THREADS}")
    _configured_size = size
    if _pool is not None and _pool.pid == os.getpid() and _pool.size != size:
        old, _pool = _pool, None
        old.shutdown()


def store_threads() -> StoreThreads:
    """This process's pool, made on first use (after a fork, the child makes its own)."""
    global _pool
    if _pool is None or _pool.pid != os.getpid():
        _pool = StoreThreads(_configured_size)
    return _pool


async def run_in_store_thread(func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a storage call off the event loop, on this process's store threads."""
    return await store_threads().run(func, *args, **kwargs)
