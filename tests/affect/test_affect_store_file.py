"""The affect store's file: schema, refusal of foreign files, health, atomicity on disk."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from ratatoskr.affect.store import RatatoskrAffectStore, open_affect_store
from ratatoskr.core.errors import EventConflict, RevisionMismatch
from ratatoskr.memory.store import open_memory_store
from ratatoskr.sqlite.database import SchemaError
from tests.affect.helpers import append, event, put, state


def test_schema_has_indexed_axis_columns_and_event_time_index(
    sqlite_store: RatatoskrAffectStore,
) -> None:
    with sqlite_store.db.read() as conn:
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        version = conn.execute("PRAGMA user_version").fetchall()[0][0]
    assert version == 1
    assert {"affect_events_at", "affect_states_tenant", "affect_events_end_user"} <= indexes


def test_scoped_event_read_uses_an_index(sqlite_store: RatatoskrAffectStore) -> None:
    with sqlite_store.db.read() as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM affect_events WHERE tenant = ? "
            "ORDER BY at_us, id LIMIT 5",
            ("t1",),
        ).fetchall()
    assert any("INDEX" in str(row[-1]) for row in plan)


def test_memory_file_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "memory.db")
    open_memory_store(path, embedding_dim=4).close()
    with pytest.raises(SchemaError):
        open_affect_store(path)


def test_newer_schema_is_refused_and_health_goes_down(tmp_path: Path) -> None:
    path = str(tmp_path / "affect.db")
    store = open_affect_store(path)
    conn = apsw.Connection(path)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    assert store.health()["status"] == "down"
    store.close()
    with pytest.raises(SchemaError):
        open_affect_store(path)


def test_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        open_affect_store(str(tmp_path / "nope" / "affect.db"))


def test_health_down_after_close(sqlite_store: RatatoskrAffectStore) -> None:
    sqlite_store.close()
    assert sqlite_store.health() == {"status": "down", "reason": "database cannot be read"}


def test_rolled_back_batches_leave_the_file_unchanged(
    sqlite_store: RatatoskrAffectStore, tmp_path: Path
) -> None:
    put(sqlite_store, [state("a")], "k1")
    append(sqlite_store, [event("e", "2026-01-01T00:00:00Z")], "k2")
    with pytest.raises(RevisionMismatch):
        put(sqlite_store, [state("b"), state("a")], "k3", expected_revisions={"a": 0})
    with pytest.raises(EventConflict):
        append(
            sqlite_store,
            [event("f", "2026-01-01T00:00:00Z"), event("e", "2027-01-01T00:00:00Z")],
            "k4",
        )
    other = open_affect_store(str(tmp_path / "affect.db"))  # a fresh connection sees the file
    assert [r["id"] for r in other.list(limit=10)["records"]] == ["a"]
    assert [e["id"] for e in other.read_events(limit=10)["events"]] == ["e"]
    with other.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM affect_idempotency").fetchall()[0][0] == 2
    other.close()
