"""The disaster drill's parts, shared by the test and ``bench/restore_drill.py``.

A server replicating to a ``file://`` replica takes writes from several clients on both
planes; server, supervisor and Litestream are SIGKILLed together (the supervisor is stopped
first so it cannot start Litestream again in between); the data directory goes; ``admin
restore`` brings the files back. Each client remembers when each write was acknowledged, so
the check can say which acknowledged writes the restore kept, and how much acknowledged
time was lost at most.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ratatoskr.sqlite.litestream_run import sweep_stale_workdirs
from ratatoskr.sqlite.replica import read_state
from tests.reliability.common import chunk, put, revisions, state, upsert
from tests.server.harness import Server, alive, poll

FILES = ("memory.db", "affect.db", "memory.jti.db")


def replica_env(replica: Path, sync_interval_ms: int) -> dict[str, str]:
    return {
        "RATATOSKR_REPLICA_URL": f"file://{replica}",
        "RATATOSKR_REPLICA_SYNC_INTERVAL_MS": str(sync_interval_ms),
    }


@dataclass
class AckLog:
    """One client's writes: call ``i`` writes a new id and rewrites an older one, so
    revisions climb. ``acks`` holds (acknowledged at, {id: revision}) per answered call;
    ids of a call that got no answer are ``uncertain`` from then on."""

    url: str
    plane: str
    name: str
    acks: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    uncertain: set[str] = field(default_factory=set)
    bad: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> AckLog:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def join(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(timeout=60)

    def _run(self) -> None:
        write = upsert if self.plane == "memory" else put
        make = chunk if self.plane == "memory" else state
        written: dict[str, int] = {}
        i = 0
        while not self.stop.is_set():
            ids = [f"{self.name}-{i}"] + ([f"{self.name}-{i // 2}"] if i else [])
            try:
                response = write(self.url, [make(x) for x in ids], f"{self.name}-call-{i}")
            except httpx.HTTPError:
                self.uncertain.update(ids)
                i += 1
                continue
            acked_at = time.time()
            if response.status_code == 200:
                for x in ids:
                    written[x] = written.get(x, 0) + 1
                self.acks.append((acked_at, {x: written[x] for x in ids}))
            elif response.status_code != 503:
                self.bad.append(f"{response.status_code} {response.text[:200]}")
            i += 1

    def expected(self, before: float) -> dict[str, int]:
        """The revision of each certain id as of the last call acknowledged before ``before``."""
        latest: dict[str, int] = {}
        for acked_at, revs in self.acks:
            if acked_at < before:
                latest.update(revs)
        return {k: v for k, v in latest.items() if k not in self.uncertain}

    def lost_seconds(self, found: Mapping[str, int], killed_at: float) -> float:
        """How long before the kill the earliest acknowledged write the restore lacks was
        acknowledged (0 when none is missing, or only what was answered as the kill landed)."""
        for acked_at, revs in self.acks:
            if any(found.get(x, 0) < rev for x, rev in revs.items() if x not in self.uncertain):
                return max(0.0, killed_at - acked_at)
        return 0.0


def wait_replicated(root: Path, timeout: float = 30.0) -> None:
    """Until Litestream has synced each file once (its state file has a ``last_sync_at``)."""

    def synced() -> bool | None:
        states = [read_state(str(root / "data" / name)) for name in FILES]
        return all(s is not None and s.last_sync_at is not None for s in states) or None

    poll(synced, timeout, "a first replica sync of every file")


def kill_everything(server: Server) -> float:
    """SIGKILL Litestream, its supervisor and the server's process group; the kill's time.

    The supervisor is stopped (SIGSTOP) first so it cannot start another Litestream between
    the kills, and nothing gets the SIGTERM that would make Litestream sync on its way out.
    """
    assert server.process is not None
    found = read_state(str(server.root / "data" / "memory.db"))
    assert found is not None and found.supervisor_pid and found.litestream_pid
    killed_at = time.time()
    os.kill(found.supervisor_pid, signal.SIGSTOP)
    os.kill(found.litestream_pid, signal.SIGKILL)
    os.kill(found.supervisor_pid, signal.SIGKILL)
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    for pid in (found.litestream_pid, found.supervisor_pid):

        def gone(p: int = pid) -> bool | None:
            return None if alive(p) else True

        poll(gone, 10, "the killed processes to go")
    sweep_stale_workdirs()  # what the next supervisor would do: the killed one left its config
    return killed_at


def admin(root: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ratatoskr", "admin", *args],
        cwd=root,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def found_revisions(url: str, logs: list[AckLog]) -> dict[str, dict[str, int]]:
    """Per plane, the revision the server holds for every id any client wrote."""
    out: dict[str, dict[str, int]] = {}
    for plane in ("memory", "affect"):
        ids = sorted(
            {x for log in logs if log.plane == plane for _, revs in log.acks for x in revs}
        )
        out[plane] = revisions(url, plane, ids) if ids else {}
    return out


def summary(logs: list[AckLog]) -> dict[str, Any]:
    return {
        "calls": sum(len(log.acks) for log in logs),
        "records": sum(len(revs) for log in logs for _, revs in log.acks),
    }
