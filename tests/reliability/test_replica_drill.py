"""The disaster drill: lose the disk of a replicating server, restore, start, verify.

A server replicating to a ``file://`` replica takes writes from four clients on both planes;
the server, its replication supervisor and Litestream are SIGKILLed while the writes go on,
and the data directory is deleted. ``admin restore`` brings both planes and the jti ledger
back (and checks them), the server starts again on the restored files, and every write
acknowledged more than the sync interval before the kill is there with its revision.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import orjson

from tests.reliability.replica_drill import (
    AckLog,
    admin,
    found_revisions,
    kill_everything,
    replica_env,
    wait_replicated,
)
from tests.server.harness import Server, poll

SYNC_INTERVAL_MS = 500
WRITE_FOR = 2.5  # seconds of writes before the kill: several sync intervals


def test_a_restore_after_losing_the_disk_keeps_every_write_older_than_the_sync_interval(
    tmp_path: Path,
) -> None:
    env = replica_env(tmp_path / "replica", SYNC_INTERVAL_MS)
    server = Server(tmp_path, env=env)
    logs: list[AckLog] = []
    try:
        server.start()
        wait_replicated(tmp_path)
        logs = [
            AckLog(server.url, plane, f"{plane[0]}{n}").start()
            for plane in ("memory", "affect")
            for n in range(2)
        ]
        started = time.monotonic()
        poll(
            lambda: (
                time.monotonic() - started > WRITE_FOR
                and all(len(x.acks) > 5 for x in logs)
                or None
            ),
            60,
            "the clients to write for a while",
        )
        killed_at = kill_everything(server)
    finally:
        for log in logs:
            log.stop.set()
        server.kill()
    for log in logs:
        log.join()
        assert not log.bad, log.bad[:3]
    shutil.rmtree(tmp_path / "data")

    restored = admin(tmp_path, server.env, "restore", "--json")
    assert restored.returncode == 0, restored.stderr
    report = orjson.loads(restored.stdout)
    assert report["check"]["ok"], report["check"]
    assert set(report["files"]) == {"memory", "affect", "jti"}
    for info in report["files"].values():
        assert info["txid"] and info["bytes"] > 0 and info["replicated_at"]
    assert "distillate" not in restored.stdout  # sizes and positions, never content

    again = Server(tmp_path, env=env)
    try:
        again.start()
        found = found_revisions(again.url, logs)
    finally:
        again.kill()
    deadline = killed_at - SYNC_INTERVAL_MS / 1000
    for log in logs:
        expected = log.expected(before=deadline)
        assert expected, f"{log.name} had nothing acknowledged before the deadline"
        held = found[log.plane]
        missing = {k: (v, held.get(k)) for k, v in expected.items() if held.get(k, 0) < v}
        assert not missing, f"{log.name}: acknowledged writes lost: {list(missing.items())[:5]}"
        assert log.lost_seconds(held, killed_at) <= SYNC_INTERVAL_MS / 1000
    checked = admin(tmp_path, env, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
