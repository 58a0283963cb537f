"""The power-cut rig: the cache file system mounted, the real server on it, cut after cut.

One cycle: mount ``cachefs`` over the disk directory, start ``ratatoskr serve`` (gunicorn,
2 workers) with both plane files and the jti ledger on the mount, verify what the previous
cycle had acknowledged, arm a cut at a random mutation, and write from every lane until the
cut SIGKILLs the server. The cache file system is then SIGKILLed and unmounted: the disk
directory holds every file as it was last synced, and the next cycle starts the server on it.
``PowerCutRun.run`` ends with one more start and verification, and ``admin check`` on the
files after every verification.
"""

from __future__ import annotations

import gc
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ratatoskr.ops import maintenance
from ratatoskr.ops.stores import Paths, Stores
from tests.powercut.workload import Findings, Lane, read_events
from tests.server.harness import DIM, Server

ROOT = Path(__file__).resolve().parents[2]
FUSERMOUNT = "fusermount3"
# a cut lands within this many file mutations (writes, truncates, syncs) after arming; an
# acknowledged write costs ~50 (a claim in the jti ledger, a commit of several pages in its
# plane file, two writes a WAL frame, and the checkpoints)
MAX_MUTATIONS = 1200
WRITE_DEADLINE = 20.0


class CacheMount:
    """A ``cachefs`` process serving ``backing`` at ``mountpoint``."""

    def __init__(self, backing: Path, mountpoint: Path, log: Path) -> None:
        self.backing, self.mountpoint, self.log = backing, mountpoint, log
        self.process: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()

    def start(self, timeout: float = 15.0) -> CacheMount:
        if shutil.which(FUSERMOUNT) is None:
            raise AssertionError(
                "fusermount3 is missing: install Debian's fuse3 (.ci/system-packages)"
            )
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "tests.powercut.cachefs", str(self.backing)]
        with open(self.log, "ab") as err:
            self.process = subprocess.Popen(
                [*cmd, str(self.mountpoint)],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        threading.Thread(target=self._read, daemon=True).start()
        line = self._next(timeout)
        if line != "ready":
            self.power_off()
            raise AssertionError(f"cachefs did not mount: {line!r}; see {self.log}")
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())
        self.lines.put("exited")

    def _next(self, timeout: float) -> str | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def _say(self, line: str) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def arm(self, after: int, victim: int) -> None:
        """Cut at the ``after``-th mutation, SIGKILLing process group ``victim`` then."""
        self._say(f"arm {after} {victim}")

    def cut(self, victim: int | None = None) -> None:
        """Cut now (SIGKILLing process group ``victim``, if any)."""
        self._say("cut" if victim is None else f"cut {victim}")

    def wait_cut(self, timeout: float) -> str | None:
        """The cut's report line, or None when none came within ``timeout``."""
        line = self._next(timeout)
        return line if line is not None and line.startswith("cut") else None

    def power_off(self, timeout: float = 15.0) -> None:
        """SIGKILL the file system (its unsynced pages die with it) and unmount."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=timeout)
        deadline = time.monotonic() + timeout
        while mounted(self.mountpoint):
            done = subprocess.run([FUSERMOUNT, "-u", str(self.mountpoint)], capture_output=True)
            if done.returncode == 0:
                break
            if time.monotonic() > deadline:
                subprocess.run([FUSERMOUNT, "-u", "-z", str(self.mountpoint)], check=True)
                break
            time.sleep(0.05)  # a killed server's files are still closing


def mounted(path: Path) -> bool:
    """From the mount table: a mount whose server died is still listed, where ``ismount``
    (a stat) fails."""
    target = os.path.realpath(path)
    with open("/proc/self/mounts") as table:
        return any(line.split()[1] == target for line in table)


@dataclass
class Tally:
    """A run's figures; ``lost`` and the rest hold one line per finding."""

    synchronous: str
    cuts: int = 0
    acknowledged: int = 0
    checked: int = 0
    lost: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    jti_lost: list[str] = field(default_factory=list)
    idempotency_lost: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    cycle_seconds: list[float] = field(default_factory=list)

    def add(self, found: Findings) -> None:
        self.checked += found.checked
        self.lost += found.lost
        self.wrong += found.wrong
        self.jti_lost += found.jti_lost
        self.idempotency_lost += found.idempotency_lost

    def durable(self) -> bool:
        """Every acknowledged write found, nothing else wrong."""
        return not (
            self.lost
            or self.wrong
            or self.jti_lost
            or self.idempotency_lost
            or self.corrupt
            or self.problems
        )

    def summary(self) -> str:
        mean = sum(self.cycle_seconds) / max(1, len(self.cycle_seconds))
        return (
            f"synchronous={self.synchronous} cuts={self.cuts} acknowledged={self.acknowledged} "
            f"checked={self.checked} lost={len(self.lost)} wrong={len(self.wrong)} "
            f"jti_lost={len(self.jti_lost)} idempotency_lost={len(self.idempotency_lost)} "
            f"corrupt={len(self.corrupt)} problems={len(self.problems)} "
            f"seconds_per_cut={mean:.2f}"
        )


class PowerCutRun:
    """Cuts over one disk directory under ``root``, with ``lanes`` writers."""

    def __init__(self, root: Path, *, synchronous: str, seed: int, lanes: int = 3) -> None:
        self.root = root
        self.disk, self.mnt = root / "disk", root / "mnt"
        self.synchronous = synchronous
        self.rng = random.Random(seed)
        self.lanes = [Lane(i, seed, DIM) for i in range(lanes)]
        self.tally = Tally(synchronous)
        (root / "server").mkdir(parents=True, exist_ok=True)

    def run(self, cuts: int, on_cut: Callable[[Tally], None] | None = None) -> Tally:
        for _ in range(cuts):
            started = time.monotonic()
            if not self._cycle(cut=True):
                break
            self.tally.cuts += 1
            self.tally.acknowledged = sum(lane.acknowledged for lane in self.lanes)
            self.tally.cycle_seconds.append(time.monotonic() - started)
            if on_cut is not None:
                on_cut(self.tally)
        self._cycle(cut=False)
        self.tally.acknowledged = sum(lane.acknowledged for lane in self.lanes)
        return self.tally

    def _server(self) -> Server:
        env = {
            "RATATOSKR_MEMORY_DB": str(self.mnt / "memory.db"),
            "RATATOSKR_AFFECT_DB": str(self.mnt / "affect.db"),
            "RATATOSKR_SQLITE_SYNCHRONOUS": self.synchronous,
            "RATATOSKR_AUTH_TARPIT_MS": "0",
        }
        return Server(self.root / "server", env=env)

    def _cycle(self, cut: bool) -> bool:
        """Start on the disk as it is, verify, then (``cut``) write until a cut; False when
        the server cannot start on the files any more."""
        mount = CacheMount(self.disk, self.mnt, self.root / "cachefs.log").start()
        server = self._server()
        try:
            try:
                server.start()
            except AssertionError as exc:
                self.tally.corrupt.append(f"the server did not start after a cut: {exc}")
                return False
            self._verify(server)
            if cut:
                mount.arm(self.rng.randint(1, MAX_MUTATIONS), _group(server))
                self._write_until_cut(server, mount)
            return True
        finally:
            server.kill()
            mount.power_off()

    def _verify(self, server: Server) -> None:
        with httpx.Client(base_url=server.url) as client:
            ready = client.get("/readyz", timeout=30)
            if ready.status_code != 200:
                self.tally.corrupt.append(f"not ready after a cut: {ready.text}")
            events = read_events(client)
            for lane in self.lanes:
                self.tally.add(lane.verify(client, events))
            for lane in self.lanes:
                self.tally.add(lane.resend(client))
        with Stores(Paths(str(self.mnt / "memory.db"), str(self.mnt / "affect.db"))) as stores:
            report = maintenance.check(stores)
        # a closed store keeps a descriptor of its file until collected (``FileIdentity``):
        # collect now, or the mount stays busy when the next cut unmounts it
        gc.collect()
        if not report["ok"]:
            for plane, result in report["planes"].items():
                self.tally.corrupt += [f"{plane}: {p}" for p in result["problems"]]

    def _write_until_cut(self, server: Server, mount: CacheMount) -> None:
        def write(lane: Lane) -> None:
            with httpx.Client(base_url=server.url) as client:
                while lane.write(client, self.tally.problems):
                    pass

        threads = [threading.Thread(target=write, args=(lane,)) for lane in self.lanes]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + WRITE_DEADLINE
        report = None
        while report is None and time.monotonic() < deadline:
            report = mount.wait_cut(0.05)
            if report is None and not any(t.is_alive() for t in threads):
                break  # every lane stopped on a fault before the cut: cut now
        if report is None:
            mount.cut(_group(server))
            report = mount.wait_cut(10.0)
        for thread in threads:
            thread.join(timeout=60)
        if report is None:
            self.tally.problems.append("the file system never reported the cut")


def _group(server: Server) -> int:
    """The server's process group (it starts a session of its own): master and workers."""
    assert server.process is not None
    return server.process.pid
