"""Opening a plane's SQLite file: apsw, sqlite-vec, pragmas, migrations, transactions.

Every plane store owns one ``Database``. It hands out one connection per thread (SQLite
connections are cheap, and apsw releases the GIL while a statement runs, so readers in a
threadpool really run in parallel); ``:memory:`` shares a single connection under a lock.
Write transactions start with ``BEGIN IMMEDIATE``: a deferred BEGIN takes the write lock late
and fails with SQLITE_BUSY at once, whatever the busy timeout.

Faults become ``Unavailable`` (503, retryable), never a 500 or a half-written batch: a write
that cannot be stored rolls back whole and is remembered (``last_write_failure``) so health
can say why until a write succeeds again; a file replaced or overwritten under the open store
refuses every write at once and every read within ``FILE_CHECK_INTERVAL`` seconds until the
original file is back, because SQLite would go on serving the old inode from its descriptors.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import apsw
import sqlite_vec

from ratatoskr.core.errors import Unavailable
from ratatoskr.sqlite.busy import BusyWait
from ratatoskr.sqlite.checkpointer import Checkpointer
from ratatoskr.sqlite.filecheck import FileIdentity
from ratatoskr.sqlite.replica import replication_configured

SYNCHRONOUS_ENV = "RATATOSKR_SQLITE_SYNCHRONOUS"
SYNCHRONOUS_MODES = ("NORMAL", "FULL", "EXTRA")
# FULL: a commit is on disk (the WAL fsynced) before the call that made it is acknowledged
DEFAULT_SYNCHRONOUS = "FULL"
BUSY_TIMEOUT_ENV = "RATATOSKR_SQLITE_BUSY_TIMEOUT_MS"
MAX_DB_BYTES_ENV = "RATATOSKR_SQLITE_MAX_DB_BYTES"
DEFAULT_BUSY_TIMEOUT_MS = 5000
FILE_CHECK_INTERVAL = 0.5


class SchemaError(Exception):
    """The file cannot be opened as this plane's database (newer schema, other dimension)."""


def marked_plane(path: str) -> str | None:
    """The plane a file says it holds (``ratatoskr_meta``'s ``plane``), read without
    writing; ``None`` for a file that cannot be opened or holds no mark. A file that is not
    SQLite at all is a ``SchemaError`` saying so."""
    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return None
    try:
        rows = conn.execute("SELECT value FROM ratatoskr_meta WHERE key = 'plane'").fetchall()
    except apsw.NotADBError:
        raise SchemaError("the file is not a SQLite database") from None
    except apsw.Error:
        return None
    finally:
        conn.close()
    return str(rows[0][0]) if rows else None


def other_plane(marked: str, plane: str) -> str:
    """What a swapped ``--memory-db``/``--affect-db`` is, said as such (not as a schema too
    new, or a key missing)."""
    return f"the file is the {marked} plane's database, not the {plane} plane's"


def refuse_other_plane(path: str, plane: str) -> None:
    """``SchemaError`` when the file at ``path`` is marked for another plane than ``plane``
    (or is not SQLite), read without writing."""
    marked = marked_plane(path)
    if marked is not None and marked != plane:
        raise SchemaError(other_plane(marked, plane))


@dataclass(frozen=True)
class Migration:
    """One forward-only schema step; ``version`` goes into ``PRAGMA user_version``."""

    version: int
    apply: Callable[[apsw.Connection], None]


@dataclass(frozen=True)
class DatabaseSettings:
    """Connection tuning. ``synchronous`` FULL (the default) fsyncs the WAL at every commit,
    so an acknowledged write survives a power loss; NORMAL loses at most the last commits on
    power loss (never corrupts, never on a process crash)."""

    synchronous: str = field(
        default_factory=lambda: os.environ.get(SYNCHRONOUS_ENV) or DEFAULT_SYNCHRONOUS
    )
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    page_size: int | None = None
    mmap_size: int = 1 << 30
    cache_kib: int = 65536
    # a cap on each file's size (``PRAGMA max_page_count``): past it a write fails as on a
    # full disk, with room left on the disk for the WAL, the logs and the operator
    max_db_bytes: int | None = None
    # WAL checkpoints on a thread of their own (``checkpointer.py``), not inside a commit
    background_checkpoint: bool = True
    # False while Litestream replicates the file (``RATATOSKR_REPLICA_URL``): Litestream owns
    # the checkpoints, so this process runs none (no thread, ``wal_autocheckpoint=0``)
    app_checkpoints: bool = field(default_factory=lambda: not replication_configured())
    # replication lag (seconds) past which health is degraded; None: not replicated
    replica_max_lag: float | None = None
    # False: a missing file is not created but refused (``MISSING``, 503), as a server's
    # workers open theirs once its master has checked (and created) every store: a worker
    # replaced while an operator has moved the file away must not serve an empty new one
    create_files: bool = True

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


# lock contention passes by itself; these say something about the file or the disk
_TRANSIENT: tuple[type[BaseException], ...] = (apsw.BusyError, apsw.LockedError)


def _reason(exc: BaseException) -> str:
    reasons = {
        apsw.BusyError: "the database is locked by another writer",
        apsw.LockedError: "the database is locked",
        apsw.FullError: "the disk holding the database is full",
        apsw.ReadOnlyError: "the database is read-only (its file, its directory or the disk)",
        apsw.CorruptError: "the database file is damaged (ratatoskr admin check)",
        apsw.NotADBError: "the file is not a SQLite database",
        apsw.PermissionsError: "the database file's permissions refuse this process",
    }
    return reasons.get(type(exc), "the database cannot be read or written")


# sqlite-vec's message when the file cannot take a new block of vectors (SQLITE_FULL below)
VEC_CANNOT_GROW = "Could not insert a new vector chunk"
# free bytes on the disk past which a full database is its size cap's doing, not the disk's
CAP_NOT_DISK_FREE = 64 << 20
CAP_REACHED = "the database reached its size cap (RATATOSKR_SQLITE_MAX_DB_BYTES)"


# why a store that must not create its file cannot open it
MISSING = "database file is missing"


def _unavailable(reason: str) -> Unavailable:
    return Unavailable(f"store unavailable: {reason}")


@dataclass(frozen=True)
class WriteFailure:
    """Why the last write of this process could not be stored, and when (epoch seconds);
    ``unusable``: the file itself cannot be written (damaged, unreadable, read-only), not
    merely full: health says ``down``."""

    reason: str
    at: float
    unusable: bool = False


# a write failing so says the file cannot be written, whatever a read may still find
_UNUSABLE: tuple[type[BaseException], ...] = (
    apsw.CorruptError,
    apsw.NotADBError,
    apsw.IOError,
    apsw.CantOpenError,
    apsw.PermissionsError,
    apsw.ReadOnlyError,
)


def _create_owner_only(path: str) -> None:
    """A new database file made empty with mode 0600 before SQLite opens it: it holds every
    record verbatim, and SQLite would make it (and its WAL and shared-memory files, which
    take its mode) readable by every local user under the usual umask. An existing file
    keeps its mode; a directory that cannot take it is SQLite's to report."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def remove_database_file(path: str) -> None:
    """Remove a database file and its WAL, shared-memory and journal files (those present):
    one a refused start made, which would otherwise look like a damaged database."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


class Database:
    """One SQLite file (or ``:memory:``) with sqlite-vec loaded and the schema migrated."""

    def __init__(
        self,
        path: str,
        migrations: Sequence[Migration],
        settings: DatabaseSettings | None = None,
        plane: str | None = None,
    ) -> None:
        self.path = path
        self.plane = plane  # a file marked for another plane is refused before migrating
        self.settings = settings or DatabaseSettings()
        self.migrations = sorted(migrations, key=lambda m: m.version)
        self.in_memory = path == ":memory:" or path == ""
        self._local = threading.local()
        self._all: list[apsw.Connection] = []
        self._registry_lock = threading.Lock()
        self._shared_lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._closed = False
        self.last_write_failure: WriteFailure | None = None
        self._file_problem: str | None = None
        self._file_checked_at = time.monotonic()
        self.checkpointer: Checkpointer | None = None
        s = self.settings
        if not self.in_memory and s.background_checkpoint and s.app_checkpoints:
            self.checkpointer = Checkpointer(lambda: self._connect(create=False, register=False))
        create = self.in_memory or self.settings.create_files
        if create and not self.in_memory:
            _create_owner_only(path)
        try:
            first = self._connect(create=create)
        except apsw.NotADBError:
            raise SchemaError("the file is not a SQLite database") from None
        except apsw.CantOpenError:
            if create or os.path.exists(path):
                raise
            raise _unavailable(MISSING) from None
        self.identity = None if self.in_memory else FileIdentity.of(path)
        self._shared = first if self.in_memory else None
        if not self.in_memory:
            self._local.conn = first
        self._migrate(first)

    # -- connections -------------------------------------------------------------------

    def _connect(self, create: bool = True, register: bool = True) -> apsw.Connection:
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
        conn = apsw.Connection(self.path or ":memory:", flags=flags)
        conn.set_busy_handler(BusyWait(self.settings.busy_timeout_ms))
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        s = self.settings
        if s.page_size:
            conn.execute(f"PRAGMA page_size={int(s.page_size)}")
        if s.max_db_bytes:
            page = int(conn.execute("PRAGMA page_size").fetchall()[0][0])
            conn.execute(f"PRAGMA max_page_count={max(1, int(s.max_db_bytes) // page)}")
        if not self.in_memory:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA mmap_size={int(s.mmap_size)}")
            if not s.app_checkpoints:
                conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute(f"PRAGMA synchronous={s.synchronous}")
        conn.execute(f"PRAGMA cache_size=-{int(s.cache_kib)}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA secure_delete=ON")
        if not register:
            return conn
        if self.checkpointer is not None:
            conn.set_wal_hook(self.checkpointer.on_commit)
        with self._registry_lock:
            self._all.append(conn)
        return conn

    def connection(self) -> apsw.Connection:
        """The calling thread's connection (opened on first use)."""
        if self._closed:
            raise Unavailable("store unavailable: the store is closed")
        self._refuse_foreign_file()
        if self._shared is not None:
            return self._shared
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:  # the file exists since the first connection: never create another
                conn = self._connect(create=False)
            except UNAVAILABLE_ERRORS as exc:
                raise _unavailable(self._reason(exc)) from None
            self._local.conn = conn
        return conn

    def file_problem(self) -> str | None:
        """Why the file at ``path`` is not the one this store opened (None when it is)."""
        problem = self.identity.problem() if self.identity is not None else None
        self._file_problem, self._file_checked_at = problem, time.monotonic()
        return problem

    def _refuse_foreign_file(self, fresh: bool = False) -> None:
        """Serve only the file this store opened. A stat and a header read: before every
        write (a write must never land in a file moved aside), at most once per interval
        for reads (the search path; a read in the window sees the data that was there).
        A problem is never served from that cache: while one stands every call looks
        again, so a worker answers again the moment the file is back, whichever worker
        saw it last."""
        if self.identity is None:
            return
        stale = time.monotonic() - self._file_checked_at >= FILE_CHECK_INTERVAL
        if fresh or stale or self._file_problem is not None:
            self.file_problem()
        if self._file_problem is not None:
            raise Unavailable(f"store unavailable: {self._file_problem}")

    def _reason(self, exc: BaseException) -> str:
        """Why ``exc`` stops a call; a full database with room left on its disk is one at
        its size cap (``PRAGMA max_page_count`` fails as a full disk does)."""
        cap = self.settings.max_db_bytes
        if isinstance(exc, apsw.FullError) and cap and not self.in_memory:
            try:
                free = shutil.disk_usage(os.path.dirname(os.path.abspath(self.path))).free
            except OSError:
                free = 0
            if free >= CAP_NOT_DISK_FREE:
                return CAP_REACHED
        return _reason(exc)

    def _discard(self, conn: apsw.Connection) -> None:
        """Drop a connection a failed rollback may have left inside a transaction."""
        if self._shared is conn:
            return
        with self._registry_lock:
            if conn in self._all:
                self._all.remove(conn)
        self._local.conn = None
        with contextlib.suppress(apsw.Error):
            conn.close()

    def _rollback(self, conn: apsw.Connection) -> None:
        if conn.get_autocommit():
            return
        try:
            conn.execute("ROLLBACK")
        except apsw.Error:
            self._discard(conn)

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
                raise _unavailable(self._reason(exc)) from None

    @contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed whole or rolled back whole."""
        with self._shared_lock if self.in_memory else self._write_lock:
            self._refuse_foreign_file(fresh=True)
            conn = self.connection()
            if not self.in_memory and conn.readonly("main"):
                # opened while the file could not be written (SQLite then falls back to
                # read-only, silently): opened again, it writes if the file takes writes now
                self._discard(conn)
                conn = self.connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    self._rollback(conn)
                    raise
                conn.execute("COMMIT")
            except UNAVAILABLE_ERRORS as exc:
                self._rollback(conn)
                reason = self._reason(exc)
                if not isinstance(exc, _TRANSIENT):
                    unusable = isinstance(exc, _UNUSABLE)
                    self.last_write_failure = WriteFailure(reason, time.time(), unusable)
                raise _unavailable(reason) from None
            except apsw.SQLError as exc:
                if VEC_CANNOT_GROW not in str(exc):
                    raise
                # sqlite-vec reports the full file (the disk, or the size cap) that stopped
                # a new block of vectors as an error of its own
                self._rollback(conn)
                reason = self._reason(apsw.FullError(str(exc)))
                self.last_write_failure = WriteFailure(reason, time.time())
                raise _unavailable(reason) from None
            self.last_write_failure = None

    # -- schema ------------------------------------------------------------------------

    @property
    def latest_version(self) -> int:
        return self.migrations[-1].version if self.migrations else 0

    def schema_version(self) -> int:
        with self.read() as conn:
            return int(conn.execute("PRAGMA user_version").fetchall()[0][0])

    def _migrate(self, conn: apsw.Connection) -> None:
        try:
            version = int(conn.execute("PRAGMA user_version").fetchall()[0][0])
        except apsw.NotADBError:
            raise SchemaError("the file is not a SQLite database") from None
        if self.plane is not None and version > 0:
            try:
                mark = conn.execute("SELECT value FROM ratatoskr_meta WHERE key = 'plane'")
                marked = mark.fetchall()
            except apsw.SQLError:
                marked = []
            if marked and marked[0][0] != self.plane:
                raise SchemaError(other_plane(str(marked[0][0]), self.plane))
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
        if self.checkpointer is not None:
            self.checkpointer.stop()
        with self._registry_lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


@contextmanager
def _nolock() -> Iterator[None]:
    yield
