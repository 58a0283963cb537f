"""Health names the durability mode a file's writes have, in ``ok`` and ``degraded`` alike."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ratatoskr.affect.store import open_affect_store
from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import Unavailable
from ratatoskr.sqlite.database import DatabaseSettings, WriteFailure
from ratatoskr.sqlite.upkeep import checkpoint_truncate

CTX = CallContext(actor="health-test")


def test_ok_names_the_mode_in_force(tmp_path: Path) -> None:
    full = open_affect_store(str(tmp_path / "full.db"))
    normal = open_affect_store(
        str(tmp_path / "normal.db"), settings=DatabaseSettings(synchronous="NORMAL")
    )
    try:
        assert full.health() == {
            "status": "ok",
            "reason": "durability FULL: every acknowledged write is on disk",
        }
        assert normal.health() == {
            "status": "ok",
            "reason": "durability NORMAL: a power loss may drop the last acknowledged writes",
        }
    finally:
        full.close()
        normal.close()


def test_degraded_keeps_its_reason_first_and_names_the_mode(tmp_path: Path) -> None:
    store = open_affect_store(str(tmp_path / "a.db"))
    try:
        store.db.last_write_failure = WriteFailure("the disk holding the database is full", 0.0)
        health = store.health()
        assert health["status"] == "degraded"
        assert health["reason"] == (
            "a write failed: the disk holding the database is full; "
            "durability FULL: every acknowledged write is on disk"
        )
    finally:
        store.close()


def test_a_write_that_finds_the_file_damaged_makes_it_down(tmp_path: Path) -> None:
    """A damaged file (here every other page past the first few overwritten) fails the
    write that reaches it: the plane is ``down`` (it cannot be written), not ``degraded``
    as a full disk is, until a write succeeds again."""
    path = tmp_path / "a.db"
    store = open_affect_store(str(path))
    filler = "f" * 2000
    states = [{"id": f"s{i:05d}", "scope": {"tenant": "t"}, "note": filler} for i in range(400)]
    store.put_many(states, idempotency_key="fill", ctx=CTX)
    assert checkpoint_truncate(store.db)  # the pages in the file itself, not the WAL
    page = int(store.db.connection().execute("PRAGMA page_size").fetchall()[0][0])
    store.close()
    with open(path, "r+b") as raw:
        size = raw.seek(0, 2)
        for at in range(8 * page, size, 2 * page):
            raw.seek(at)
            raw.write(b"\xa5" * page)
    store = open_affect_store(str(path))  # a worker starting on the damaged file
    try:
        again = [{**s, "note": "rewritten"} for s in states]
        with pytest.raises(Unavailable, match="damaged"):
            store.put_many(again, idempotency_key="again", ctx=CTX)
        failure = store.db.last_write_failure
        assert failure is not None and failure.unusable
        health = store.health()
        assert health["status"] == "down", health
    finally:
        store.close()


def test_a_failed_write_that_says_the_file_is_unusable_is_down_even_if_reads_work(
    tmp_path: Path,
) -> None:
    """The pages health reads may be intact (or cached) while the write found damage: the
    write's failure decides, as a full disk's decides ``degraded``."""
    store = open_affect_store(str(tmp_path / "a.db"))
    try:
        reason = "the database cannot be read or written"
        store.db.last_write_failure = WriteFailure(reason, 0.0, unusable=True)
        assert store.health() == {"status": "down", "reason": f"a write failed: {reason}"}
    finally:
        store.close()


def test_a_file_made_unwritable_under_the_store_is_degraded_while_it_still_serves(
    tmp_path: Path,
) -> None:
    """``chattr +i`` stands in for a ``chmod`` under a non-root server (root's ``os.access``
    ignores mode bits): the open file keeps serving, a restart would refuse it."""
    path = tmp_path / "a.db"
    store = open_affect_store(str(path))
    try:
        subprocess.run(["chattr", "+i", str(path)], check=True)
        try:
            health = store.health()
            assert health["status"] == "degraded"
            assert "a restart will refuse it" in health["reason"]
            assert "durability FULL" in health["reason"]
            done = store.put_many(
                [{"id": "s", "scope": {"tenant": "t"}}], idempotency_key="k", ctx=CTX
            )
            assert done["written"] == 1  # still served, as health says
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    finally:
        store.close()


def test_a_write_to_a_file_that_became_read_only_says_so(tmp_path: Path) -> None:
    """The reason names what is wrong: a read-only file, not "cannot be read or written"
    (it can be read)."""
    path = tmp_path / "a.db"
    store = open_affect_store(str(path))
    store.put_many([{"id": "s", "scope": {"tenant": "t"}}], idempotency_key="k", ctx=CTX)
    store.close()
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        store = open_affect_store(str(path))
        try:
            with pytest.raises(Unavailable, match="the database is read-only"):
                store.put_many(
                    [{"id": "t", "scope": {"tenant": "t"}}], idempotency_key="k2", ctx=CTX
                )
            assert store.get("s", ctx=CTX) is not None  # it can be read
        finally:
            store.close()
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
