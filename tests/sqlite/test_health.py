"""Health names the durability mode a file's writes have, in ``ok`` and ``degraded`` alike."""

from __future__ import annotations

from pathlib import Path

from ratatoskr.affect.store import open_affect_store
from ratatoskr.sqlite.database import DatabaseSettings, WriteFailure


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
