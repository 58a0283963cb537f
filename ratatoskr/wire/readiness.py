"""Each plane's health with a deadline, for ``/readyz`` and a metrics scrape.

A database that accepts connections but never answers (a frozen host, a network that drops
packets without a word) holds a health check for as long as it is frozen: no timeout of the
server's own (``statement_timeout``) can fire there, and a TCP connection to a stopped
process stays open. A probe must still answer in time, so each plane's check is waited for
``HEALTH_DEADLINE`` seconds, then reported ``down``. The check still under way is waited for
again by the next probe rather than started twice, so a frozen database holds one thread per
plane, not one per probe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

HEALTH_DEADLINE = 2.5  # seconds: past the planes' own one-second waits, under a probe's own
UNANSWERED = "store unavailable: the database did not answer a health check within {:g} s"

Health = dict[str, Any]
Offload = Callable[[Callable[[], Health]], Awaitable[Health]]


class BoundedHealth:
    """One plane's health checks, at most one under way at a time, each waited for at most
    ``deadline`` seconds (one event loop: no lock needed)."""

    def __init__(self, check: Callable[[], Health], deadline: float | None = None) -> None:
        self.check = check
        self.deadline = HEALTH_DEADLINE if deadline is None else deadline
        self._pending: asyncio.Future[Health] | None = None

    async def __call__(self, offload: Offload) -> Health:
        pending = self._pending
        if pending is None or pending.done():
            pending = self._pending = asyncio.ensure_future(offload(self.check))
        try:
            return await asyncio.wait_for(asyncio.shield(pending), self.deadline)
        except TimeoutError:
            return {"status": "down", "reason": UNANSWERED.format(self.deadline)}
