"""Where a plane lives: a file path (SQLite) or a postgresql:// URL, chosen by its setting.

A URL is taken as a URL (never as a file named after it), any other URL-like value is
refused at start naming the variable, and a password never shows in a message or a log.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from ratatoskr.affect.postgres.store import PgAffectStore
from ratatoskr.core.context import CallContext
from ratatoskr.memory.postgres.store import PgMemoryStore
from ratatoskr.ops.locations import open_affect, open_ledger, open_memory
from ratatoskr.postgres.url import masked
from ratatoskr.server.settings import SettingsError, load_settings
from tests.backends import POSTGRESQL, postgres_schema
from tests.server.harness import KEY, clean_env, free_port

ENV = {"RATATOSKR_HEIMDALL_KEY": KEY}


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://ratatoskr:s3cret@db.internal:5432/worldtree",
        "postgres://ratatoskr@/worldtree?host=/run/postgresql&sslmode=disable",
        "postgresql:///worldtree?host=%2Fvar%2Frun%2Fpostgresql",
        "postgresql://ratatoskr@db.internal/worldtree?sslmode=verify-full",
    ],
)
def test_a_postgresql_url_is_taken_as_a_url(url: str, tmp_path: Path) -> None:
    settings = load_settings({**ENV, "RATATOSKR_MEMORY_DB": url}, cwd=tmp_path)
    assert settings.memory_db == url
    assert not [p for p in tmp_path.rglob("*") if "postgres" in p.name]  # no file or folder
    assert "s3cret" not in repr(settings)


def test_both_planes_may_name_one_database_but_not_one_file(tmp_path: Path) -> None:
    url = "postgresql://ratatoskr@db.internal/worldtree"
    both = load_settings(
        {**ENV, "RATATOSKR_MEMORY_DB": url, "RATATOSKR_AFFECT_DB": url}, cwd=tmp_path
    )
    assert both.memory_db == both.affect_db == url
    with pytest.raises(SettingsError, match="different files"):
        load_settings(
            {**ENV, "RATATOSKR_MEMORY_DB": "x.db", "RATATOSKR_AFFECT_DB": "x.db"}, cwd=tmp_path
        )


@pytest.mark.parametrize(
    "value",
    ["postgress://u:s3cret@h/db", "mysql://u:s3cret@h/db", "sqlite:memory.db", "file:///x.db"],
)
def test_any_other_url_is_refused_naming_the_variable(value: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings({**ENV, "RATATOSKR_AFFECT_DB": value}, cwd=tmp_path)
    message = str(info.value)
    assert message.startswith("RATATOSKR_AFFECT_DB:")
    assert "s3cret" not in message
    assert not [p for p in tmp_path.rglob("*") if ":" in p.name]


def test_a_url_is_named_with_its_password_masked() -> None:
    assert masked("postgresql://u:s3cret@h:5432/db?sslmode=require") == (
        "postgresql://u:***@h:5432/db?sslmode=require"
    )
    assert masked("postgres://u@h/db?password=s3cret&host=/run") == (
        "postgres://u@h/db?password=***&host=/run"
    )
    assert masked("postgresql://h/db") == "postgresql://h/db"
    assert masked(
        "postgresql://u@h/db?sslpassword=k3y&oauth_client_secret=c5&Pass%77ord=p&sslmode=require"
    ) == (
        "postgresql://u@h/db?sslpassword=***&oauth_client_secret=***&Pass%77ord=***&sslmode=require"
    )


def test_serve_refuses_an_unreachable_database_naming_the_variable(tmp_path: Path) -> None:
    url = f"postgresql://ratatoskr:s3cret@127.0.0.1:{free_port()}/worldtree?connect_timeout=2"
    env = clean_env(
        {
            **ENV,
            "RATATOSKR_MEMORY_DB": url,
            "RATATOSKR_AFFECT_DB": url,
            "RATATOSKR_PG_POOL_TIMEOUT": "2",
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "ratatoskr", "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "RATATOSKR_MEMORY_DB" in err and "cannot be reached" in err
    assert "s3cret" not in err + done.stdout.decode()
    assert not (tmp_path / "postgresql:").exists()


def test_both_planes_and_the_ledger_share_one_database() -> None:
    """Their tables do not collide: each plane counts only its own rows."""
    url = postgres_schema("shared")
    memory = cast(PgMemoryStore, open_memory(url, embedding_dim=4))  # a postgresql:// URL
    affect = cast(PgAffectStore, open_affect(url))
    ledger = open_ledger(url)
    try:
        ctx = CallContext(actor="a")
        memory.upsert_many([{"id": "x", "embedding": [1, 0, 0, 0]}], idempotency_key="k", ctx=ctx)
        affect.put_many([{"id": "x", "mood": 1}], idempotency_key="k", ctx=ctx)
        assert ledger.claim("jti-1", 4e9) and not ledger.claim("jti-1", 4e9)
        assert POSTGRESQL.footprint(memory) == {
            "memory_chunks": 1,
            "memory_idempotency": 1,
            "affect_states": 1,
            "affect_events": 0,
            "affect_idempotency": 1,
        }
        record = memory.get("x")
        assert record is not None and record["embedding"] == [1, 0, 0, 0]
        assert affect.get("x") == {"id": "x", "mood": 1, "revision": 1}
    finally:
        for closer in (memory, affect, ledger):
            closer.close()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RATATOSKR_PG_POOL_MAX", "0"),
        ("RATATOSKR_PG_POOL_TIMEOUT", "soon"),
        ("RATATOSKR_PG_TENANT_PARTITIONS", "1"),
        ("RATATOSKR_PG_TENANT_PARTITIONS", "5000"),
    ],
)
def test_postgresql_settings_are_checked_at_start(name: str, value: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings({**ENV, name: value}, cwd=tmp_path)


def test_litestream_replication_is_refused_for_a_plane_on_postgresql(tmp_path: Path) -> None:
    env = {
        **ENV,
        "RATATOSKR_MEMORY_DB": "postgresql://ratatoskr@db.internal/worldtree",
        "RATATOSKR_REPLICA_URL": f"file://{tmp_path}/replica",
    }
    with pytest.raises(SettingsError, match="RATATOSKR_REPLICA_URL"):
        load_settings(env, cwd=tmp_path)
