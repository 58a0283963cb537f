"""One plane's PostgreSQL database: a connection pool, transactions that retry, migrations.

Every plane store owns one ``PgDatabase`` over a psycopg-pool ``ConnectionPool`` (sizes per
process, ``PgSettings``). Writes run in ``REPEATABLE READ`` transactions: two servers
writing the same record conflict as a serialization failure instead of both winning, and a
serialization failure or a deadlock is retried inside the store, whole, a few times, so a
caller sees one answer. Reads that take more than one statement run in a read-only
``REPEATABLE READ`` transaction (one snapshot); a single statement is its own snapshot.

When PostgreSQL cannot be reached (refused, down, the pool exhausted for ``timeout``
seconds), a call is ``Unavailable`` (503, retryable) with a reason that never names the host
or a credential; the pool reconnects by itself, so the store serves again once the server is
back. A connection the server dropped fails at its first statement; a read (or a write whose
``BEGIN`` did not go through) is then tried again on another one, so a restart of the server
costs no call (a check before every checkout would cost a round trip on every call).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from ratatoskr.core.errors import InvalidArguments, Unavailable
from ratatoskr.postgres.migrations import Migration, migrate
from ratatoskr.postgres.probe import unreachable
from ratatoskr.postgres.transaction import transaction
from ratatoskr.postgres.url import masked, with_options
from ratatoskr.postgres.vectors import register_types

POOL_MIN_ENV = "RATATOSKR_PG_POOL_MIN"
POOL_MAX_ENV = "RATATOSKR_PG_POOL_MAX"
POOL_TIMEOUT_ENV = "RATATOSKR_PG_POOL_TIMEOUT"
LOCK_TIMEOUT_ENV = "RATATOSKR_PG_LOCK_TIMEOUT"
PARTITIONS_ENV = "RATATOSKR_PG_TENANT_PARTITIONS"
MAX_PARTITIONS = 1024
DEFAULT_POOL_MIN = 1
DEFAULT_POOL_MAX = 4
DEFAULT_POOL_TIMEOUT = 5.0
DEFAULT_LOCK_TIMEOUT = 5.0  # as SQLite's busy timeout
# A lost connection is replaced by the pool in the background, its attempts spaced 1, 2,
# 4 ... s apart until this many seconds have passed; then the next call that waits starts
# a fresh series. With psycopg-pool's default (300 s) the gaps grew to a minute, and a
# server kept answering 503 for as long after PostgreSQL was back.
RECONNECT_WINDOW = 10.0
UNREACHABLE_PROBE_SECONDS = 2  # the one connection that asks why a pool could not open
# A write that meets a serialization failure is tried again, its waits doubling from
# BACKOFF up to MAX_BACKOFF (with jitter), for as long as it would wait for a lock: the
# lock timeout (DEFAULT_LOCK_TIMEOUT when none is set). A count of attempts (there were 8)
# ran out in under a second when a dozen writers updated one record at once.
BACKOFF = 0.005  # seconds
MAX_BACKOFF = 0.1
MAX_ATTEMPTS = 100  # a bound besides the time, never reached by contention alone
APPLICATION_NAME = "ratatoskr"
# The pool logs each failed reconnect as a warning (libpq's text). Where no logging is set
# up (a command starting, the admin CLI) Python would print them raw to stderr, three lines
# before the command's own message; a server's configured logging still receives them.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

T = TypeVar("T")
Conn = psycopg.Connection[Any]
# a unique violation here is always two writers inserting one new id at once (the store
# checked which ids exist in its snapshot): retried, the transaction sees the other's row
RETRIED: tuple[type[BaseException], ...] = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.UniqueViolation,
)


def _env_number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    return float(raw) if raw else default


@dataclass(frozen=True)
class PgSettings:
    """Connections per process and plane: at least ``min_size`` kept open, at most
    ``max_size``; a call waits ``timeout`` seconds for one before it is ``Unavailable``.
    ``tenant_partitions`` (0: none) hash-partitions the memory plane's chunks by tenant
    when its tables are created (``memory.postgres.schema``)."""

    min_size: int = DEFAULT_POOL_MIN
    max_size: int = DEFAULT_POOL_MAX
    timeout: float = DEFAULT_POOL_TIMEOUT
    tenant_partitions: int = 0
    # how long a statement waits for a lock another session holds before the call is
    # ``Unavailable`` (0: without limit), PostgreSQL's ``lock_timeout`` on every connection;
    # None: the session's own (the URL's ``options``, the role's or the database's setting),
    # or ``DEFAULT_LOCK_TIMEOUT`` when it has none
    lock_timeout: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.min_size <= self.max_size or self.max_size < 1:
            raise ValueError(f"{POOL_MIN_ENV} must be 0..{POOL_MAX_ENV}, {POOL_MAX_ENV} >= 1")
        if not 0 < self.timeout <= 600:
            raise ValueError(f"{POOL_TIMEOUT_ENV} must be a number of seconds in (0, 600]")
        if self.lock_timeout is not None and not 0 <= self.lock_timeout <= 600:
            raise ValueError(f"{LOCK_TIMEOUT_ENV} must be a number of seconds in [0, 600]")
        if self.tenant_partitions == 1 or not 0 <= self.tenant_partitions <= MAX_PARTITIONS:
            raise ValueError(f"{PARTITIONS_ENV} must be 0 (none) or 2..{MAX_PARTITIONS}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PgSettings:
        env = os.environ if env is None else env
        try:
            return cls(
                int(_env_number(env, POOL_MIN_ENV, DEFAULT_POOL_MIN)),
                int(_env_number(env, POOL_MAX_ENV, DEFAULT_POOL_MAX)),
                _env_number(env, POOL_TIMEOUT_ENV, DEFAULT_POOL_TIMEOUT),
                int(_env_number(env, PARTITIONS_ENV, 0)),
                _env_number(env, LOCK_TIMEOUT_ENV, -1.0) if env.get(LOCK_TIMEOUT_ENV) else None,
            )
        except ValueError as exc:
            if "must be" in str(exc):
                raise
            raise ValueError(
                f"{POOL_MIN_ENV}, {POOL_MAX_ENV}, {POOL_TIMEOUT_ENV}, {PARTITIONS_ENV} and "
                f"{LOCK_TIMEOUT_ENV} must be numbers"
            ) from None


@dataclass(frozen=True)
class WriteFailure:
    """Why the last write of this process could not be stored, and when (epoch seconds)."""

    reason: str
    at: float


@dataclass
class _Counters:
    retries: int = 0
    unavailable: int = 0
    waiting: int = 0  # callers in this process waiting for a pooled connection now
    lock: threading.Lock = field(default_factory=threading.Lock)


TOO_LARGE = (
    "a value is too large for PostgreSQL's indexes: in the partitioned layout an id and its "
    "tenant together take at most about 2,700 bytes of UTF-8"
)


def unreachable_reason(exc: BaseException) -> str:
    if isinstance(exc, PoolTimeout):
        return "no database connection could be had in time (PostgreSQL down or pool full)"
    if isinstance(exc, psycopg.errors.DiskFull):
        return "the disk holding the database is full"
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return "the database is read-only (a standby?)"
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return "a lock the call needs is held elsewhere past the session's lock_timeout"
    state = getattr(exc, "sqlstate", None)
    if state and not state.startswith(("08", "57P")):
        # PostgreSQL answered, refusing the statement (a timeout, a resource it lacks): say
        # which error, not that it cannot be reached (08: connection, 57P: shutting down)
        return f"PostgreSQL refused the statement (SQLSTATE {state})"
    return "PostgreSQL cannot be reached"


def _dropped(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection itself is gone (not a query that failed)."""
    return type(exc) in (
        psycopg.OperationalError,
        psycopg.InterfaceError,
        psycopg.errors.AdminShutdown,
        psycopg.errors.CrashShutdown,
    )


class PgDatabase:
    """A plane's PostgreSQL database; ``component`` names its schema version row."""

    def __init__(
        self,
        url: str,
        component: str,
        migrations: Sequence[Migration],
        settings: PgSettings | None = None,
    ) -> None:
        self.url = url
        self.component = component
        # the advisory lock every write of this plane holds (``transaction``)
        self._turn_key = zlib.crc32(f"ratatoskr-writes-{component}".encode())
        self.settings = settings or PgSettings.from_env()
        self.migrations = sorted(migrations, key=lambda m: m.version)
        self.in_memory = False  # what callers written for SQLite ask
        self.last_write_failure: WriteFailure | None = None
        self.counters = _Counters()
        self.pool = ConnectionPool(
            with_options(url, application_name=f"{APPLICATION_NAME}-{component}"),
            min_size=self.settings.min_size,
            max_size=self.settings.max_size,
            timeout=self.settings.timeout,
            kwargs={"autocommit": True},
            configure=self._configure,
            reconnect_timeout=RECONNECT_WINDOW,
            name=f"ratatoskr-{component}",
            open=False,
        )
        try:
            self.pool.open(wait=True, timeout=self.settings.timeout)
        except (PoolTimeout, psycopg.OperationalError):
            self.pool.close()
            try:  # the pool keeps no reason: one connection tells why, if the server said
                psycopg.connect(url, connect_timeout=UNREACHABLE_PROBE_SECONDS).close()
            except psycopg.OperationalError as exc:
                raise unreachable(url, exc) from None
            raise unreachable(url) from None
        try:
            self.once(self._migrate)
        except BaseException:
            self.pool.close()
            raise

    def _configure(self, conn: Conn) -> None:
        """Each new connection: the vector types, and the wait for a lock bounded."""
        register_types(conn)
        wait = self.settings.lock_timeout
        if wait is None:
            row = conn.execute("SELECT current_setting('lock_timeout')").fetchone()
            if row is not None and str(row[0]) not in ("0", "0ms"):
                return  # the session's own (the URL's options, the role's, the database's)
            wait = DEFAULT_LOCK_TIMEOUT
        conn.execute(f"SET lock_timeout = {round(wait * 1000)}")

    @property
    def path(self) -> str:
        """The location, password masked: what a message or a metric may name."""
        return masked(self.url)

    @property
    def latest_version(self) -> int:
        return self.migrations[-1].version if self.migrations else 0

    # -- transactions --------------------------------------------------------------------

    def write(
        self, fn: Callable[[Conn], T], *, committed_reads: bool = False, turn: bool = True
    ) -> T:
        """``fn(conn)`` inside one ``REPEATABLE READ`` transaction, committed whole or not
        at all; retried whole on a serialization failure or a deadlock. With
        ``committed_reads`` the transaction is ``READ COMMITTED``: for a caller that
        serialises itself with locks and must see what the holder before it committed.
        Without ``turn`` the write takes no turn (``transaction``): for an operator's
        long transaction, which a retry must not wait behind with every write queued."""
        level = "READ COMMITTED" if committed_reads else None
        return self._run(fn, write=True, level=level, turn=turn)

    def read(self, fn: Callable[[Conn], T], *, wait: float | None = None) -> T:
        """``fn(conn)`` inside one read-only snapshot; ``wait``: seconds to wait for a
        connection, if not the pool's timeout."""
        return self._run(fn, write=False, wait=wait)

    def once(self, fn: Callable[[Conn], T]) -> T:
        """``fn(conn)`` on an autocommit connection: for one statement (its own snapshot)."""
        return self._run(fn, write=None)

    def _run(
        self,
        fn: Callable[[Conn], T],
        *,
        write: bool | None,
        level: str | None = None,
        wait: float | None = None,
        turn: bool = False,
    ) -> T:
        stale_left = self.settings.max_size + 1
        attempt = 0
        retry_until = time.monotonic() + (self.settings.lock_timeout or DEFAULT_LOCK_TIMEOUT)
        while True:
            began = False
            try:
                with self._connection(wait) as conn:
                    if write is None:
                        result = fn(conn)
                    else:
                        # a write leaves the access mode to the server, so a standby (or a
                        # read-only session) refuses its first write as read-only
                        mode = "" if write else "READ ONLY"
                        begin = f"BEGIN ISOLATION LEVEL {level or 'REPEATABLE READ'} {mode}"
                        key = self._turn_key if write and turn else None
                        with transaction(conn, begin, key, alone=attempt > 0):
                            began = True
                            result = fn(conn)
                if write:
                    self.last_write_failure = None
                return result
            except RETRIED:
                if write is not True:
                    raise
                with self.counters.lock:
                    self.counters.retries += 1
                pause = min(BACKOFF * 2**attempt, MAX_BACKOFF) * (0.5 + random.random())
                attempt += 1
                if attempt > MAX_ATTEMPTS or time.monotonic() + pause >= retry_until:
                    raise Unavailable(
                        "store unavailable: concurrent writes kept conflicting past the "
                        "lock timeout; retry"
                    ) from None
                time.sleep(pause)
            except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn) as exc:
                # a table or column dropped behind the store's back: the operator's to mend
                what = exc.diag.message_primary or "a table or column is missing"
                raise Unavailable(
                    f"store unavailable: the database lacks what this build needs ({what}); "
                    "ratatoskr admin check lists what is missing"
                ) from None
            except psycopg.errors.ProgramLimitExceeded:
                # a value past one of PostgreSQL's own limits (an index row over 2,704
                # bytes): the call's, not an outage, and the same call again fails again
                raise InvalidArguments(TOO_LARGE) from None
            except (
                PoolTimeout,
                psycopg.OperationalError,
                psycopg.InterfaceError,
                psycopg.errors.ReadOnlySqlTransaction,
            ) as exc:
                # a pooled connection the server dropped (a restart, an idle timeout) fails
                # at its first statement: a read, or a write whose BEGIN did not go through,
                # is tried again on another connection (the pool discards the broken one)
                stale = _dropped(exc) and (write is not True or not began)
                if stale and stale_left > 0:
                    stale_left -= 1
                    continue
                reason = unreachable_reason(exc)
                with self.counters.lock:
                    self.counters.unavailable += 1
                # a lock held elsewhere is contention, gone when its holder is done: nothing
                # for health to remember (SQLite's busy timeout is not remembered either)
                if write and not isinstance(exc, psycopg.errors.LockNotAvailable):
                    self.last_write_failure = WriteFailure(reason, time.time())
                raise Unavailable(f"store unavailable: {reason}") from None

    def reachable(self, timeout: float) -> bool:
        """Whether PostgreSQL takes a new connection within ``timeout`` seconds, outside the
        pool: what tells a pool whose connections are all in use from a server that is down."""
        try:
            with psycopg.connect(
                self.url, connect_timeout=max(1, round(timeout)), autocommit=True
            ) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    # -- schema --------------------------------------------------------------------------

    def _migrate(self, conn: Conn) -> None:
        # READ COMMITTED, not the writes' snapshot: after waiting for another server's
        # migration (the advisory lock), the versions it committed must be seen
        with conn.transaction():
            # a server waits out another's migration (the advisory lock), however long
            conn.execute("SET LOCAL lock_timeout = 0")
            migrate(conn, self.component, self.migrations)

    def schema_version(self) -> int:
        def version(conn: Conn) -> int:
            row = conn.execute(
                "SELECT version FROM ratatoskr_schema WHERE component = %s", (self.component,)
            ).fetchone()
            return int(row[0]) if row else 0

        return self.once(version)

    @contextlib.contextmanager
    def _connection(self, wait: float | None) -> Iterator[Conn]:
        """A pooled connection, counting the callers still waiting for one: the pool's own
        count keeps a caller that timed out until a connection comes back."""
        with self.counters.lock:
            self.counters.waiting += 1
        waiting = True
        try:
            with self.pool.connection(timeout=wait) as conn:
                with self.counters.lock:
                    self.counters.waiting -= 1
                waiting = False
                yield conn
        finally:
            if waiting:
                with self.counters.lock:
                    self.counters.waiting -= 1

    def pool_stats(self) -> dict[str, int]:
        """Connections open, idle and callers waiting now (for /metrics)."""
        stats = self.pool.get_stats()
        with self.counters.lock:
            waiting = self.counters.waiting
        return {
            "open": int(stats.get("pool_size", 0)),
            "idle": int(stats.get("pool_available", 0)),
            "waiting": waiting,
        }

    def close(self) -> None:
        self.pool.close()
