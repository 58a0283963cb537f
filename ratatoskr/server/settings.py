"""The server's settings, read from the environment and validated once, before anything serves.

Every failure is a ``SettingsError`` whose message starts with the setting's name and never
quotes a key, so an operator sees which variable to fix and the log holds nothing secret.
With no key setting at all, a development key is generated once into ``./data/heimdall.key``
(the file ``ratatoskr call`` reads too) so that ``make run`` works on a fresh machine.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ratatoskr.core.locations import AFFECT_DB_ENV as AFFECT_DB_ENV
from ratatoskr.core.locations import DEFAULT_AFFECT_DB as DEFAULT_AFFECT_DB
from ratatoskr.core.locations import DEFAULT_MEMORY_DB as DEFAULT_MEMORY_DB
from ratatoskr.core.locations import DIM_ENV as DIM_ENV
from ratatoskr.core.locations import MAX_DIM as MAX_DIM
from ratatoskr.core.locations import MEMORY_DB_ENV as MEMORY_DB_ENV
from ratatoskr.core.locations import env_int
from ratatoskr.memory.search.mirror import mirror_budget_from_env
from ratatoskr.postgres.database import PgSettings
from ratatoskr.postgres.url import LocationError, check_location, is_postgres_url
from ratatoskr.server.threads import DEFAULT_STORE_THREADS, MAX_STORE_THREADS
from ratatoskr.sqlite.database import (
    BUSY_TIMEOUT_ENV,
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_SYNCHRONOUS,
    MAX_DB_BYTES_ENV,
    SYNCHRONOUS_ENV,
    DatabaseSettings,
)
from ratatoskr.sqlite.replica import REPLICA_URL_ENV, ReplicaSettings, replica_settings_from_env
from ratatoskr.wire.http import (
    DEFAULT_AUTH_TARPIT_MAX,
    DEFAULT_AUTH_TARPIT_MS,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
)
from ratatoskr.wire.keys import (
    DEFAULT_KEY_FILE,
    KEY_ENV,
    KEY_FILE_ENV,
    KEYS_FILE_ENV,
    Keyring,
    keyring_from_env,
)
from ratatoskr.wire.tokens import (
    ALLOW_UNSCOPED_ENV,
    DEFAULT_CONSUMER,
    DEFAULT_ISSUER,
    DEFAULT_MAX_LIFETIME,
)

CONSUMER_ENV = "RATATOSKR_CONSUMER_ID"
ISSUER_ENV = "RATATOSKR_ISSUER"
MAX_BODY_ENV = "RATATOSKR_MAX_BODY_BYTES"
MAX_TTL_ENV = "RATATOSKR_MAX_TOKEN_TTL"
BODY_TIMEOUT_ENV = "RATATOSKR_BODY_TIMEOUT"
AUTH_TARPIT_MS_ENV = "RATATOSKR_AUTH_TARPIT_MS"
AUTH_TARPIT_MAX_ENV = "RATATOSKR_AUTH_TARPIT_MAX"
STORE_THREADS_ENV = "RATATOSKR_STORE_THREADS"
HOST_ENV = "RATATOSKR_HOST"
PORT_ENV = "RATATOSKR_PORT"
WORKERS_ENV = "RATATOSKR_WORKERS"
LOG_LEVEL_ENV = "RATATOSKR_LOG_LEVEL"
LOG_FORMAT_ENV = "RATATOSKR_LOG_FORMAT"

DEFAULT_DIM = 768
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_WORKERS = 2
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("json", "console")
DEV_KEY_BYTES = 32
TRUE = ("1", "true", "yes", "on")
FALSE = ("", "0", "false", "no", "off")


class SettingsError(ValueError):
    """A setting is missing or wrong; the message names it and never holds a secret."""


@dataclass(frozen=True)
class Settings:
    """Everything the server needs, validated. ``keyring`` never shows in a repr."""

    keyring: Keyring = field(repr=False)
    # a path or a postgresql:// URL, which may hold a password: never in a repr
    memory_db: str = field(default=DEFAULT_MEMORY_DB, repr=False)
    affect_db: str = field(default=DEFAULT_AFFECT_DB, repr=False)
    embedding_dim: int = DEFAULT_DIM
    allow_unscoped: bool = False
    consumer_id: str = DEFAULT_CONSUMER
    issuer: str = DEFAULT_ISSUER
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_token_ttl: int = DEFAULT_MAX_LIFETIME
    body_timeout: int = DEFAULT_BODY_TIMEOUT
    auth_tarpit_ms: int = DEFAULT_AUTH_TARPIT_MS
    auth_tarpit_max: int = DEFAULT_AUTH_TARPIT_MAX
    store_threads: int = DEFAULT_STORE_THREADS
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: int = DEFAULT_WORKERS
    log_level: str = "info"
    log_format: str = "json"
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    # continuous replication by Litestream (``RATATOSKR_REPLICA_URL``); None: off
    replica: ReplicaSettings | None = field(default=None, repr=False)
    # connections per worker and plane when a plane is on PostgreSQL
    postgres: PgSettings = field(default_factory=PgSettings)
    # where the development key lives when no key setting is given (None otherwise)
    dev_key_file: Path | None = None
    dev_key_generated: bool = False


def _int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    return env_int(env, name, default, low, high, SettingsError)


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env.get(name, "").strip().lower() or default
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}")
    return value


def _bool(env: Mapping[str, str], name: str) -> bool:
    value = env.get(name, "").strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise SettingsError(f"{name} must be true or false")


def _text(env: Mapping[str, str], name: str, default: str, max_chars: int = 256) -> str:
    value = env.get(name, "").strip() or default
    if len(value) > max_chars or not value.isprintable():
        raise SettingsError(f"{name} must be 1..{max_chars} printable characters")
    return value


def _db_location(env: Mapping[str, str], name: str, default: str, cwd: Path) -> str:
    """A ``postgresql://`` URL as given, or a file path (``_db_path``); any other URL-like
    value is refused, naming the setting (never quoting the value: a URL may hold a
    password)."""
    raw = env.get(name, "").strip() or default
    try:
        check_location(raw)
    except LocationError as exc:
        raise SettingsError(f"{name}: {exc}") from None
    if is_postgres_url(raw):
        return raw
    return _db_path(raw, name, cwd)


def _db_path(raw: str, name: str, cwd: Path) -> str:
    """The database path, its directory created if needed and checked writable."""
    path = Path(raw)
    if not path.is_absolute():
        path = cwd / path
    if path.is_dir():
        raise SettingsError(f"{name} names a directory, not a database file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        raise SettingsError(f"{name}: its directory cannot be created") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise SettingsError(f"{name}: its directory is not writable")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise SettingsError(f"{name}: the file is not readable and writable")
    return str(path)


def _keyring(
    env: Mapping[str, str], cwd: Path, generate: bool
) -> tuple[Keyring, Path | None, bool]:
    """The configured keyring, else the development key file (generated when allowed)."""
    try:
        ring = keyring_from_env(env)
    except ValueError as exc:  # keys.py names the setting, never the key
        raise SettingsError(str(exc)) from None
    if ring is not None:
        return ring, None, False
    path = cwd / DEFAULT_KEY_FILE
    generated = False
    if not path.exists():
        if not generate:
            raise SettingsError(
                f"no Heimdall key: set {KEY_ENV}, {KEY_FILE_ENV} or {KEYS_FILE_ENV}, "
                f"or create {DEFAULT_KEY_FILE}"
            )
        generated = write_dev_key(path)
    try:
        key = path.read_bytes().strip()
    except OSError:
        raise SettingsError(f"{DEFAULT_KEY_FILE} cannot be read") from None
    try:
        return Keyring(key, setting=str(DEFAULT_KEY_FILE)), path, generated
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def write_dev_key(path: Path) -> bool:
    """Create ``path`` holding a fresh random key, mode 0600; False if another process won."""
    cannot = (
        f"no Heimdall key setting, and the development key {path} cannot be created "
        "({}): set {} (a production key), or run where ./data can be written"
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file named data, a directory this user cannot write, ...
        raise SettingsError(cannot.format(exc.strerror, KEY_FILE_ENV)) from None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError as exc:
        raise SettingsError(cannot.format(exc.strerror, KEY_FILE_ENV)) from None
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(DEV_KEY_BYTES) + "\n")
    os.chmod(path, 0o600)
    return True


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    cwd: Path | None = None,
    generate_dev_key: bool = False,
) -> Settings:
    """Read and validate every setting; ``SettingsError`` names the first bad one."""
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    busy_ms = _int(env, BUSY_TIMEOUT_ENV, DEFAULT_BUSY_TIMEOUT_MS, 1, 600_000)
    max_db = _int(env, MAX_DB_BYTES_ENV, 0, 1 << 20, 1 << 50) or None
    try:
        replica = replica_settings_from_env(env)
        database = DatabaseSettings(
            synchronous=env.get(SYNCHRONOUS_ENV) or DEFAULT_SYNCHRONOUS,
            busy_timeout_ms=busy_ms,
            max_db_bytes=max_db,
            app_checkpoints=replica is None,
            replica_max_lag=None if replica is None else replica.max_lag,
        )
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    dim = _int(env, DIM_ENV, DEFAULT_DIM, 1, MAX_DIM)
    try:  # read again by each store it opens: a bad value is named here, before any file
        mirror_budget_from_env(env)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    memory_db = _db_location(env, MEMORY_DB_ENV, DEFAULT_MEMORY_DB, cwd)
    affect_db = _db_location(env, AFFECT_DB_ENV, DEFAULT_AFFECT_DB, cwd)
    try:
        postgres = PgSettings.from_env(env)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    if replica is not None and (is_postgres_url(memory_db) or is_postgres_url(affect_db)):
        raise SettingsError(
            f"{REPLICA_URL_ENV}: Litestream replicates SQLite files; a plane on PostgreSQL is "
            "replicated by the database itself (unset it)"
        )
    # two planes may share a PostgreSQL database (their tables do not collide), not a file
    if memory_db == affect_db and not is_postgres_url(memory_db):
        raise SettingsError(f"{MEMORY_DB_ENV} and {AFFECT_DB_ENV} must name different files")
    keyring, dev_key_file, generated = _keyring(env, cwd, generate_dev_key)
    return Settings(
        keyring=keyring,
        memory_db=memory_db,
        affect_db=affect_db,
        embedding_dim=dim,
        allow_unscoped=_bool(env, ALLOW_UNSCOPED_ENV),
        consumer_id=_text(env, CONSUMER_ENV, DEFAULT_CONSUMER),
        issuer=_text(env, ISSUER_ENV, DEFAULT_ISSUER),
        max_body_bytes=_int(env, MAX_BODY_ENV, DEFAULT_MAX_BODY_BYTES, 1024, 1 << 30),
        max_token_ttl=_int(env, MAX_TTL_ENV, DEFAULT_MAX_LIFETIME, 1, 3600),
        body_timeout=_int(env, BODY_TIMEOUT_ENV, DEFAULT_BODY_TIMEOUT, 1, 3600),
        # past 10 s a client's own timeout would fire first; 0 turns the tarpit off
        auth_tarpit_ms=_int(env, AUTH_TARPIT_MS_ENV, DEFAULT_AUTH_TARPIT_MS, 0, 10_000),
        auth_tarpit_max=_int(env, AUTH_TARPIT_MAX_ENV, DEFAULT_AUTH_TARPIT_MAX, 1, 65_536),
        store_threads=_int(env, STORE_THREADS_ENV, DEFAULT_STORE_THREADS, 1, MAX_STORE_THREADS),
        host=_text(env, HOST_ENV, DEFAULT_HOST),
        port=_int(env, PORT_ENV, DEFAULT_PORT, 1, 65535),
        workers=_int(env, WORKERS_ENV, DEFAULT_WORKERS, 1, 64),
        log_level=_choice(env, LOG_LEVEL_ENV, "info", LOG_LEVELS),
        log_format=_choice(env, LOG_FORMAT_ENV, "json", LOG_FORMATS),
        database=database,
        replica=replica,
        postgres=postgres,
        dev_key_file=dev_key_file,
        dev_key_generated=generated,
    )
