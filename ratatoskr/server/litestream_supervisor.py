"""The replication supervisor: one process that keeps ``litestream replicate`` running.

Started by ``ratatoskr serve`` (``replication.start_supervisor``) as
``python -m ratatoskr.server.litestream_supervisor --file memory=PATH ...`` with the replica
URL in its environment. It

- writes Litestream's config into a private temporary directory and runs Litestream on it;
  when Litestream exits it logs the exit status and starts it again after a backoff
  (1 s doubling to 30 s, back to 1 s once a run has lasted a minute);
- passes Litestream's JSON log lines through the server's formatter: the message, the plane,
  a transaction id, an error with every secret of the URL and of Litestream's credential
  variables scrubbed out; never a URL, a path or a credential;
- asks Litestream's control socket (``GET /list``) every poll interval when each file's
  replica was last brought up to date (``last_sync_at``) and writes it to the file's state
  file, where health, ``/metrics`` and ``admin stats`` read the lag;
- asks Litestream every check interval (30 sync intervals, 10 s to 5 min) whether each
  replica could be restored from (``restore -dry-run``): a replica emptied under it (a
  bucket lifecycle rule, an operator's mistake) still takes new changes, and the lag stays
  small, but holds no snapshot to start a restore from until Litestream starts again. The
  supervisor then says so in the state (health turns ``degraded``), logs it and starts
  Litestream again, which writes a new snapshot;
- while Litestream is not running (it exited, an unreachable replica makes it exit at every
  start), checkpoints (TRUNCATE) each file whose WAL is past ``RATATOSKR_REPLICA_WAL_MAX_MB``
  on a connection of its own, and logs it: ratatoskr runs no checkpoint while replicating,
  so otherwise nothing would bound the WAL. Never while Litestream runs (it owns the
  checkpoints then); Litestream, started again, finds the WAL it had read gone and takes a
  new snapshot;
- on SIGTERM (or when its parent dies) stops Litestream with SIGTERM, which first syncs
  what is left, and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import IO, Any

import httpx
import orjson

from ratatoskr.core.parent_death import die_with_parent
from ratatoskr.server.logs import configure_logging
from ratatoskr.server.replication import (
    SHUTDOWN_SYNC_SECONDS,
    ReplicatedFile,
    litestream_config,
)
from ratatoskr.sqlite.litestream_run import (
    NO_BACKUP,
    litestream_env,
    private_workdir,
    write_config,
)
from ratatoskr.sqlite.replica import (
    ReplicaSettings,
    ReplicaState,
    litestream_binary,
    redact_url,
    replica_settings_from_env,
    replica_url_for,
    scrub,
    url_secrets,
    write_state,
)
from ratatoskr.sqlite.upkeep import checkpoint_file, file_size

logger = logging.getLogger("ratatoskr.replication")
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
STABLE_RUN = 60.0
# how often each replica is checked for something to restore from, and how long one may take
CHECK_MIN = 10.0
CHECK_MAX = 300.0
CHECK_TIMEOUT = 60.0
STOP_GRACE = SHUTDOWN_SYNC_SECONDS + 2
LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING}
LEVELS |= {"WARNING": logging.WARNING, "ERROR": logging.ERROR}


def parse_time(value: object) -> float | None:
    """Epoch seconds from Litestream's RFC 3339 time (nanoseconds cut to microseconds)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        digits = "".join(ch for ch in rest if ch.isdigit())
        text = f"{head}.{digits[:6]}{rest[len(digits) :]}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class Supervisor:
    """Runs Litestream over ``files`` until stopped; see the module docstring."""

    def __init__(
        self,
        replica: ReplicaSettings,
        files: Sequence[ReplicatedFile],
        busy_timeout_ms: int,
        binary: str,
    ) -> None:
        self.replica = replica
        self.files = list(files)
        self.binary = binary
        self.secrets = url_secrets(replica.url)
        self.poll_interval = min(1.0, max(0.1, replica.sync_interval_ms / 2000))
        self.workdir = private_workdir()
        self.socket_path = os.path.join(self.workdir, "control.sock")
        config = litestream_config(
            self.files,
            replica.url,
            self.socket_path,
            replica.sync_interval_ms,
            busy_timeout_ms,
            replica.wal_max_bytes,
        )
        # Litestream's own lock wait (``litestream_config``): a checkpoint run here while it
        # is down waits no longer for readers than one of Litestream's would
        self.checkpoint_busy_ms = max(100, min(1000, busy_timeout_ms // 2))
        self.config_path = write_config(self.workdir, config)
        now = time.time()
        self.states = {
            f.name: ReplicaState(
                replica=redact_url(replica_url_for(replica.url, f.name)),
                since=now,
                supervisor_pid=os.getpid(),
            )
            for f in self.files
        }
        self.by_path = {os.path.realpath(f.path): f.name for f in self.files}
        self.by_base = {os.path.basename(f.path): f.name for f in self.files}
        self.stopping = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._lock = threading.Lock()
        self.check_interval = min(CHECK_MAX, max(CHECK_MIN, 30 * replica.sync_interval_ms / 1000))
        self._renewing = threading.Event()

    # -- the run loop ----------------------------------------------------------------------

    def run(self) -> int:
        """Until ``stop``: start Litestream, wait for it, start it again after a backoff."""
        poller = threading.Thread(target=self._poll_loop, name="replica-poll", daemon=True)
        poller.start()
        checker = threading.Thread(target=self._check_loop, name="replica-check", daemon=True)
        checker.start()
        log(logging.INFO, "replication started", replica=redact_url(self.replica.url))
        backoff = BACKOFF_FIRST
        try:
            while not self.stopping.is_set():
                started = time.monotonic()
                status = self._run_once()
                if self.stopping.is_set():
                    break
                if self._renewing.is_set():  # stopped to write a new snapshot: at once
                    self._renewing.clear()
                    self.restarts += 1
                    self._write_states()
                    continue
                if time.monotonic() - started >= STABLE_RUN:
                    backoff = BACKOFF_FIRST
                self.restarts += 1
                log(
                    logging.ERROR,
                    "litestream exited; starting it again",
                    exit_status=status,
                    restarts=self.restarts,
                    backoff_s=backoff,
                )
                self._write_states()
                self._wait_down(backoff)
                backoff = min(BACKOFF_MAX, backoff * 2)
        finally:
            self.stopping.set()
            poller.join(timeout=5)
            self._write_states()
            shutil.rmtree(self.workdir, ignore_errors=True)
            log(logging.INFO, "replication stopped")
        return 0

    def _run_once(self) -> int:
        """One Litestream run; its exit status (negative: the signal that ended it)."""
        cmd = [self.binary, "replicate", "-config", self.config_path, "-no-expand-env"]
        env = litestream_env()
        try:
            process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                close_fds=True,
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            log(logging.ERROR, "litestream cannot start", error=type(exc).__name__)
            return -1
        with self._lock:
            self.process = process
        log(logging.INFO, "litestream started", child_pid=process.pid)
        self._write_states()
        assert process.stdout is not None and process.stderr is not None
        pumps = [
            threading.Thread(target=self._pump, args=(process.stdout, False), daemon=True),
            threading.Thread(target=self._pump, args=(process.stderr, True), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        deadline: float | None = None
        while True:
            try:
                status = process.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if self.stopping.is_set():
                if deadline is None:  # SIGTERM: Litestream syncs what is left, then exits
                    deadline = time.monotonic() + STOP_GRACE
                    with contextlib.suppress(ProcessLookupError):
                        process.send_signal(signal.SIGTERM)
                elif time.monotonic() > deadline:
                    process.kill()
        for pump in pumps:
            pump.join(timeout=2)
        with self._lock:
            self.process = None
        return status

    def stop(self, *_: object) -> None:
        self.stopping.set()

    # -- the WAL while Litestream is down ------------------------------------------------------

    def _wait_down(self, seconds: float) -> None:
        """Wait ``seconds`` (Litestream exited and is not started again meanwhile), keeping
        each WAL under its bound every poll interval."""
        end = time.monotonic() + seconds
        while True:
            try:
                self._bound_wals()
            except Exception:  # the next turn tries again; the log says why
                logger.exception("wal checkpoint failed")
            left = end - time.monotonic()
            if left <= 0 or self.stopping.wait(min(left, self.poll_interval)):
                return

    def _bound_wals(self) -> None:
        """TRUNCATE-checkpoint each file whose WAL is past the bound. Only called between
        two Litestream runs: the previous one has exited and been waited for."""
        with self._lock:
            if self.process is not None:  # never while Litestream runs
                return
        bound = self.replica.wal_max_bytes
        for file in self.files:
            wal = file.path + "-wal"
            before = file_size(wal)
            if before <= bound or self.stopping.is_set():
                continue
            done = checkpoint_file(file.path, self.checkpoint_busy_ms)
            log(
                logging.WARNING if done else logging.ERROR,
                "wal checkpointed while litestream is down"
                if done
                else "wal checkpoint while litestream is down did not finish (readers)",
                plane=file.name,
                wal_bytes_before=before,
                wal_bytes_after=file_size(wal),
                wal_max_bytes=bound,
            )

    def _renew(self) -> None:
        """Stop Litestream (it syncs what is left first); the run loop starts it again."""
        with self._lock:
            process = self.process
        if process is None or process.poll() is not None:
            return
        self._renewing.set()
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)

    # -- whether each replica can be restored from -------------------------------------------

    def _check_loop(self) -> None:
        wait = self.check_interval
        while not self.stopping.wait(wait):
            try:
                renewed = self._check_restorable()
            except Exception:  # the next check tries again; the log says why
                logger.exception("replica check failed")
                renewed = False
            # after a restart, look again soon: health stays degraded until then
            wait = min(self.check_interval, CHECK_MIN / 2) if renewed else self.check_interval

    def _check_restorable(self) -> bool:
        """``restore -dry-run`` per file a sync has reached; True if Litestream was started
        again because a replica held nothing to restore from."""
        empty = []
        for file in self.files:
            state = self.states[file.name]
            if state.last_sync_at is None:  # nothing has reached the replica yet
                continue
            done = self._dry_run(file)
            if done is None:
                continue
            if done.returncode == 0:
                state.restorable = True
            elif NO_BACKUP in done.stderr:
                state.restorable = False
                empty.append(file.name)
            # any other failure (the replica unreachable, say) shows in the lag
        if not empty:
            return False
        self._write_states()
        log(
            logging.ERROR,
            "the replica holds nothing to restore from; starting litestream again to "
            "write a snapshot",
            plane=",".join(empty),
        )
        self._renew()
        return True

    def _dry_run(self, file: ReplicatedFile) -> subprocess.CompletedProcess[str] | None:
        cmd = [self.binary, "restore", "-config", self.config_path, "-no-expand-env"]
        cmd += ["-dry-run", "-o", os.path.join(self.workdir, "dry-run.db"), file.path]
        try:
            return subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                env=litestream_env(),
                stdin=subprocess.DEVNULL,
                timeout=CHECK_TIMEOUT,
                preexec_fn=die_with_parent,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None

    # -- Litestream's output -----------------------------------------------------------------

    def _pump(self, stream: IO[bytes], is_stderr: bool) -> None:
        for raw in iter(stream.readline, b""):
            with contextlib.suppress(Exception):  # a line never stops the pump
                self._line(raw, is_stderr)
        stream.close()

    def _line(self, raw: bytes, is_stderr: bool) -> None:
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return
        try:
            data: Any = orjson.loads(text)
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            level = logging.WARNING if is_stderr else logging.INFO
            log(level, "litestream: output", source="litestream", error=scrub(text, self.secrets))
            return
        fields: dict[str, Any] = {"source": "litestream"}
        plane = self._file_of(data)
        if plane is not None:
            fields["plane"] = plane
        txid = data.get("txid")
        if isinstance(txid, str | int) and not isinstance(txid, bool):
            fields["txid"] = str(txid)[:20]
        if data.get("error") is not None:
            fields["error"] = scrub(str(data["error"]), self.secrets)
        message = scrub(str(data.get("msg", "")), self.secrets, limit=120)
        level = LEVELS.get(str(data.get("level", "INFO")).upper(), logging.INFO)
        log(level, f"litestream: {message}", **fields)

    def _file_of(self, data: dict[str, Any]) -> str | None:
        for key in ("db", "path"):
            value = data.get(key)
            if isinstance(value, str):
                name = self.by_path.get(os.path.realpath(value)) or self.by_base.get(value)
                if name is not None:
                    return name
        return None

    # -- how far the replicas are --------------------------------------------------------------

    def _poll_loop(self) -> None:
        while not self.stopping.wait(self.poll_interval):
            try:
                self._poll()
            except Exception:  # the lag then grows: health says so, the log says why
                logger.exception("replication state not written")

    def _poll(self) -> None:
        synced = self._last_syncs()
        now = time.time()
        for name, at in synced.items():
            state = self.states[name]
            if at is not None and at > (state.last_sync_at or 0.0):
                state.last_sync_at = at
        self._write_states(now)

    def _last_syncs(self) -> dict[str, float | None]:
        """``last_sync_at`` per file from Litestream's control socket; {} if it cannot say."""
        if not os.path.exists(self.socket_path):
            return {}
        try:
            transport = httpx.HTTPTransport(uds=self.socket_path)
            with httpx.Client(transport=transport, timeout=2.0) as client:
                body = client.get("http://litestream/list").json()
        except (httpx.HTTPError, ValueError, OSError):
            return {}
        found: dict[str, float | None] = {}
        for entry in body.get("databases", []) if isinstance(body, dict) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
                continue
            name = self.by_path.get(os.path.realpath(entry["path"]))
            if name is not None:
                found[name] = parse_time(entry.get("last_sync_at"))
        return found

    def _write_states(self, now: float | None = None) -> None:
        with self._lock:
            process = self.process
        running = process is not None and process.poll() is None
        for file in self.files:
            state = self.states[file.name]
            state.updated_at = time.time() if now is None else now
            state.litestream_running = running
            state.litestream_pid = process.pid if running and process is not None else None
            state.restarts = self.restarts
            with contextlib.suppress(OSError):
                write_state(file.path, state)


def log(level: int, event: str, **fields: Any) -> None:
    logger.log(level, event, extra={"fields": fields})


def _files(values: Sequence[str]) -> list[ReplicatedFile]:
    files = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise SystemExit("ratatoskr replication: --file is NAME=PATH")
        files.append(ReplicatedFile(name, os.path.abspath(path)))
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ratatoskr.server.litestream_supervisor")
    parser.add_argument("--file", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--busy-timeout-ms", type=int, default=5000)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", default="json")
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per poll
    try:
        replica = replica_settings_from_env(os.environ)
    except ValueError as exc:
        log(logging.ERROR, "replication cannot start", error=str(exc))
        return 2
    binary = litestream_binary()
    if replica is None or binary is None:
        log(logging.ERROR, "replication cannot start", error="no replica URL or no litestream")
        return 2
    supervisor = Supervisor(replica, _files(args.file), args.busy_timeout_ms, binary)
    parent = os.getppid()
    signal.signal(signal.SIGTERM, supervisor.stop)
    signal.signal(signal.SIGINT, supervisor.stop)

    def orphaned() -> None:  # the parent-death signal's backstop
        while not supervisor.stopping.wait(1.0):
            if os.getppid() != parent:
                supervisor.stop()

    threading.Thread(target=orphaned, name="replica-parent", daemon=True).start()
    try:
        return supervisor.run()
    except Exception:  # frames and type only (the formatter's redaction), then health degrades
        logger.exception("replication supervisor failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
