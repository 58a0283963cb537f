"""Erasing a subject from a replicated deployment, as docs/operations.md says to: stop the
server, erase, remove Litestream's local files and the replica's history, start again.
Afterwards no byte of the subject is on the data disk or in the replica, and replication
goes on (a restore holds a write made after the restart)."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from tests.reliability.common import chunk, put, state, upsert
from tests.reliability.replica_drill import admin, replica_env, wait_replicated
from tests.server.harness import Server, ok, poll

MARKER = "erase-replicated-7c51e"
SUBJECT = "subject-5d0c3"
PLANES = ("memory", "affect")


def _holding(*roots: Path) -> list[str]:
    """Files under ``roots`` whose bytes hold the marker or the subject's id."""
    found = []
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue  # Litestream's temporary file, renamed meanwhile
            if MARKER.encode() in data or SUBJECT.encode() in data:
                found.append(str(path.relative_to(root.parent)))
    return found


def test_an_erase_by_the_documented_steps_leaves_no_copy_and_replication_goes_on(
    tmp_path: Path,
) -> None:
    replica = tmp_path / "replica"
    env = replica_env(replica, 200)
    who = {"tenant": "acme", "end_user": SUBJECT}
    server = Server(tmp_path, workers=1, env=env)
    try:
        server.start()
        wait_replicated(tmp_path)
        ok(upsert(server.url, [chunk(f"z{i}", MARKER, scope=who) for i in range(3)], "z"))
        ok(put(server.url, [state("zs", note=MARKER, scope=who)], "zs"))
        ok(upsert(server.url, [chunk("kept", "someone else")], "kept"))

        def shipped() -> bool | None:  # the writes reached the replica
            return bool(_holding(replica)) or None

        poll(shipped, 30, "the subject's writes to reach the replica")
        assert server.terminate() == 0
    finally:
        server.kill()

    data = tmp_path / "data"
    erased = admin(tmp_path, server.env, "erase", "--scope", f"end_user={SUBJECT}", "--yes")
    assert erased.returncode == 0, erased.stderr
    assert "Litestream's local files" in erased.stderr  # what is left to do, said
    for plane in PLANES:
        shutil.rmtree(data / f".{plane}.db-litestream")
        shutil.rmtree(replica / plane)
    assert _holding(data, replica) == []

    again = Server(tmp_path, workers=1, env=env)
    again.port, again.url = server.port, server.url
    try:
        again.start()
        wait_replicated(tmp_path)
        ok(upsert(again.url, [chunk("after", "written after the erase")], "after"))
        assert again.terminate() == 0  # Litestream syncs on its way out
    finally:
        again.kill()
    assert _holding(data, replica) == []

    shutil.rmtree(data)  # the restore brings back what the replica holds now
    restored = admin(tmp_path, server.env, "restore")
    assert restored.returncode == 0, restored.stderr
    got = admin(tmp_path, server.env, "get", "memory", "after", "kept", "z0", "--json")
    assert got.returncode == 0, got.stderr
    assert [hit["id"] for hit in orjson.loads(got.stdout)] == ["after", "kept"]
    assert _holding(data) == []
