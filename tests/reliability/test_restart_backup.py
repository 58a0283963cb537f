"""SIGTERM under load loses nothing acknowledged; a backup taken while
writes run restores into a fresh server with every record acknowledged before it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.reliability.common import revisions, running
from tests.reliability.load import Writer
from tests.server.harness import Server, clean_env, poll


def test_sigterm_under_load_drains_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    server = Server(tmp_path)
    try:
        server.start()
        writers = [
            Writer(server.url, plane, f"{plane}{n}").start()
            for plane in ("memory", "affect")
            for n in range(2)
        ]
        poll(lambda: all(w.calls >= 10 for w in writers) or None, 30, "load to build up")
        assert server.terminate(timeout=40) == 0  # within gunicorn's 30 s graceful timeout
        for w in writers:
            w.join()
        assert [b for w in writers for b in w.bad] == []  # never a 500 or a 4xx
        assert "Traceback" not in server.output()
    finally:
        server.kill()

    with running(tmp_path) as again:
        for w in writers:
            acked = w.certain()
            assert acked, f"{w.name} had nothing acknowledged"
            found = revisions(again.url, w.plane, list(acked))
            assert found == acked, f"{w.name}: lost or changed after the restart"


def test_a_backup_taken_under_writes_restores_every_acknowledged_record(tmp_path: Path) -> None:
    live, fresh, copies = tmp_path / "live", tmp_path / "fresh", tmp_path / "backup"
    live.mkdir()
    with running(live) as server:
        writers = [
            Writer(server.url, "memory", "m").start(),
            Writer(server.url, "affect", "a").start(),
        ]
        try:
            poll(lambda: all(w.calls >= 20 for w in writers) or None, 30, "writes to build up")
            before = [w.certain() for w in writers]
            counts = [w.calls for w in writers]
            env = clean_env(
                {
                    "RATATOSKR_MEMORY_DB": str(live / "data" / "memory.db"),
                    "RATATOSKR_AFFECT_DB": str(live / "data" / "affect.db"),
                }
            )
            cmd = [sys.executable, "-m", "ratatoskr", "admin", "backup", "--to", str(copies)]
            done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, timeout=60)
            assert done.returncode == 0, done.stderr.decode(errors="replace")
            # the writers went on during the backup
            assert all(w.calls > c for w, c in zip(writers, counts, strict=True))
        finally:
            for w in writers:
                w.join()
        assert [b for w in writers for b in w.bad] == []

    (fresh / "data").mkdir(parents=True)
    for name in ("memory.db", "affect.db"):
        shutil.copy2(copies / name, fresh / "data" / name)
    with running(fresh) as restored:
        for writer, acked in zip(writers, before, strict=True):
            found = revisions(restored.url, writer.plane, list(acked))
            missing = set(acked) - set(found)
            assert not missing, f"{writer.plane}: {len(missing)} acknowledged record(s) missing"
            older = [k for k, rev in acked.items() if found[k] < rev]
            assert not older, f"{writer.plane}: older revisions restored for {older[:5]}"
