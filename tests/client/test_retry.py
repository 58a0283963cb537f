"""Retries against a real server answering 503 because another holds its memory store's
write lock (another process the SQLite file's, another session PostgreSQL's table lock,
which the server's ``lock_timeout`` turns into a refusal): the same body (so the same
idempotency key) with a fresh token each time, until the lock goes and the write lands
once; nothing but a retryable error is retried, and the client's log names the error,
never the content."""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from ratatoskr.client import AsyncClient, Client, InvalidArguments, Retry, Unavailable
from tests.backends import serve_env
from tests.client.conftest import passed_on
from tests.lock_holder import holding_the_lock
from tests.server.harness import KEY, Server, poll, vec

SECRET = "RETRIED-CONTENT-MARKER"
PATIENT = Retry(attempts=60, base_delay=0.02, max_delay=0.1)


@pytest.fixture(scope="module")
def locked_server(backend_name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("locked")
    env = {"RATATOSKR_SQLITE_BUSY_TIMEOUT_MS": "100", "RATATOSKR_AUTH_TARPIT_MS": "0"}
    env.update(serve_env(backend_name, pg_options="-clock_timeout=100"), **passed_on())
    server = Server(root, env=env)
    try:
        yield server.start()
        assert server.terminate() == 0
    finally:
        server.kill()


class Sent:
    """What an httpx client sent to the memory route: each attempt's body and token."""

    def __init__(self) -> None:
        self.attempts: list[tuple[bytes, str]] = []

    def note(self, request: httpx.Request) -> None:
        if request.url.path == "/bifrost/memory-call":
            self.attempts.append((request.read(), request.headers["authorization"]))

    async def anote(self, request: httpx.Request) -> None:
        self.note(request)


def records(prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{prefix}-{i}",
            "embedding": vec(1, i),
            "scope": {"tenant": "t"},
            "distillate": SECRET,
        }
        for i in range(5)
    ]


class Holder:
    """The memory store's write lock, held by another until ``release``."""

    def __init__(self, server: Server) -> None:
        location = server.env["RATATOSKR_MEMORY_DB"]
        self.process: subprocess.Popen[bytes] | None = None
        self.session: psycopg.Connection[Any] | None = None
        if location.startswith("postgresql://"):
            self.session = psycopg.connect(location)
            self.session.execute("LOCK TABLE memory_chunks IN EXCLUSIVE MODE")
        else:
            self.process = holding_the_lock(Path(location))

    def release(self) -> None:
        if self.session is not None:
            self.session.rollback()
            self.session.close()
        if self.process is not None:
            self.process.communicate(b"", timeout=10)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.session is not None and not self.session.closed:
            self.session.close()


def test_a_locked_store_is_retried_until_the_write_lands(
    locked_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    sent = Sent()
    http = httpx.Client(base_url=locked_server.url, event_hooks={"request": [sent.note]})
    with Client(locked_server.url, key=KEY, scope={"tenant": "t"}, retry=PATIENT, http=http) as c:
        c.handshake()
        holder = Holder(locked_server)
        try:
            with (
                caplog.at_level(logging.WARNING, logger="ratatoskr.client"),
                ThreadPoolExecutor(1) as pool,
            ):
                pending = pool.submit(
                    c.memory.upsert_many, records("sync"), idempotency_key="locked"
                )
                poll(lambda: len(sent.attempts) >= 3 or None, 30, "three refused attempts")
                holder.release()
                result = pending.result(timeout=30)
                attempts = list(sent.attempts)
        finally:
            holder.kill()
        assert result == {"upserted": 5, "replayed": False}
        assert [r["revision"] for r in c.memory.get_many([f"sync-{i}" for i in range(5)])] == [
            1
        ] * 5
    bodies = {body for body, _ in attempts}
    tokens = [token for _, token in attempts]
    assert len(bodies) == 1 and len(set(tokens)) == len(tokens) >= 3
    outcomes = [
        line.get("outcome")
        for line in locked_server.log_lines()
        if line.get("event") == "bifrost.call" and line.get("verb") == "upsert_many"
    ]
    assert outcomes[-1] == "ok" and set(outcomes[:-1]) == {"memory.unavailable"}
    retried = [r.getMessage() for r in caplog.records if r.name == "ratatoskr.client"]
    assert len(retried) == len(tokens) - 1
    assert all("code=memory.unavailable" in line for line in retried)
    assert not any(SECRET in line for line in retried)


def test_without_retries_the_503_is_raised(locked_server: Server) -> None:
    sent = Sent()
    http = httpx.Client(base_url=locked_server.url, event_hooks={"request": [sent.note]})
    with Client(locked_server.url, key=KEY, scope={"tenant": "t"}, retry=0, http=http) as c:
        c.handshake()
        holder = Holder(locked_server)
        try:
            with pytest.raises(Unavailable) as caught:
                c.memory.upsert_many(records("once"), idempotency_key="once")
        finally:
            holder.release()
    error = caught.value
    assert (error.code, error.status, error.retryable) == ("memory.unavailable", 503, True)
    assert "lock" in error.message  # the reason says what is going on, on either backend
    assert len(sent.attempts) == 1


def test_only_a_retryable_error_is_retried(locked_server: Server) -> None:
    sent = Sent()
    http = httpx.Client(base_url=locked_server.url, event_hooks={"request": [sent.note]})
    scope = {"tenant": "t"}
    with (
        Client(locked_server.url, key=KEY, scope=scope, retry=PATIENT, http=http) as c,
        pytest.raises(InvalidArguments),
    ):
        c.memory.search([1.0], top_k=1)
    assert len(sent.attempts) == 1


def test_the_async_client_retries_too(locked_server: Server) -> None:
    sent = Sent()

    async def scenario() -> dict[str, Any]:
        http = httpx.AsyncClient(base_url=locked_server.url, event_hooks={"request": [sent.anote]})
        scope = {"tenant": "t"}
        async with AsyncClient(
            locked_server.url, key=KEY, scope=scope, retry=PATIENT, http=http
        ) as c:
            await c.handshake()
            holder = Holder(locked_server)
            try:
                task = asyncio.create_task(
                    c.memory.upsert_many(records("async"), idempotency_key="async")
                )
                deadline = asyncio.get_running_loop().time() + 30
                while len(sent.attempts) < 2:
                    assert asyncio.get_running_loop().time() < deadline, "no refused attempts"
                    await asyncio.sleep(0.02)
            finally:
                holder.release()
            result = await asyncio.wait_for(task, 30)
            await http.aclose()
            return result

    assert asyncio.run(scenario()) == {"upserted": 5, "replayed": False}
    assert len({body for body, _ in sent.attempts}) == 1
    assert len({token for _, token in sent.attempts}) == len(sent.attempts) >= 2
