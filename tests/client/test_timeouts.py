"""``timeout`` bounds a whole exchange on the httpx path too (an ``https://`` server, or an
httpx client of the caller's): an answer dripped a byte every 50 ms (seconds in all), or
never sent, ends the call after about ``timeout``, for both clients, whatever the caller's
httpx client's own timeout; an answer in time leaves its connection in the pool."""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ratatoskr.client import AsyncClient, Client, TransportFailed
from tests.client.scripted import Script, scripted

KEY = b"t" * 40
SCOPE = {"tenant": "t"}
# a call answered at once must end well within TIMEOUT on a loaded machine; LATE is past
# TIMEOUT, and before the quickest dripped answer would end (its body alone: 3.35 s)
TIMEOUT = 1.0
LATE = 2.5


@pytest.fixture
def tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Script, Path]]:
    """A TLS server whose certificate the client's own httpx client trusts."""
    with scripted(tmp_path, tls=True) as (url, script, cert):
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        yield url, script, cert


def trusting(cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


def cut_off(call: Callable[[], Any]) -> None:
    """``call`` raises ``TransportFailed``, its cause a ``TimeoutError``, about ``TIMEOUT``
    after it began."""
    started = time.monotonic()
    with pytest.raises(TransportFailed) as failed:
        call()
    assert isinstance(failed.value.__cause__, TimeoutError)
    assert time.monotonic() - started < LATE


async def acut_off(call: Callable[[], Awaitable[Any]]) -> None:
    started = time.monotonic()
    with pytest.raises(TransportFailed) as failed:
        await call()
    assert isinstance(failed.value.__cause__, TimeoutError)
    assert time.monotonic() - started < LATE


def slow_answers(client: Client, script: Script, *, own: bool) -> None:
    """A new connection's answer dripped, head included; then, on a kept-alive connection,
    a body dripped, an answer never sent and, on the client's own httpx client (see
    docs/client.md for a caller's), a head dripped."""
    script.how = "drip"
    cut_off(client.handshake)
    for how in ("drip", "dripbody", "silent") if own else ("dripbody", "silent"):
        script.how = "ok"
        assert client.memory.health()["status"] == "ok"
        script.how = how
        cut_off(client.memory.health)


async def aslow_answers(client: AsyncClient, script: Script) -> None:
    """As ``slow_answers``, and a head dripped on a kept-alive connection too."""
    script.how = "drip"
    await acut_off(client.handshake)
    for how in ("drip", "dripbody", "silent"):
        script.how = "ok"
        assert (await client.memory.health())["status"] == "ok"
        script.how = how
        await acut_off(client.memory.health)


def test_the_clients_own_https_client(tls: tuple[str, Script, Path]) -> None:
    url, script, _ = tls
    with Client(url, key=KEY, scope=SCOPE, timeout=TIMEOUT, retry=0) as client:
        slow_answers(client, script, own=True)


def test_the_async_clients_own_https_client(tls: tuple[str, Script, Path]) -> None:
    url, script, _ = tls

    async def scenario() -> None:
        async with AsyncClient(url, key=KEY, scope=SCOPE, timeout=TIMEOUT, retry=0) as client:
            await aslow_answers(client, script)

    asyncio.run(scenario())


def test_a_callers_httpx_client_keeps_to_the_clients_timeout(
    tls: tuple[str, Script, Path],
) -> None:
    """Not to the httpx client's own (5 s by default, or longer)."""
    url, script, cert = tls
    with (
        httpx.Client(verify=trusting(cert), timeout=60.0) as http,
        Client(url, key=KEY, scope=SCOPE, timeout=TIMEOUT, retry=0, http=http) as client,
    ):
        slow_answers(client, script, own=False)


def test_a_callers_async_httpx_client_keeps_to_the_clients_timeout(
    tls: tuple[str, Script, Path],
) -> None:
    url, script, cert = tls

    async def scenario() -> None:
        async with (
            httpx.AsyncClient(verify=trusting(cert), timeout=60.0) as http,
            AsyncClient(url, key=KEY, scope=SCOPE, timeout=TIMEOUT, retry=0, http=http) as aio,
        ):
            await aslow_answers(aio, script)

    asyncio.run(scenario())


def test_answers_in_time_keep_their_connection(tls: tuple[str, Script, Path]) -> None:
    """The deadline is dropped once the answer is read: the connection it would have cut
    serves the next call, after that deadline has passed."""
    url, script, _ = tls
    with Client(url, key=KEY, scope=SCOPE, timeout=TIMEOUT, retry=0) as client:
        client.handshake()
        assert client.memory.health()["status"] == "ok"
        threading.Event().wait(TIMEOUT + 0.2)  # past the first calls' deadlines
        assert client.memory.health()["status"] == "ok"
    assert script.connections == 1


def test_a_refused_connection_is_the_sockets_own_error(tmp_path: Path) -> None:
    """The cause is the socket's error (with httpx's as its cause), not a bare OSError."""
    with scripted(tmp_path, tls=False) as (url, _, _):
        pass  # closed: nothing listens on its port now
    with (
        httpx.Client() as http,
        Client(url, key=KEY, scope=SCOPE, http=http) as client,
        pytest.raises(TransportFailed) as failed,
    ):
        client.handshake()
    assert isinstance(failed.value.__cause__, ConnectionRefusedError)
    assert isinstance(failed.value.__cause__.__cause__, httpx.ConnectError)
