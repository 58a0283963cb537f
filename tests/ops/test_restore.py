"""``admin restore``: plane files back from a real Litestream replica (``file://``).

The replica is made by the real binary, with the config ``ratatoskr serve``'s supervisor
writes, in ``replicate -once`` runs (one sync and exit) between writes through the stores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops.restore import Restorer, Target
from ratatoskr.ops.stores import Paths
from ratatoskr.server.replication import litestream_config, replicated_files
from ratatoskr.sqlite.jti import JtiLedger
from ratatoskr.sqlite.replica import ReplicaState, litestream_binary, read_state, write_state
from tests.ops.conftest import CTX, DIM, Files, chunks
from tests.server.harness import poll

SECRET = "replica-token-6f1c"


def replicate_once(files: Files, url: str) -> None:
    """One Litestream sync of both planes and the ledger beside memory, then exit."""
    binary = litestream_binary()
    assert binary is not None
    replicated = replicated_files(str(files.memory), str(files.affect))
    JtiLedger(replicated[-1].path).close()  # as serve does: Litestream needs the file
    config = litestream_config(replicated, url, str(files.dir / "ctl.sock"), 200, 5000)
    config.pop("socket")
    path = files.dir / "litestream.yml"
    path.write_text(json.dumps(config))
    done = subprocess.run(
        [binary, "replicate", "-config", str(path), "-no-expand-env", "-once"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def replica(filled: Files, tmp_path: Path) -> str:
    """A replica of the filled files (and a ledger with one claim) at a file:// URL."""
    ledger = JtiLedger(str(filled.dir / "memory.jti.db"))
    ledger.claim("claimed-jti", time.time() + 300)
    ledger.close()
    url = f"file://{tmp_path / 'replica'}"
    replicate_once(filled, url)
    return url


def lose_the_disk(files: Files) -> None:
    for path in list(files.dir.iterdir()):
        if path.name.startswith(("memory", "affect", ".memory", ".affect")):
            if path.is_dir():
                for inner in sorted(path.rglob("*"), reverse=True):
                    inner.rmdir() if inner.is_dir() else inner.unlink()
                path.rmdir()
            else:
                path.unlink()


def test_restore_brings_back_both_planes_and_the_ledger_then_checks_them(
    filled: Files, replica: str, admin: Any
) -> None:
    before = admin("stats", "--json").json()["planes"]
    lose_the_disk(filled)
    ran = admin("restore", "--from", replica)
    assert ran.code == 0, ran.err
    assert "check passed" in ran.out
    for name in ("memory", "affect", "jti"):
        assert name in ran.out
    assert "note " not in ran.out  # positions, times and sizes; never content
    after = admin("stats", "--json").json()["planes"]
    assert {p: after[p]["records"] for p in after} == {p: before[p]["records"] for p in before}
    for restored in (filled.memory, filled.affect, filled.dir / "memory.jti.db"):
        assert restored.stat().st_mode & 0o777 == 0o600  # owner-only, as a backup's copies
    ledger = JtiLedger(str(filled.dir / "memory.jti.db"))
    assert ledger.claim("claimed-jti", time.time() + 300) is False  # a replay stays refused
    ledger.close()
    report = admin("restore", "--from", replica, "--force", "--json").json()
    assert report["check"]["ok"]
    for info in report["files"].values():
        assert len(info["txid"]) == 16 and info["bytes"] > 0 and info["replicated_at"]


def test_a_restore_stopped_while_it_restores_a_file_leaves_nothing_behind(
    filled: Files, replica: str
) -> None:
    """Stopped (Ctrl-C, SIGTERM) during the second file: the first, restored beside its
    target, and what Litestream was writing for the second (its ``.tmp``) are removed."""
    lose_the_disk(filled)

    class StoppedOnTheSecond(Restorer):
        calls = 0

        def _restore(
            self, target: Target, output: str, when: str | None
        ) -> subprocess.CompletedProcess[str]:
            self.calls += 1
            if self.calls == 2:
                Path(output + ".tmp").write_bytes(b"part of a file")  # Litestream's own
                raise KeyboardInterrupt
            return super()._restore(target, output, when)

    restorer = StoppedOnTheSecond(Paths(str(filled.memory), str(filled.affect)), replica)
    with pytest.raises(KeyboardInterrupt):
        restorer.run()
    assert restorer.calls == 2
    planes = (".memory", ".affect", "memory", "affect")
    assert [p.name for p in filled.dir.iterdir() if p.name.startswith(planes)] == []


def test_a_stop_during_the_renames_waits_until_every_file_is_in_place(
    filled: Files, replica: str
) -> None:
    lose_the_disk(filled)

    class StoppedWhileRenaming(Restorer):
        def _replace(self, target: Target, temporary: str) -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # as ``kill`` would, between two renames
            super()._replace(target, temporary)

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)  # what the admin commands do on SIGTERM

    # another thread alive, as a store's checkpointer: a signal sent to the process may be
    # taken by it, and Python still runs the handler in the main thread at once
    idle = threading.Event()
    other = threading.Thread(target=idle.wait)
    other.start()
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        restorer = StoppedWhileRenaming(Paths(str(filled.memory), str(filled.affect)), replica)
        with pytest.raises(SystemExit):
            restorer.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        idle.set()
        other.join()
    assert restorer.placed
    assert filled.memory.exists() and filled.affect.exists()
    assert not [p.name for p in filled.dir.iterdir() if p.name.endswith((".restoring", ".tmp"))]


def test_restore_refuses_files_that_exist_unless_forced(
    filled: Files, replica: str, admin: Any
) -> None:
    memory = open_memory_store(str(filled.memory), embedding_dim=DIM)
    memory.upsert_many(chunks(3, seed=99), idempotency_key="after", ctx=CTX)
    memory.close()
    mtime = os.stat(filled.memory).st_mtime_ns
    ran = admin("restore", "--from", replica)
    assert ran.code == 1 and "--force" in ran.err
    assert os.stat(filled.memory).st_mtime_ns == mtime
    (filled.dir / "memory.db-replica.json").write_text("{}")  # a stale state goes too
    assert admin("restore", "--from", replica, "--force").code == 0
    assert not (filled.dir / "memory.db-replica.json").exists()
    assert read_state(str(filled.memory)) is None


def test_restore_to_a_timestamp_returns_the_earlier_state(
    filled: Files, tmp_path: Path, admin: Any
) -> None:
    url = f"file://{tmp_path / 'replica'}"
    replicate_once(filled, url)
    first = time.time()
    # Litestream lists its files' times in whole seconds: a time in the first one's second
    # cannot be told from one before it, so the state asked for is a second later
    poll(lambda: time.time() >= first + 1 or None, 5, "a second to pass")
    between = datetime.fromtimestamp(time.time(), UTC).isoformat()
    poll(lambda: time.time() >= first + 1.01 or None, 5, "the next millisecond")
    memory = open_memory_store(str(filled.memory), embedding_dim=DIM)
    later = [{**c, "id": f"later-{i}"} for i, c in enumerate(chunks(5, seed=11))]
    memory.upsert_many(later, idempotency_key="later", ctx=CTX)
    memory.close()
    replicate_once(filled, url)
    latest = admin("stats", "--json").json()["planes"]["memory"]["records"]["chunk"]
    lose_the_disk(filled)
    ran = admin("restore", "--from", url, "--timestamp", between, "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["timestamp"].startswith(between[:19])
    earlier = admin("stats", "--json").json()["planes"]["memory"]["records"]["chunk"]
    assert earlier == latest - len(later)
    before = admin("restore", "--from", url, "--force", "--timestamp", "2020-01-01T00:00:00Z")
    assert before.code == 2 and "begins after" in before.err
    assert admin("stats", "--json").json()["planes"]["memory"]["records"]["chunk"] == earlier
    # a time after the replica's last change: its latest state, which it held then
    future = admin("restore", "--from", url, "--force", "--timestamp", "2099-01-01T00:00:00Z")
    assert future.code == 0, future.err
    assert admin("stats", "--json").json()["planes"]["memory"]["records"]["chunk"] == latest
    admin("restore", "--from", url, "--force", "--timestamp", between)

    # replicating on from the restored state: the replica's latest is that state, plus
    # what was written after the restore, without the writes the restore went back past
    memory = open_memory_store(str(filled.memory), embedding_dim=DIM)
    memory.upsert_many([{**later[0], "id": "after-restore"}], idempotency_key="new", ctx=CTX)
    memory.close()
    replicate_once(filled, url)
    lose_the_disk(filled)
    assert admin("restore", "--from", url).code == 0
    ids = {r["id"] for r in admin("list", "memory", "--limit", "500", "--json").json()["records"]}
    assert "after-restore" in ids and not ids & {c["id"] for c in later}
    assert len(ids) == earlier + 1


def test_a_replica_without_the_planes_fails_without_showing_its_secrets(
    files: Files, tmp_path: Path, admin: Any
) -> None:
    lose_the_disk(files)
    url = f"file://{tmp_path / 'empty'}?token={SECRET}"
    ran = admin("restore", "--from", url)
    assert ran.code == 2
    assert "holds no memory database" in ran.err
    assert SECRET not in ran.out + ran.err
    assert list(files.dir.iterdir()) == []  # nothing half-restored is left behind
    bad = admin("restore", "--from", f"ftp://host/{SECRET}")
    assert bad.code == 2 and "--from" in bad.err and SECRET not in bad.err
    when = admin("restore", "--from", url, "--timestamp", "yesterday")
    assert when.code == 2 and "ISO 8601" in when.err


def test_restore_takes_the_servers_replica_url_by_default(
    filled: Files, replica: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lose_the_disk(filled)
    assert admin("restore").code == 2  # no --from and no RATATOSKR_REPLICA_URL
    monkeypatch.setenv("RATATOSKR_REPLICA_URL", replica)
    ran = admin("restore", "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["check"]["ok"]


@pytest.mark.parametrize("target", ["--memory-db", "--affect-db", "--jti-db"])
def test_restore_refuses_a_postgresql_target_before_touching_anything(
    filled: Files,
    replica: str,
    admin: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
) -> None:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    lose_the_disk(filled)
    ran = admin("restore", "--from", replica, target, f"postgresql://ratatoskr:{SECRET}@db/r")
    assert ran.code == 2
    assert "SQLite files only" in ran.err and "pg_restore" in ran.err
    assert "postgresql://ratatoskr:***@db/r" in ran.err and SECRET not in ran.err
    assert ran.out == ""
    assert not [p for p in filled.dir.iterdir() if p.name.startswith(("memory", "affect"))]
    assert list(workdir.iterdir()) == []
    paths = Paths.resolve({}, memory=f"postgresql://u:{SECRET}@db/r", affect=str(filled.affect))
    with pytest.raises(ValueError, match="SQLite files only"):
        Restorer(paths, replica)  # the Python API refuses it too


def test_stats_shows_litestream_not_running_once_its_supervisor_falls_silent(
    files: Files, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATATOSKR_REPLICA_URL", "file:///backups/ratatoskr")
    now = time.time()
    for name, silent in (("memory.db", 0.5), ("affect.db", 300.0)):
        state = ReplicaState(
            replica=f"file:///backups/ratatoskr/{name}",
            since=now - 600,
            last_sync_at=now - 1,
            updated_at=now - silent,
            litestream_running=True,  # what a supervisor killed outright last wrote
            litestream_pid=1,
            supervisor_pid=1,
        )
        write_state(str(files.dir / name), state)
    shown = admin("stats", "--json").json()["replication"]["files"]
    assert shown["memory"]["litestream_running"] and shown["memory"]["status"] == "ok"
    assert not shown["affect"]["litestream_running"] and shown["affect"]["status"] == "degraded"
    assert shown["affect"]["supervisor_silent_s"] >= 300
    table = admin("stats").out
    assert "not running (supervisor silent 30" in table
