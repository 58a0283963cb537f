"""What replication changes in the SQLite layer: no checkpoints of ratatoskr's own while
Litestream replicates a file, a health that says when the replica lags, and the URL
helpers that keep its credentials out of sight."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from ratatoskr.server.litestream_supervisor import parse_time
from ratatoskr.server.replication import litestream_config, page_size_of, replicated_files
from ratatoskr.sqlite.database import DatabaseSettings
from ratatoskr.sqlite.health import DURABILITY
from ratatoskr.sqlite.litestream_run import litestream_env
from ratatoskr.sqlite.replica import (
    ReplicaState,
    check_replica_url,
    redact_url,
    replica_lag,
    replica_url_for,
    scrub,
    url_secrets,
    write_state,
)
from tests.sqlite.test_checkpointer import open_db, write_rows


def test_while_replicated_the_file_gets_no_checkpoint_of_ours(tmp_path: Path) -> None:
    own = open_db(tmp_path / "own.db")
    assert own.checkpointer is not None
    own.close()
    replicated = open_db(tmp_path / "replicated.db", app_checkpoints=False)
    try:
        assert replicated.checkpointer is None
        conn = replicated.connection()
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchall()[0][0] == 0
        write_rows(replicated, 0, 1500)  # past SQLite's 1,000-page autocheckpoint
        wal = os.path.getsize(str(tmp_path / "replicated.db") + "-wal")
        assert wal > 1500 * 8192  # every frame still in the WAL: Litestream checkpoints
    finally:
        replicated.close()


def test_the_checkpoint_default_follows_the_replica_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RATATOSKR_REPLICA_URL", raising=False)
    assert DatabaseSettings().app_checkpoints is True
    monkeypatch.setenv("RATATOSKR_REPLICA_URL", "file:///backups/ratatoskr")
    assert DatabaseSettings().app_checkpoints is False  # admin commands on the same files


def test_health_degrades_when_the_replica_lags_or_nobody_reports(tmp_path: Path) -> None:
    path = str(tmp_path / "affect.db")
    settings = DatabaseSettings(app_checkpoints=False, replica_max_lag=5)
    store = open_affect_store(path, settings=settings)
    try:
        quiet = store.health()
        assert quiet["status"] == "degraded" and "not reported" in quiet["reason"]
        now = time.time()
        fresh = ReplicaState(
            replica="file:///r/affect", since=now, last_sync_at=now, updated_at=now
        )
        write_state(path, fresh)
        assert store.health() == {"status": "ok", "reason": DURABILITY["FULL"]}
        stale = ReplicaState(
            replica="file:///r/affect", since=now - 60, last_sync_at=now - 9, updated_at=now
        )
        write_state(path, stale)
        lagging = store.health()
        assert lagging["status"] == "degraded"
        assert "lags 9 s" in lagging["reason"] and "RATATOSKR_REPLICA_MAX_LAG" in lagging["reason"]
        assert path not in lagging["reason"]
        # synced a second ago, but the supervisor wrote that 30 s ago: it was killed
        silent = ReplicaState(
            replica="file:///r/affect", since=now - 60, last_sync_at=now - 1, updated_at=now - 30
        )
        write_state(path, silent)
        gone = store.health()
        assert (
            gone["status"] == "degraded" and "supervisor has not reported for 3" in gone["reason"]
        )
        # synced, but the replica was emptied since: nothing there could start a restore
        empty = ReplicaState(
            replica="file:///r/affect",
            since=now,
            last_sync_at=now,
            updated_at=now,
            restorable=False,
        )
        write_state(path, empty)
        emptied = store.health()
        assert emptied["status"] == "degraded" and "nothing to restore from" in emptied["reason"]
    finally:
        store.close()
    unreplicated = open_affect_store(str(tmp_path / "other.db"))
    assert unreplicated.health()["status"] == "ok"  # no setting: state files do not matter
    unreplicated.close()


def test_the_lag_counts_from_the_start_until_a_first_sync() -> None:
    state = ReplicaState(replica="s3://b/p/memory", since=100.0)
    assert state.lag(130.0) == 30.0
    state.last_sync_at = 125.0
    assert state.lag(130.0) == 5.0
    assert replica_lag("/nonexistent/memory.db") is None


@pytest.mark.parametrize(
    "url",
    [
        "",
        "ftp://host/zzmarker",
        "file://zzmarker/dir",
        "file:///?zzmarker",
        "file:/zzmarker/dir",  # replicates, but Litestream's restore takes it for a config
        "s3:///zzmarker",
        "s3://bucket/zzmarker and space",
        "/just/a/zzmarker",
    ],
)
def test_a_url_litestream_cannot_use_is_refused_without_quoting_it(url: str) -> None:
    with pytest.raises(ValueError, match="RATATOSKR_REPLICA_URL") as caught:
        check_replica_url(url)
    assert "zzmarker" not in str(caught.value)


def test_each_file_replicates_under_its_name_and_secrets_are_scrubbed() -> None:
    base = "sftp://backup:hunter22@vault.internal:2222/ratatoskr?key=abc123"
    assert replica_url_for(base, "memory").endswith("/ratatoskr/memory?key=abc123")
    assert replica_url_for("s3://bucket/prefix/", "jti") == "s3://bucket/prefix/jti"
    assert redact_url(base) == "sftp://vault.internal:2222/ratatoskr"
    secrets = url_secrets(base, {"AWS_SECRET_ACCESS_KEY": "aws-secret-value"})
    text = f"dial {base}: password hunter22 rejected (aws-secret-value, abc123)"
    cleaned = scrub(text, secrets)
    for secret in ("hunter22", "abc123", "aws-secret-value", base):
        assert secret not in cleaned


def test_litestream_times_parse_to_the_microsecond() -> None:
    assert parse_time("2026-12-01T09:28:19.175770673Z") == pytest.approx(1796117299.17577)
    assert parse_time("2026-12-01T09:28:19Z") == 1796117299.0
    assert parse_time(None) is None and parse_time("soon") is None


def test_the_config_leaves_checkpoints_to_litestream_with_bounds_of_ours(tmp_path: Path) -> None:
    memory = tmp_path / "memory.db"
    open_db(memory, page_size=65536).close()
    files = replicated_files(str(memory), str(tmp_path / "affect.db"))
    assert [f.name for f in files] == ["memory", "affect", "jti"]
    assert files[2].path == str(tmp_path / "memory.jti.db")
    config = litestream_config(files, "s3://bucket/p", "/tmp/x.sock", 2000, 5000)
    db = config["dbs"][0]
    assert page_size_of(str(memory)) == 65536
    assert db["truncate-page-n"] == 8000  # 500 MiB of 64 KiB pages
    assert config["dbs"][1]["truncate-page-n"] == 128000  # 4 KiB pages (no file yet)
    assert db["monitor-interval"] == db["replica"]["sync-interval"] == "1000ms"
    assert db["busy-timeout"] == "1000ms" and db["min-checkpoint-page-count"] == 1000
    assert db["replica"]["max-sync-ltx-files"] == 0
    assert db["replica"]["url"] == "s3://bucket/p/memory"
    assert config["socket"] == {"enabled": True, "path": "/tmp/x.sock", "permissions": 0o600}
    # RATATOSKR_REPLICA_WAL_MAX_MB lowered: the TRUNCATE bound follows, PASSIVE stays below it
    small = litestream_config(files, "s3://bucket/p", "/tmp/x.sock", 2000, 5000, 1 << 20)
    assert small["dbs"][0]["truncate-page-n"] == 16  # 1 MiB of 64 KiB pages
    assert small["dbs"][0]["min-checkpoint-page-count"] == 8
    assert small["dbs"][1]["truncate-page-n"] == 256
    assert small["dbs"][1]["min-checkpoint-page-count"] == 128


def test_a_memory_file_not_made_yet_is_bounded_in_the_pages_it_will_have(tmp_path: Path) -> None:
    """A bare gunicorn starts replication before a worker makes the files: the memory
    file's bound is still 500 MiB of the 64 KiB pages it is made with, not of 4 KiB ones
    (16 times the WAL before Litestream truncates it)."""
    files = replicated_files(str(tmp_path / "memory.db"), str(tmp_path / "affect.db"))
    config = litestream_config(files, "s3://bucket/p", "/tmp/x.sock", 2000, 5000)
    assert [db["truncate-page-n"] for db in config["dbs"]] == [8000, 128000, 128000]
    store = open_memory_store(str(tmp_path / "memory.db"), embedding_dim=8, mirror_bytes=0)
    store.close()
    assert page_size_of(str(tmp_path / "memory.db")) == 65536  # as assumed


def test_litestream_gets_neither_our_settings_nor_credentials_left_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RATATOSKR_HEIMDALL_KEY", "k" * 32)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "")  # compose passes unset as empty
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA-set")
    env = litestream_env()
    assert "RATATOSKR_HEIMDALL_KEY" not in env
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["AWS_ACCESS_KEY_ID"] == "AKIA-set"
