"""Replication from ``ratatoskr serve``: Litestream as a supervised child, when configured.

With ``RATATOSKR_REPLICA_URL`` set, the gunicorn master starts one supervisor process
(``ratatoskr.server.litestream_supervisor``) before it forks its workers and stops it after
the last worker has stopped, so Litestream's final sync on shutdown covers every
acknowledged write. The supervisor runs ``litestream replicate`` over both plane files and
the jti ledger, starts it again when it dies, and writes the state files health reads.

Why a process of its own and not a thread of the master: gunicorn's master reaps every child
it has (``waitpid(-1)``), which would steal Litestream's exit status, and it forks workers,
which a thread writing to the shared stdout could leave holding a lock in the child. The
supervisor and Litestream run in their own session (a Ctrl-C to the terminal reaches the
master, which stops them last) and get SIGTERM if their parent dies, so neither outlives
the server: two Litestreams on one file corrupt its replica.

The config (``litestream_config``) is written to a private temporary directory (mode 0700,
file 0600) because the URL may carry credentials; the URL is never passed on a command line.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ratatoskr.core.parent_death import die_with_parent
from ratatoskr.memory.store import PAGE_SIZE as MEMORY_PAGE_SIZE
from ratatoskr.server.settings import Settings, load_settings
from ratatoskr.sqlite.checkpointer import INLINE_PAGES, WAKE_PAGES
from ratatoskr.sqlite.jti import JtiLedger, ledger_beside
from ratatoskr.sqlite.replica import (
    DEFAULT_WAL_MAX_MB,
    ReplicaState,
    redact_url,
    replica_url_for,
    write_state,
)

# Litestream's emergency TRUNCATE checkpoint: when the WAL reaches this many bytes, what the
# checkpointer bounds it to without replication (INLINE_PAGES pages of 64 KiB); the default
# of RATATOSKR_REPLICA_WAL_MAX_MB
TRUNCATE_WAL_BYTES = INLINE_PAGES * 65536
if TRUNCATE_WAL_BYTES != DEFAULT_WAL_MAX_MB * 1024 * 1024:  # pragma: no cover - kept equal
    raise ImportError("RATATOSKR_REPLICA_WAL_MAX_MB's default is the checkpointer's bound")
# Litestream's final sync on SIGTERM; the supervisor waits a little longer, the master
# longer still (all of it after gunicorn's graceful timeout, inside compose's grace period)
SHUTDOWN_SYNC_SECONDS = 10
SUPERVISOR_STOP_SECONDS = SHUTDOWN_SYNC_SECONDS + 4
RESTART_EVERY = 5.0  # seconds between two starts of a supervisor that keeps exiting


@dataclass(frozen=True)
class ReplicatedFile:
    """One SQLite file Litestream replicates, and the name it has under the replica URL."""

    name: str
    path: str


def replicated_files(memory_db: str, affect_db: str) -> list[ReplicatedFile]:
    """Both planes, and the jti ledger beside the memory file (``ratatoskr serve``'s):
    its entries guard ``delete_many`` tokens against a replay for as long as they live,
    which a restore must not forget."""
    return [
        ReplicatedFile("memory", memory_db),
        ReplicatedFile("affect", affect_db),
        ReplicatedFile("jti", ledger_beside(memory_db)),
    ]


def new_page_size(name: str) -> int:
    """The page size ratatoskr creates a replicated file with: the memory plane's own
    (``memory.store.PAGE_SIZE``), SQLite's default for the others."""
    return MEMORY_PAGE_SIZE if name == "memory" else 4096


def page_size_of(path: str, missing: int = 4096) -> int:
    """The page size in the file's header (bytes 16-17, 1 meaning 65,536); ``missing`` for
    a file not made yet (a bare gunicorn starts replication before a worker makes them)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
    except OSError:
        return missing
    if len(header) < 18 or not header.startswith(b"SQLite format 3\x00"):
        return missing
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else max(512, size)


def truncate_pages(file: ReplicatedFile, wal_max_bytes: int = TRUNCATE_WAL_BYTES) -> int:
    """Litestream's ``truncate-page-n`` for the file: ``wal_max_bytes`` of its pages."""
    return max(2, wal_max_bytes // page_size_of(file.path, new_page_size(file.name)))


def litestream_config(
    files: Sequence[ReplicatedFile],
    url: str,
    socket_path: str,
    sync_interval_ms: int,
    busy_timeout_ms: int,
    wal_max_bytes: int = TRUNCATE_WAL_BYTES,
) -> dict[str, Any]:
    """The ``litestream.yml`` (as JSON, which YAML reads) for ``files``.

    - ``monitor-interval`` (reading the WAL) and ``sync-interval`` (uploading) are each half
      of ``RATATOSKR_REPLICA_SYNC_INTERVAL_MS``, so a commit is on the replica about one
      interval after it was acknowledged;
    - ``max-sync-ltx-files: 0``: a sync uploads everything Litestream has read, so its
      ``last_sync_at`` (the lag's origin) never marks a partial catch-up;
    - ``busy-timeout``: Litestream's own lock waits stay under half of ratatoskr's, so a
      checkpoint it cannot run gives up before a write queued behind it would time out;
    - checkpoints: PASSIVE at ratatoskr's own threshold (1,000 pages), the blocking TRUNCATE
      at the WAL size ratatoskr bounds itself to (500 MiB, ``RATATOSKR_REPLICA_WAL_MAX_MB``)
      whatever the page size; a bound under 1,000 pages moves the PASSIVE one to half of it.
    """
    half = max(50, sync_interval_ms // 2)
    busy = max(100, min(1000, busy_timeout_ms // 2))
    dbs = []
    for file in files:
        pages = truncate_pages(file, wal_max_bytes)
        dbs.append(
            {
                "path": file.path,
                "monitor-interval": f"{half}ms",
                "busy-timeout": f"{busy}ms",
                "min-checkpoint-page-count": min(WAKE_PAGES, max(1, pages // 2)),
                "truncate-page-n": pages,
                "replica": {
                    "url": replica_url_for(url, file.name),
                    "sync-interval": f"{half}ms",
                    "max-sync-ltx-files": 0,
                },
            }
        )
    return {
        "logging": {"level": "info", "type": "json"},
        "socket": {"enabled": True, "path": socket_path, "permissions": 0o600},
        "shutdown-sync-timeout": f"{SHUTDOWN_SYNC_SECONDS}s",
        "dbs": dbs,
    }


def start_supervisor(settings: Settings) -> subprocess.Popen[bytes] | None:
    """Start replication if configured (master side, before the workers fork)."""
    replica = settings.replica
    if replica is None:
        return None
    files = replicated_files(settings.memory_db, settings.affect_db)
    # Litestream replicates a file that exists: the ledger is otherwise made by a worker
    JtiLedger(files[-1].path, settings=settings.database).close()
    now = time.time()
    for file in files:
        # the lag counts from now until Litestream's first sync, in every worker at once
        replica_at = redact_url(replica_url_for(replica.url, file.name))
        write_state(file.path, ReplicaState(replica=replica_at, since=now, updated_at=now))
    cmd = [sys.executable, "-m", "ratatoskr.server.litestream_supervisor"]
    cmd += ["--busy-timeout-ms", str(settings.database.busy_timeout_ms)]
    cmd += ["--log-level", settings.log_level, "--log-format", settings.log_format]
    for file in files:
        cmd += ["--file", f"{file.name}={file.path}"]
    # the URL reaches the supervisor through its environment, never its command line
    return subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        close_fds=True,
        start_new_session=True,
        # safe here: the master has started no thread yet
        preexec_fn=die_with_parent,
    )


def start_from_env() -> subprocess.Popen[bytes] | None:
    """``start_supervisor`` for a bare ``gunicorn -c deploy/gunicorn.conf.py``, whose
    workers read the same environment (``app_from_env``)."""
    return start_supervisor(load_settings())


def stop_supervisor(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM the supervisor (Litestream syncs what is left, then exits) and wait for it."""
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=SUPERVISOR_STOP_SECONDS + 2)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


class SupervisorKeeper:
    """The master's hold on the supervisor: started with the server, started again when it
    exits while the server runs (killed outright, the OOM killer), at most once per
    ``RESTART_EVERY`` seconds, and stopped last. ``ratatoskr serve``'s gunicorn master asks
    ``tend`` at every turn of its loop."""

    def __init__(self, settings: Settings, log: Callable[[str, int | None], None]) -> None:
        self.settings = settings
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    def start(self) -> None:
        self.process = start_supervisor(self.settings)
        self.started_at = time.monotonic()

    def tend(self) -> None:
        process = self.process
        if process is None or process.poll() is None:
            return
        if time.monotonic() - self.started_at < RESTART_EVERY:
            return
        # gunicorn's master may have reaped it first (its waitpid takes any child): then
        # the status is not known
        self.log("replication supervisor exited; starting it again", process.returncode)
        self.start()

    def stop(self) -> None:
        stop_supervisor(self.process)
        self.process = None
