"""Power cuts under the real server: with FULL every acknowledged write survives, with NORMAL
only the last commits of a file can go, and never a file.

The cuts come from ``cachefs`` (a FUSE file system that keeps unsynced writes in its own
memory and loses them when it is killed); ``make power-cut`` runs the same rig for 500 cuts.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.powercut.rig import CacheMount, PowerCutRun


def test_the_disk_keeps_what_was_synced_and_nothing_else(tmp_path: Path) -> None:
    disk, mnt = tmp_path / "disk", tmp_path / "mnt"
    mount = CacheMount(disk, mnt, tmp_path / "cachefs.log").start()
    try:
        with open(mnt / "synced", "wb") as f:
            f.write(b"a" * 10_000)
            f.flush()
            os.fsync(f.fileno())
            f.write(b"b" * 100)  # after the sync: lost
        with open(mnt / "never-synced", "wb") as f:
            f.write(b"c" * 5000)
        with open(mnt / "cut-short", "wb") as f:
            f.write(b"d" * 9000)
            f.flush()
            os.fsync(f.fileno())
            f.truncate(10)  # a truncate is a write too: lost unless synced
            f.write(b"e")  # at 9000: the bytes cut off read as zeros, not as the old "d"s
        assert (mnt / "never-synced").read_bytes() == b"c" * 5000  # served from the cache
        assert (mnt / "cut-short").read_bytes() == b"d" * 10 + bytes(8990) + b"e"
        mount.cut()
        assert mount.wait_cut(10) is not None
        with pytest.raises(OSError) as refused:  # from the cut on, nothing reaches the disk
            (mnt / "synced").write_bytes(b"late")
        assert refused.value.errno == errno.EIO
    finally:
        mount.power_off()
    assert (disk / "synced").read_bytes() == b"a" * 10_000
    assert (disk / "never-synced").read_bytes() == b""  # the name was made, no content synced
    assert (disk / "cut-short").read_bytes() == b"d" * 9000


def test_full_keeps_every_acknowledged_write_across_random_cuts(tmp_path: Path) -> None:
    tally = PowerCutRun(tmp_path, synchronous="FULL", seed=21).run(cuts=20)
    print(tally.summary())
    assert tally.cuts == 20 and tally.acknowledged > 60, tally.summary()
    assert tally.durable(), (
        tally.lost[:5],
        tally.wrong[:5],
        tally.jti_lost[:5],
        tally.idempotency_lost[:5],
        tally.corrupt[:5],
        tally.problems[:5],
    )
    # and the operator's own check on the files the last cut left
    done = subprocess.run(
        [sys.executable, "-m", "ratatoskr", "admin", "check"]
        + ["--memory-db", str(tmp_path / "disk" / "memory.db")]
        + ["--affect-db", str(tmp_path / "disk" / "affect.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "check passed" in done.stdout, done.stdout + done.stderr


def test_normal_loses_only_the_last_commits_and_never_a_file(tmp_path: Path) -> None:
    tally = PowerCutRun(tmp_path, synchronous="NORMAL", seed=22).run(cuts=6)
    print(tally.summary())  # what NORMAL lost: acknowledged writes, token claims, keys
    assert tally.cuts == 6
    # the window is real (the rig sees it) and is only ever the tail of each file's commits
    assert tally.lost, tally.summary()
    assert not tally.wrong and not tally.corrupt and not tally.problems, (
        tally.wrong[:5],
        tally.corrupt[:5],
        tally.problems[:5],
    )
