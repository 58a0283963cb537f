"""Writers that run against a server from threads and remember what was acknowledged."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.reliability.common import chunk, put, state, upsert

Write = Callable[[str, list[dict[str, Any]], str], httpx.Response]


@dataclass
class Writer:
    """One thread writing batches to one plane: call ``i`` writes a new id and rewrites an
    older one, so revisions climb. ``acked[id]`` is the revision the server acknowledged;
    an id whose call failed without an answer is ``uncertain`` (it may or may not be there)."""

    url: str
    plane: str
    name: str
    acked: dict[str, int] = field(default_factory=dict)
    uncertain: set[str] = field(default_factory=set)
    calls: int = 0
    bad: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Writer:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def join(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(timeout=60)

    def _batch(self, i: int) -> list[str]:
        ids = [f"{self.name}-{i}"]
        if i:
            ids.append(f"{self.name}-{i // 2}")
        return ids

    def _run(self) -> None:
        write: Write = upsert if self.plane == "memory" else put
        make = chunk if self.plane == "memory" else state
        i = 0
        while not self.stop.is_set():
            ids = self._batch(i)
            try:
                response = write(self.url, [make(x) for x in ids], f"{self.name}-call-{i}")
            except httpx.HTTPError:
                self.uncertain.update(ids)
                i += 1
                continue
            if response.status_code == 200:
                for x in ids:
                    if x not in self.uncertain:
                        self.acked[x] = self.acked.get(x, 0) + 1
                self.calls += 1
            elif response.status_code == 503:
                self.uncertain.update(ids)  # starting or stopping: not acknowledged
            else:
                self.bad.append(f"{response.status_code} {response.text[:200]}")
            i += 1

    def certain(self) -> dict[str, int]:
        return {k: v for k, v in self.acked.items() if k not in self.uncertain}
