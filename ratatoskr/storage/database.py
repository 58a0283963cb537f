"""Opening a plane's SQLite file: apsw, sqlite-vec, pragmas, migrations, transactions.

Every plane store owns one ``Database``. It hands out one connection per thread (SQLite
connections are cheap, and apsw releases the GIL while a statement runs, so readers in a
threadpool really run in parallel); ``:memory:`` shares a single connection under a lock.
Write transactions start with ``BEGIN IMMEDIATE``: a deferred BEGIN takes the write lock late
and fails with SQLITE_BUSY at once, whatever the busy timeout.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import apsw
import sqlite_vec

from ratatoskr.storage.filecheck import FileIdentity
from ratatoskr.wire.errors import Unavailable

SYNCHRONOUS_ENV = "RATATOSKR_SQLITE_SYNCHRONOUS"
SYNCHRONOUS_MODES = ("NORMAL", "FULL", "EXTRA")


class SchemaError(Exception):
    """The file cannot be opened as this plane's database (newer schema, other dimension)."""


@dataclass(frozen=True)
class Migration:
    """One forward-only schema step; ``version`` goes into ``PRAGMA user_version``."""

    version: int
    apply: Callable[[apsw.Connection], None]


@dataclass(frozen=True)
class DatabaseSettings:
    """Connection tuning. ``synchronous`` NORMAL loses at most the last commits on power loss
    (never corrupts, never on a process crash); FULL makes every commit durable."""

    synchronous: str = field(default_factory=lambda: os.environ.get(SYNCHRONOUS_ENV, "NORMAL"))
    busy_timeout_ms: int = 5000
    page_size: int | None = None
    mmap_size: int = 1 << 30
    cache_kib: int = 65536

    def __post_init__(self) -> None:
        mode = self.synchronous.upper()
        if mode not in SYNCHRONOUS_MODES:
            raise ValueError(f"{SYNCHRONOUS_ENV} must be one of {', '.join(SYNCHRONOUS_MODES)}")
        object.__setattr__(self, "synchronous", mode)


UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    apsw.BusyError,
    apsw.LockedError,
    apsw.FullError,
    apsw.IOError,
    apsw.CantOpenError,
    apsw.ReadOnlyError,
    apsw.CorruptError,
    apsw.NotADBError,
    apsw.PermissionsError,
)


def _unavailable(exc: BaseException) -> Unavailable:
    reasons = {
        apsw.BusyError: "the database is locked by another writer",
        apsw.LockedError: "the database is locked",
        apsw.FullError: "the disk holding the database is full",
    }
    reason = reasons.get(type(exc), "the database cannot be read or written")
    return Unavailable(f"store unavailable: {reason}")


class Database:
    """One SQLite file (or ``:memory:``) with sqlite-vec loaded and the schema migrated."""

    def __init__(
        self,
        path: str,
        migrations: Sequence[Migration],
        settings: DatabaseSettings | None = None,
    ) -> None:
        self.path = path
        self.settings = settings or DatabaseSettings()
        self.migrations = sorted(migrations, key=lambda m: m.version)
        self.in_memory = path == ":memory:" or path == ""
        self._local = threading.local()
        self._all: list[apsw.Connection] = []
        self._registry_lock = threading.Lock()
        self._shared_lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._closed = False
        first = self._connect()
        self.identity = None if self.in_memory else FileIdentity.of(path)
        self._shared = first if self.in_memory else None
        if not self.in_memory:
            self._local.conn = first
        self._migrate(first)

    # -- connections -------------------------------------------------------------------

    def _connect(self) -> apsw.Connection:
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        conn = apsw.Connection(self.path or ":memory:", flags=flags)
        conn.set_busy_timeout(self.settings.busy_timeout_ms)
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        s = self.settings
        if s.page_size:
            conn.execute(f"PRAGMA page_size={int(s.page_size)}")
        if not self.in_memory:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA mmap_size={int(s.mmap_size)}")
        conn.execute(f"PRAGMA synchronous={s.synchronous}")
        conn.execute(f"PRAGMA cache_size=-{int(s.cache_kib)}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA secure_delete=ON")
        with self._registry_lock:
            self._all.append(conn)
        return conn

    def connection(self) -> apsw.Connection:
        """The calling thread's connection (opened on first use)."""
        if self._closed:
            raise Unavailable("store unavailable: the store is closed")
        if self._shared is not None:
            return self._shared
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = self._connect()
            except UNAVAILABLE_ERRORS as exc:
                raise _unavailable(exc) from None
            self._local.conn = conn
        return conn

    # -- transactions ------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[apsw.Connection]:
        """A read transaction: one consistent snapshot for every statement inside."""
        with self._shared_lock if self.in_memory else _nolock():
            conn = self.connection()
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    if not conn.get_autocommit():
                        conn.execute("COMMIT")
            except UNAVAILABLE_ERRORS as exc:
                raise _unavailable(exc) from None

    @contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed whole or rolled back whole."""
        with self._shared_lock if self.in_memory else self._write_lock:
            conn = self.connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    if not conn.get_autocommit():
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except UNAVAILABLE_ERRORS as exc:
                if not conn.get_autocommit():
                    conn.execute("ROLLBACK")
                raise _unavailable(exc) from None

    # -- schema ------------------------------------------------------------------------

    @property
    def latest_version(self) -> int:
        return self.migrations[-1].version if self.migrations else 0

    def schema_version(self) -> int:
        with self.read() as conn:
            return int(conn.execute("PRAGMA user_version").fetchall()[0][0])

    def _migrate(self, conn: apsw.Connection) -> None:
        version = int(conn.execute("PRAGMA user_version").fetchall()[0][0])
        self._refuse_newer(version)
        if version == self.latest_version:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchall()[0][0])
            self._refuse_newer(version)
            for migration in self.migrations:
                if migration.version > version:
                    migration.apply(conn)
                    conn.execute(f"PRAGMA user_version={int(migration.version)}")
            conn.execute("COMMIT")
        except BaseException:
            if not conn.get_autocommit():
                conn.execute("ROLLBACK")
            raise

    def _refuse_newer(self, version: int) -> None:
        if version > self.latest_version:
            raise SchemaError(
                f"database schema version {version} is newer than this ratatoskr knows "
                f"({self.latest_version}); upgrade ratatoskr or open another file"
            )

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        self._closed = True
        with self._registry_lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


@contextmanager
def _nolock() -> Iterator[None]:
    yield
