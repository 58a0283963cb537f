"""Real server processes for the end-to-end tests: start, poll until up, call, stop.

``python -m ratatoskr serve`` runs exactly as the Dockerfile runs it, with its settings
pointing into the test's tmp_path and its stdout/stderr captured to files (a pipe could fill
up and stall the server). Every wait polls with a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson

from ratatoskr.core.blas import THREAD_VARIABLES
from ratatoskr.memory.search.engine import LOADING_REASON
from ratatoskr.wire.tokens import mint_token

KEY = "server-tests-" + "k" * 40  # the marker tests check it never reaches a log
DIM = 8
TENANT = {"tenant": "acme"}
T = TypeVar("T")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def poll(check: Callable[[], T | None], timeout: float, what: str, step: float = 0.05) -> T:
    """``check()`` until it returns something other than None, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        # yield the CPU between probes; the deadline, not this pause, bounds the wait
        time.sleep(step)


def clean_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The test's environment without any RATATOSKR_*, metrics or BLAS thread setting (the
    server sets its own), plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RATATOSKR_")
        and k != "PROMETHEUS_MULTIPROC_DIR"
        and k not in THREAD_VARIABLES
    }
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class Server:
    """One ``ratatoskr serve`` process tree on a free port."""

    def __init__(
        self,
        root: Path,
        *,
        workers: int = 2,
        env: Mapping[str, str] | None = None,
        settings: bool = True,
    ) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        self.stdout_path = root / "server.stdout"
        self.stderr_path = root / "server.stderr"
        self.metrics_dir = root / "metrics"
        defaults = {
            "RATATOSKR_MEMORY_DB": str(root / "data" / "memory.db"),
            "RATATOSKR_AFFECT_DB": str(root / "data" / "affect.db"),
            "RATATOSKR_MEMORY_EMBEDDING_DIM": str(DIM),
            "RATATOSKR_HEIMDALL_KEY": KEY,
            "PROMETHEUS_MULTIPROC_DIR": str(self.metrics_dir),
        }
        self.env = clean_env({**(defaults if settings else {}), **(env or {})})
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        cmd = [sys.executable, "-m", "ratatoskr", "serve"]
        cmd += ["--port", str(self.port), "--workers", str(self.workers)]
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                cmd, cwd=self.root, env=self.env, stdout=out, stderr=err, start_new_session=True
            )
        self.wait_up()
        return self

    def wait_up(self, timeout: float = 30.0) -> None:
        """Until every worker has finished its lifespan and /healthz answers."""

        def up() -> bool | None:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"server exited early:\n{self.output()}")
            if self.output().count("Application startup complete") < self.workers:
                return None
            try:
                return httpx.get(self.url + "/healthz", timeout=2).status_code == 200 or None
            except httpx.HTTPError:
                return None

        poll(up, timeout, "the server to come up")
        poll(self._mirrors_loaded, timeout, "the workers' search mirrors to load")

    def _mirrors_loaded(self) -> bool | None:
        """Whether no worker (of a few probes: any may answer) still loads its mirror: until
        then the memory plane is served, degraded (``tests/memory/test_tail.py``)."""
        for _ in range(2 * self.workers + 4):
            try:
                body = httpx.get(self.url + "/readyz", timeout=2).json()
            except (httpx.HTTPError, ValueError):
                return None
            memory = body.get("planes", {}).get("memory")
            if memory is not None and str(memory.get("reason")).startswith(LOADING_REASON):
                return None
        return True

    def output(self) -> str:
        return self.stdout_path.read_text(errors="replace") + self.stderr_path.read_text(
            errors="replace"
        )

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.stdout_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                lines.append(orjson.loads(line))
        return lines

    def terminate(self, timeout: float = 40.0) -> int:
        """SIGTERM the master and wait for it; its exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        """Cleanup after a failed test: the whole process group this server started."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def worker_pids(self) -> list[int]:
        """The gunicorn workers: the live children of the ``serve`` process (the master)."""
        assert self.process is not None
        return children_of(self.process.pid)

    def worker_serving(self, client_port: int) -> int | None:
        """The worker holding the server side of the connection from ``client_port``."""
        inode = _server_socket_inode(self.port, client_port)
        if inode is None:
            return None
        target = f"socket:[{inode}]"
        for pid in self.worker_pids():
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return pid
                except OSError:
                    continue
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: it has exited, unreaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def children_of(parent: int) -> list[int]:
    """Live (not zombie) processes whose parent is ``parent``, from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if fields[0] != "Z" and int(fields[1]) == parent:
            pids.append(int(entry))
    return sorted(pids)


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (VmRSS from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _server_socket_inode(server_port: int, client_port: int) -> int | None:
    """The inode of the accepted socket 127.0.0.1:server_port <- 127.0.0.1:client_port."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == server_port and (
            int(remote.split(":")[1], 16) == client_port
        ):
            return int(fields[9])
    return None


def envelope(verb: str, args: Mapping[str, Any], **extra: Any) -> bytes:
    return orjson.dumps({"wire": "0.6", "verb": verb, "args": dict(args), **extra})


def token(body: bytes, plane: str, verb: str, **options: Any) -> str:
    return mint_token(
        KEY.encode(),
        plane=plane,
        verb=verb,
        scope=options.pop("scope", TENANT),
        sub=options.pop("sub", "worldtree"),
        body=body,
        **options,
    )


def post(url: str, path: str, body: bytes, bearer: str | None) -> httpx.Response:
    """One request on a fresh connection, so successive calls may reach different workers."""
    headers = {"Content-Type": "application/json"}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return httpx.post(url + path, content=body, headers=headers, timeout=30)


def call(
    url: str, plane: str, verb: str, args: Mapping[str, Any], **options: Any
) -> httpx.Response:
    body = envelope(verb, args)
    if plane == "*":
        return post(url, "/bifrost/handshake", body, token(body, "*", "handshake", **options))
    return post(url, f"/bifrost/{plane}-call", body, token(body, plane, verb, **options))


def ok(response: httpx.Response) -> Any:
    body = response.json()
    assert response.status_code == 200, body
    return body["result"]


def vec(*head: float) -> list[float]:
    return [float(x) for x in head] + [0.0] * (DIM - len(head))
