"""Replication from ``ratatoskr serve``: Litestream supervised, visible, and quiet about secrets.

Real processes throughout: the server, its supervisor and the Litestream binary replicating
to a ``file://`` replica. The replica URL carries a query value and Litestream's credential
variable a value, neither of which may reach a log line, an error or ``/metrics``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from ratatoskr.sqlite.litestream_run import WORKDIR_PREFIX, sweep_stale_workdirs
from ratatoskr.sqlite.replica import ReplicaState, read_state
from tests.reliability.common import chunk, ready, upsert
from tests.reliability.replica_drill import admin, replica_env, wait_replicated
from tests.server.harness import Server, alive, children_of, ok, poll

URL_SECRET = "url-secret-5d2a9c"
ENV_SECRET = "env-secret-0b7e44"


def _state(server: Server, name: str = "memory.db") -> ReplicaState:
    found = read_state(str(server.root / "data" / name))
    assert found is not None
    return found


def _lag_samples(server: Server) -> dict[str, float]:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    samples = {}
    for line in text.splitlines():
        if line.startswith("ratatoskr_replication_lag_seconds{"):
            plane = line.split('plane="', 1)[1].split('"', 1)[0]
            samples[plane] = float(line.rsplit(" ", 1)[1])
    return samples


@pytest.fixture
def replicating(tmp_path: Path) -> Iterator[Server]:
    env = replica_env(tmp_path / "replica", 400)
    env["RATATOSKR_REPLICA_URL"] += f"?token={URL_SECRET}"  # a file replica ignores it
    env["LITESTREAM_SECRET_ACCESS_KEY"] = ENV_SECRET
    env["RATATOSKR_REPLICA_MAX_LAG"] = "2"
    server = Server(tmp_path, env=env)
    try:
        server.start()
        wait_replicated(tmp_path)
        yield server
    finally:
        server.kill()


def test_litestream_killed_is_started_again_logged_and_replicates_again(
    replicating: Server,
) -> None:
    server = replicating
    first = _state(server)
    assert first.litestream_pid is not None and first.restarts == 0
    os.kill(first.litestream_pid, signal.SIGKILL)

    def restarted() -> ReplicaState | None:
        state = _state(server)
        fresh = state.litestream_running and state.litestream_pid != first.litestream_pid
        return state if fresh and state.restarts == 1 else None

    again = poll(restarted, 30, "the supervisor to start Litestream again")
    written = time.time()
    ok(upsert(server.url, [chunk("after-restart")], "after-restart"))
    poll(
        lambda: (_state(server).last_sync_at or 0) > written or None,
        30,
        "the replica to take the write made after the restart",
    )
    exits = [line for line in server.log_lines() if line["event"].startswith("litestream exited")]
    assert len(exits) == 1
    assert exits[0]["exit_status"] == -signal.SIGKILL and exits[0]["restarts"] == 1
    assert exits[0]["level"] == "error" and exits[0]["logger"] == "ratatoskr.replication"
    relayed = [line for line in server.log_lines() if line.get("source") == "litestream"]
    assert relayed and all(line["event"].startswith("litestream: ") for line in relayed)
    assert {line.get("plane") for line in relayed} >= {"memory", "affect", "jti"}
    assert server.terminate() == 0
    assert again.litestream_pid is not None and not alive(again.litestream_pid)
    assert again.supervisor_pid is not None and not alive(again.supervisor_pid)
    assert not _state(server).litestream_running
    output = server.output()
    assert URL_SECRET not in output and ENV_SECRET not in output
    assert "Traceback" not in output


def test_a_stalled_replica_degrades_health_metrics_and_stats_until_it_moves_again(
    replicating: Server,
) -> None:
    server = replicating
    pid = _state(server).litestream_pid
    assert pid is not None

    def caught_up() -> bool | None:
        # the lag is read from the supervisor's last poll of Litestream: a loaded machine
        # can hold a sync back past RATATOSKR_REPLICA_MAX_LAG for a moment
        status = ready(server.url)[1]["planes"]["memory"]["status"]
        lags = _lag_samples(server)
        return True if status == "ok" and lags and all(lag < 2 for lag in lags.values()) else None

    poll(caught_up, 30, "health ok and the replica within RATATOSKR_REPLICA_MAX_LAG")
    os.kill(pid, signal.SIGSTOP)  # alive but not replicating: no sync reaches the replica
    try:

        def degraded() -> dict[str, str] | None:
            planes = ready(server.url)[1]["planes"]
            lagging = all(planes[p]["status"] == "degraded" for p in ("memory", "affect"))
            return planes["memory"] if lagging else None

        memory = poll(degraded, 30, "health to say the replica lags")
        assert "replication lags" in memory["reason"]
        assert "RATATOSKR_REPLICA_MAX_LAG" in memory["reason"]
        status, body = ready(server.url)
        assert status == 200 and body["ready"]  # degraded still serves
        lags = _lag_samples(server)
        assert set(lags) == {"memory", "affect"} and min(lags.values()) > 2
        stats = admin(server.root, server.env, "stats", "--json")
        assert stats.returncode == 0, stats.stderr
        files = orjson.loads(stats.stdout)["replication"]["files"]
        assert {files[n]["status"] for n in ("memory", "affect", "jti")} == {"degraded"}
        shown = admin(server.root, server.env, "stats")
        assert "replication" in shown.stdout and "degraded" in shown.stdout
    finally:
        os.kill(pid, signal.SIGCONT)
    poll(
        lambda: ready(server.url)[1]["planes"]["memory"]["status"] == "ok" or None,
        30,
        "health to recover once Litestream syncs again",
    )
    metrics = httpx.get(server.url + "/metrics", timeout=10).text
    assert URL_SECRET not in metrics and ENV_SECRET not in metrics


def test_a_supervisor_killed_outright_is_logged_and_started_again(
    replicating: Server,
) -> None:
    server = replicating
    first = _state(server)
    assert first.supervisor_pid is not None
    os.kill(first.supervisor_pid, signal.SIGKILL)  # its Litestream goes with it

    def again() -> ReplicaState | None:
        state = _state(server)
        fresh = state.supervisor_pid not in (None, first.supervisor_pid)
        return state if fresh and state.litestream_running else None

    poll(again, 30, "the master to start the supervisor again")
    lines = [
        line for line in server.log_lines() if line["event"].startswith("replication supervisor")
    ]
    assert lines and lines[0]["level"] == "error"
    assert lines[0]["event"] == "replication supervisor exited; starting it again"
    written = time.time()
    ok(upsert(server.url, [chunk("after-the-supervisor")], "after-the-supervisor"))
    poll(
        lambda: (_state(server).last_sync_at or 0) > written or None,
        30,
        "the replica to take a write made after the restart",
    )
    assert server.terminate() == 0
    assert URL_SECRET not in server.output() and ENV_SECRET not in server.output()


def test_a_replica_emptied_under_the_server_is_noticed_and_written_again(
    replicating: Server, tmp_path: Path
) -> None:
    """Litestream goes on adding changes to an emptied replica, so its lag stays small, but
    nothing there could start a restore until it writes a snapshot again."""
    server = replicating

    def snapshots() -> bool | None:
        done = {
            line.get("plane")
            for line in server.log_lines()
            if line["event"] == "litestream: snapshot complete"
        }
        return done >= {"memory", "affect", "jti"} or None

    poll(snapshots, 30, "Litestream's first snapshots")
    first = _state(server)
    shutil.rmtree(tmp_path / "replica")
    ok(upsert(server.url, [chunk("after-the-wipe")], "after-the-wipe"))

    def noticed() -> dict[str, object] | None:
        found = [line for line in server.log_lines() if "nothing to restore" in line["event"]]
        return found[0] if found else None

    line = poll(noticed, 60, "the supervisor to find the replica empty")
    assert line["level"] == "error" and "memory" in str(line["plane"])

    def restorable_again() -> ReplicaState | None:
        state = _state(server)
        again = state.restorable and state.restarts > first.restarts
        return state if again else None

    poll(restorable_again, 60, "a new snapshot on the replica")
    assert ready(server.url)[1]["planes"]["memory"]["status"] == "ok"
    scratch = tmp_path / "drill"
    drill = admin(
        server.root,
        server.env,
        "restore",
        "--memory-db",
        str(scratch / "memory.db"),
        "--affect-db",
        str(scratch / "affect.db"),
        "--json",
    )
    assert drill.returncode == 0, drill.stderr
    assert orjson.loads(drill.stdout)["check"]["ok"]
    assert URL_SECRET not in server.output() and ENV_SECRET not in server.output()


def test_without_a_replica_url_nothing_replicates(server: Server) -> None:
    assert server.process is not None
    assert len(children_of(server.process.pid)) == server.workers  # workers only
    ok(upsert(server.url, [chunk("plain")], "plain"))
    assert not list((server.root / "data").glob("*-replica.json"))
    assert not list((server.root / "data").glob(".*-litestream"))
    assert _lag_samples(server) == {}
    assert ready(server.url)[1]["planes"]["memory"]["status"] == "ok"


def test_a_killed_supervisors_private_config_is_swept_by_the_next() -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{gone.stdout.strip()}-"))
    live = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
    (dead / "litestream.yml").write_text("{}")
    try:
        sweep_stale_workdirs()
        assert not dead.exists() and live.exists()
    finally:
        shutil.rmtree(dead, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)
