"""The client's connections at their edges, against a scripted socket server of the test's
own (ratatoskr never behaves so): a request taken on a connection that then closes
unanswered, an answer trickled a byte at a time, the caller's httpx client, a client
closed from ``with_scope`` and one ``AsyncClient`` over two event loops."""

from __future__ import annotations

import asyncio
import gc
import socketserver
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ratatoskr.client import AsyncClient, Client
from ratatoskr.client.errors import ClientClosed, PayloadTooLarge, TransportFailed
from ratatoskr.client.http11 import Http11Pool, MayHaveRun
from ratatoskr.client.http11_async import AsyncHttp11Pool
from tests.client.scripted import read_request, scripted
from tests.server.harness import KEY, Server

OK = b'{"ok":true,"result":{"status":"ok","reason":null}}'
REPLAYED = b'{"ok":false,"error":{"code":"auth.token_replayed","message":"replayed"}}'


def _answer(status: bytes, body: bytes) -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body)


class Scripted(socketserver.BaseRequestHandler):
    """``takes``: answers a connection's first request, takes its second and closes
    unanswered, and refuses any later sending as a replayed token. ``trickle``: answers
    a byte every 0.2 s."""

    def handle(self) -> None:
        how: str = self.server.how  # type: ignore[attr-defined]
        data = b""
        for n in range(2):
            read = read_request(self.request, data)
            if read is None:
                return
            data = read[1]
            if how == "trickle":
                for byte in _answer(b"200 OK", OK):
                    self.request.sendall(bytes([byte]))
                    time.sleep(0.2)
                return
            taken: list[int] = self.server.taken  # type: ignore[attr-defined]
            taken.append(n)
            if len(taken) > 2:
                self.request.sendall(_answer(b"401 Unauthorized", REPLAYED))
                return
            if n == 1:
                return  # taken, and the connection closes without an answer
            self.request.sendall(_answer(b"200 OK", OK))


def _scripted(how: str) -> Iterator[str]:
    served = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Scripted)
    served.daemon_threads = True
    served.how = how  # type: ignore[attr-defined]
    served.taken = []  # type: ignore[attr-defined]
    threading.Thread(target=served.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{served.server_address[1]}"
    finally:
        served.shutdown()
        served.server_close()


@pytest.fixture
def takes_then_drops() -> Iterator[str]:
    yield from _scripted("takes")


@pytest.fixture
def trickling() -> Iterator[str]:
    yield from _scripted("trickle")


def test_a_request_taken_on_a_connection_that_closes_unanswered_may_have_run(
    takes_then_drops: str,
) -> None:
    """Sent again, the request's token is refused as replayed: the call raises that it may
    have run (the same call again, same idempotency key, tells), never a token error."""
    pool = Http11Pool(takes_then_drops, timeout=5)
    assert pool.post("/x", b"{}", {}) == (200, OK)
    with pytest.raises(MayHaveRun):
        pool.post("/x", b"{}", {})


def test_the_async_pool_says_so_too(takes_then_drops: str) -> None:
    async def scenario() -> None:
        pool = AsyncHttp11Pool(takes_then_drops, timeout=5)
        assert await pool.post("/x", b"{}", {}) == (200, OK)
        with pytest.raises(MayHaveRun):
            await pool.post("/x", b"{}", {})
        await pool.aclose()

    asyncio.run(scenario())


def test_the_timeout_bounds_a_trickled_answer(trickling: str) -> None:
    """``timeout`` is for the whole exchange: an answer a byte every 0.2 s (about 15 s in
    all) ends the call after about the timeout, for both clients."""
    with Client(trickling, key=KEY, scope={"tenant": "t"}, timeout=1.0, retry=0) as client:
        started = time.monotonic()
        with pytest.raises(TransportFailed):
            client.handshake()
        assert time.monotonic() - started < 4.0

    async def scenario() -> None:
        async with AsyncClient(trickling, key=KEY, scope={"tenant": "t"}, timeout=1.0) as aio:
            started = time.monotonic()
            with pytest.raises(TransportFailed):
                await aio.handshake()
            assert time.monotonic() - started < 4.0

    asyncio.run(scenario())


def test_a_callers_httpx_client_serves_the_clients_url(server: Server) -> None:
    """Requests go to the URL the client was given, whatever ``base_url`` the caller's
    httpx client has (or none)."""
    for http in (httpx.Client(), httpx.Client(base_url="http://127.0.0.1:9")):
        with http, Client(server.url, key=KEY, scope={"tenant": "t"}, http=http) as client:
            assert client.memory.health()["status"] == "ok"


def test_a_password_in_the_url_stays_out_of_the_error() -> None:
    url = "http://svc:S3CRET-PASSWORD@127.0.0.1:9/?access_token=T0KEN"
    client = Client(url, key=KEY, scope={"tenant": "t"}, retry=0)
    with client, pytest.raises(TransportFailed) as failed:
        client.handshake()
    message = failed.value.message
    assert "S3CRET" not in message and "svc" not in message and "T0KEN" not in message
    assert "http://127.0.0.1:9" in message


def test_closing_a_scoped_client_closes_it_alone(server: Server) -> None:
    with Client(server.url, key=KEY, scope={"tenant": "t"}) as parent:
        child = parent.with_scope({"tenant": "t", "end_user": "u"})
        assert child.memory.health()["status"] == "ok"
        child.close()
        with pytest.raises(ClientClosed):
            child.memory.health()
        assert parent.memory.health()["status"] == "ok"


def test_one_async_client_over_two_event_loops(server: Server) -> None:
    """Connections of a finished ``asyncio.run`` are let go, not used from the next one;
    ``close`` is ``aclose``."""
    aio = AsyncClient(server.url, key=KEY, scope={"tenant": "t"})

    async def health() -> str:
        return str((await aio.memory.health())["status"])

    assert asyncio.run(health()) == "ok"
    assert asyncio.run(health()) == "ok"

    async def close() -> None:
        await aio.close()
        with pytest.raises(ClientClosed):
            await aio.memory.health()

    asyncio.run(close())


def test_connections_of_a_finished_event_loop_are_closed(tmp_path: Path) -> None:
    """Each ``asyncio.run`` after the first closes the connections the one before left,
    sockets included, as does ``aclose`` from a later loop: nothing is left for the garbage
    collector to warn about."""
    gc.collect()  # what earlier tests left, before this one's warnings are recorded
    with scripted(tmp_path, tls=False) as (url, _, _), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        aio = AsyncClient(url, key=KEY, scope={"tenant": "t"})
        pool = aio.transport
        assert isinstance(pool, AsyncHttp11Pool)

        async def burst() -> None:
            await asyncio.gather(*(aio.memory.health() for _ in range(3)))

        asyncio.run(burst())
        left = list(pool.idle)
        assert len(left) == 3
        asyncio.run(burst())
        assert all(c.writer.get_extra_info("socket").fileno() == -1 for c in left)
        left = list(pool.idle)
        asyncio.run(aio.aclose())
        assert all(c.writer.get_extra_info("socket").fileno() == -1 for c in left)
        del left, pool
        gc.collect()
    port = url.rsplit(":", 1)[1]
    ours = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
    assert [m for m in ours if port in m or "loop is closed" in m] == []


def test_an_async_burst_keeps_to_the_connection_bound(tmp_path: Path) -> None:
    """A burst of calls gathered at once opens no more connections than ``max_connections``
    (100 by default), the others waiting for one, and keeps no more afterwards."""

    async def burst(aio: AsyncClient, calls: int) -> None:
        async with aio:
            answers = await asyncio.gather(*(aio.memory.health() for _ in range(calls)))
            assert all(a["status"] == "ok" for a in answers)
            pool = aio.transport
            assert isinstance(pool, AsyncHttp11Pool)
            assert len(pool.idle) <= pool.max_connections

    for bound, calls in ((None, 300), (4, 40)):
        with scripted(tmp_path, tls=False) as (url, script, _):
            aio = (
                AsyncClient(url, key=KEY, scope={"tenant": "t"})
                if bound is None
                else AsyncClient(url, key=KEY, scope={"tenant": "t"}, max_connections=bound)
            )
            asyncio.run(burst(aio, calls))
            assert 1 <= script.connections <= (bound or 100)
    with pytest.raises(ValueError, match="max_connections"):
        AsyncClient("http://127.0.0.1:9", key=KEY, scope={"tenant": "t"}, max_connections=0)


def test_a_body_over_the_limit_is_refused_413_through_a_callers_httpx_client(
    server: Server, tenant: str
) -> None:
    """The server answers a body of megabytes over its limit with 413 and closes the
    connection: through an httpx client, blocking or asyncio, the call raises that 413,
    not the reset a client still writing the body meets; the connection serves on."""
    scope = {"tenant": tenant}
    huge = {"id": f"{tenant}-huge", "scope": scope, "pad": "x" * 15_000_000}

    with httpx.Client() as http, Client(server.url, key=KEY, scope=scope, http=http) as client:
        with pytest.raises(PayloadTooLarge) as refused:
            client.affect.put_many([huge], idempotency_key="h")
        assert refused.value.status == 413
        assert client.memory.health()["status"] == "ok"

    async def in_asyncio() -> None:
        async with (
            httpx.AsyncClient() as http,
            AsyncClient(server.url, key=KEY, scope=scope, http=http) as aio,
        ):
            for _ in range(3):
                with pytest.raises(PayloadTooLarge) as refused:
                    await aio.affect.put_many([huge], idempotency_key="h")
                assert refused.value.status == 413
            assert (await aio.memory.health())["status"] == "ok"

    asyncio.run(in_asyncio())
