"""The storage backends the store suites run against, each behind one small adapter.

A suite that takes the ``backend`` fixture (``conftest.py``) runs once per backend
registered in ``BACKENDS``. Each backend knows how to make a fresh,
empty place for one plane's store, how to open a store there, and how to count every row a
plane keeps (so "a refused call touched nothing" is checked on the backend's own tables).
``RATATOSKR_TEST_BACKENDS=sqlite`` (a comma-separated list) narrows the run.
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from ratatoskr.affect.postgres.store import read_secret
from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops.locations import open_affect, open_memory
from ratatoskr.postgres.database import PgSettings
from ratatoskr.sqlite.cursors import load_secret
from tests.pgserver import PostgresServer

Clock = Callable[[], float]


@dataclass(frozen=True)
class Backend:
    """One backend: ``fresh(tmp, plane)`` gives a location no store has used yet."""

    name: str
    fresh: Callable[[Path, str], str]
    open_memory: Callable[..., Any]
    open_affect: Callable[..., Any]
    footprint: Callable[[Any], dict[str, int]]
    cursor_secret: Callable[[Any], bytes]
    # whether a per-process search mirror exists to be turned off (``mirror_bytes=0``)
    has_mirror: bool = True
    # the backend whose affect store this one's is, setting for setting (a memory-only
    # setting differs): the affect suites run that one and leave this out
    affect_as: str | None = None

    def memory(
        self,
        location: str,
        *,
        embedding_dim: int,
        clock: Clock = time.time,
        mirror_bytes: int | None = None,
    ) -> Any:
        return self.open_memory(
            location, embedding_dim=embedding_dim, clock=clock, mirror_bytes=mirror_bytes
        )

    def affect(self, location: str, *, clock: Clock = time.time) -> Any:
        return self.open_affect(location, clock=clock)


def _sqlite_fresh(tmp: Path, plane: str) -> str:
    return str(tmp / f"{plane}.db")


def _sqlite_footprint(store: Any) -> dict[str, int]:
    """Rows in every table of the store's file (vec0's shadow tables and the meta table,
    which no call writes, left out)."""
    with store.db.read() as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT GLOB 'sqlite_*' AND name NOT GLOB 'memory_vec_*' "
                "AND name != 'ratatoskr_meta'"
            ).fetchall()
        ]
        return {
            t: int(conn.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0]) for t in tables
        }


def _sqlite_cursor_secret(store: Any) -> bytes:
    """The key the affect store signs cursors with (the reference store is given the same,
    so both hand out the same cursors)."""
    return load_secret(store.db)


SQLITE = Backend(
    name="sqlite",
    fresh=_sqlite_fresh,
    open_memory=open_memory_store,
    open_affect=open_affect_store,
    footprint=_sqlite_footprint,
    cursor_secret=_sqlite_cursor_secret,
)


# -- PostgreSQL: one server per test session, a fresh schema per store -------------------

TEST_DATABASE = "ratatoskr_test"
_pg_lock = threading.Lock()
_pg: dict[str, Any] = {}
_schemas = itertools.count()


def postgres_server() -> PostgresServer:
    """The session's PostgreSQL (``tests/pgserver.py``), started on first use, stopped at
    exit; ``TEST_DATABASE`` in it has pgvector installed."""
    with _pg_lock:
        if "server" not in _pg:
            server = PostgresServer().start()
            atexit.register(server.stop)
            server.create_database(TEST_DATABASE)
            _pg["server"] = server
            _pg["admin"] = psycopg.connect(server.dsn(TEST_DATABASE), autocommit=True)
        running: PostgresServer = _pg["server"]
        return running


def stop_postgres() -> None:
    with _pg_lock:
        admin = _pg.pop("admin", None)
        if admin is not None:
            admin.close()
        server = _pg.pop("server", None)
    if server is not None:
        server.stop()


def postgres_schema(prefix: str = "t") -> str:
    """A URL for a fresh, empty schema of the session's test database (a schema is made in
    about a millisecond, where a database takes a hundred)."""
    server = postgres_server()
    name = f"{prefix}_{os.getpid()}_{next(_schemas)}"
    with _pg_lock:
        _pg["admin"].execute(f'CREATE SCHEMA "{name}"')
    return server.url(TEST_DATABASE, schema=name)


def _pg_fresh(tmp: Path, plane: str) -> str:
    return postgres_schema(plane)


def _pg_footprint(store: Any) -> dict[str, int]:
    """Rows in every table of the store's schema, its meta table and the schema versions
    (which no call writes) left out."""

    def count(conn: Any) -> dict[str, int]:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename NOT LIKE '%%\\_meta' AND tablename NOT LIKE 'ratatoskr\\_%%'"
            ).fetchall()
        ]
        return {t: int(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]) for t in tables}

    result: dict[str, int] = store.db.read(count)
    return result


POSTGRESQL = Backend(
    name="postgresql",
    fresh=_pg_fresh,
    open_memory=lambda location, **kw: open_memory(location, **kw),
    open_affect=lambda location, **kw: open_affect(location, **kw),
    footprint=_pg_footprint,
    cursor_secret=lambda store: read_secret(store.db),
    has_mirror=False,
)

# the memory plane's chunks hash-partitioned by tenant (RATATOSKR_PG_TENANT_PARTITIONS)
PARTITIONED = PgSettings(tenant_partitions=4)
POSTGRESQL_PARTITIONED = Backend(
    name="postgresql-partitioned",
    fresh=_pg_fresh,
    open_memory=lambda location, **kw: open_memory(location, pool=PARTITIONED, **kw),
    open_affect=lambda location, **kw: open_affect(location, pool=PARTITIONED, **kw),
    footprint=_pg_footprint,
    cursor_secret=lambda store: read_secret(store.db),
    has_mirror=False,
    affect_as="postgresql",  # the affect plane partitions nothing
)

BACKENDS: dict[str, Backend] = {
    "sqlite": SQLITE,
    "postgresql": POSTGRESQL,
    "postgresql-partitioned": POSTGRESQL_PARTITIONED,
}


def serve_env(name: str, *, pg_options: str = "") -> dict[str, str]:
    """The settings that put both planes of a ``ratatoskr serve`` on backend ``name``
    (files in the server's root for SQLite, the default); ``pg_options`` adds PostgreSQL
    session settings (``-clock_timeout=100``) to the URL."""
    if name == "sqlite":
        return {}
    url = postgres_schema("serve")
    if pg_options:
        url = url.replace("options=", "options=" + quote(pg_options + " ", safe=""), 1)
    env = {"RATATOSKR_MEMORY_DB": url, "RATATOSKR_AFFECT_DB": url}
    if name == "postgresql-partitioned":
        env["RATATOSKR_PG_TENANT_PARTITIONS"] = str(PARTITIONED.tenant_partitions)
    return env


def selected() -> list[str]:
    """The backends this run covers: every registered one unless the environment narrows it."""
    wanted = os.environ.get("RATATOSKR_TEST_BACKENDS")
    if not wanted:
        return list(BACKENDS)
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown test backend(s): {', '.join(unknown)}")
    return names


def selected_for_affect() -> list[str]:
    """The selected backends whose affect stores differ: one whose affect store is another
    selected one's (``Backend.affect_as``) would run the same tests on the same tables."""
    names = selected()
    return [n for n in names if BACKENDS[n].affect_as not in names]
