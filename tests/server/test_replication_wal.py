"""The WAL stays bounded while Litestream cannot run (the replica unreachable).

With replication on, ratatoskr runs no checkpoint and Litestream runs them all. A replica
nothing listens on makes Litestream exit at every start, so the supervisor checkpoints each
file whose WAL is past the bound (``RATATOSKR_REPLICA_WAL_MAX_MB``) while Litestream is down.
A real server, supervisor and Litestream binary throughout.
"""

from __future__ import annotations

from pathlib import Path

from ratatoskr.sqlite.replica import read_state
from tests.reliability.common import chunk, upsert
from tests.server.harness import Server, free_port, ok, poll

BOUND_MB = 1


def _wal(server: Server) -> int:
    path = server.root / "data" / "memory.db-wal"
    return path.stat().st_size if path.exists() else 0


def test_an_unreachable_replica_keeps_the_wal_under_its_bound(tmp_path: Path) -> None:
    closed = free_port()  # nothing listens on it: Litestream exits at every start
    env = {
        "RATATOSKR_REPLICA_URL": f"sftp://user:pw-secret-4c1e@127.0.0.1:{closed}/replica",
        "RATATOSKR_REPLICA_WAL_MAX_MB": str(BOUND_MB),
    }
    server = Server(tmp_path, env=env)
    try:
        server.start()
        memory = str(tmp_path / "data" / "memory.db")
        poll(
            lambda: (s := read_state(memory)) is not None and s.restarts >= 1 or None,
            60,
            "Litestream to fail at least once",
        )
        bound = BOUND_MB * 1024 * 1024
        before = 0
        for i in range(400):  # each upsert adds a few 64 KiB pages to the memory WAL
            ok(upsert(server.url, [chunk(f"c{i}", "y" * 2000)], f"k{i}"))
            before = max(before, _wal(server))
            if before > 2 * bound:
                break
        assert before > bound, f"the WAL never passed the bound ({before} bytes)"

        def truncated() -> int | None:
            size = _wal(server)
            return size if size < bound else None

        after = poll(truncated, 60, "the supervisor to truncate the memory WAL")
        print(f"memory WAL: {before} bytes at most, then {after}")

        def logged() -> list[dict[str, object]] | None:
            found = [
                line
                for line in server.log_lines()
                if line["event"].startswith("wal checkpointed while litestream is down")
                and line.get("plane") == "memory"
            ]
            return found or None

        lines = poll(logged, 30, "the checkpoint to be logged")
        assert int(str(lines[0]["wal_bytes_before"])) > bound
        assert int(str(lines[0]["wal_bytes_after"])) < bound
        assert lines[0]["wal_max_bytes"] == bound
        assert "pw-secret-4c1e" not in server.output()
        # the server went on serving throughout; a write after the truncation still lands
        ok(upsert(server.url, [chunk("after", "z")], "after"))
        assert server.terminate() == 0
    finally:
        server.kill()
