"""The client's own HTTP/1.1: keep-alive connections replaced when the server closed them,
large bodies both ways, and answers framed by ``chunked`` or by the end of the connection,
or after interim ``1xx`` answers (a real socket server of the test's own sends those:
ratatoskr never does)."""

from __future__ import annotations

import asyncio
import select
import socket
import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ratatoskr.client import AsyncClient, Client
from ratatoskr.client.http11 import Http11Pool
from ratatoskr.client.http11_async import AsyncHttp11Pool
from tests.server.harness import DIM, KEY, Server, vec


def closed_by_peer(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""


def test_a_connection_the_server_closed_while_idle_is_replaced(
    client: Client, server: Server, tenant: str
) -> None:
    """Both pools, waiting once for the server's keep-alive timeout (5 s) to close them."""

    async def scenario() -> None:
        async with AsyncClient(server.url, key=KEY, scope={"tenant": tenant}) as aio:
            pool, apool = client.transport, aio.transport
            assert isinstance(pool, Http11Pool) and isinstance(apool, AsyncHttp11Pool)
            assert client.memory.health()["status"] == "ok"
            assert (await aio.memory.health())["status"] == "ok"
            idle, aidle = pool.idle[-1], apool.idle[-1]
            deadline = asyncio.get_running_loop().time() + 30
            while not (closed_by_peer(idle.sock) and aidle.reader.at_eof()):
                assert asyncio.get_running_loop().time() < deadline, "never closed"
                await asyncio.sleep(0.05)
            assert client.memory.health()["status"] == "ok"
            assert (await aio.memory.health())["status"] == "ok"
            assert idle not in pool.idle and len(pool.idle) == 1
            assert aidle not in apool.idle and len(apool.idle) == 1

    asyncio.run(scenario())


def test_large_bodies_both_ways(client: Client, tenant: str) -> None:
    records: list[dict[str, Any]] = [
        {"id": f"{tenant}-{i}", "embedding": vec(1, i), "scope": {"tenant": tenant}}
        for i in range(1000)
    ]
    assert client.memory.upsert_many(records, idempotency_key="big")["upserted"] == 1000
    found = client.memory.get_many([r["id"] for r in records])
    assert [r["embedding"] for r in found] == [r["embedding"] for r in records]
    assert len(found[0]["embedding"]) == DIM


def test_after_the_server_closes_on_an_answer_the_next_call_reconnects(client: Client) -> None:
    with pytest.raises(Exception, match="payload_too_large"):
        client.memory.upsert_many(
            [{"id": "x", "embedding": vec(1), "distillate": "x" * 300_000}], idempotency_key="x"
        )
    assert client.memory.health()["status"] == "ok"


# -- answers ratatoskr never sends, from a socket server of the test's own ---------------

HANDSHAKE = b'{"ok":true,"result":{"planes":{"memory":{"verbs":["health"]}}},"request_id":"h"}'
HEALTH = b'{"ok":true,"result":{"status":"ok","reason":null},"request_id":"r"}'


HINTS = (
    b"HTTP/1.1 102 Processing\r\n\r\n"
    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
)


def framed(body: bytes, how: str) -> bytes:
    if how == "hints":  # interim answers a proxy may send before the final one
        return HINTS + b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    if how == "chunked":
        chunks = b"".join(
            b"%x;ext=1\r\n%s\r\n" % (len(body[i : i + 7]), body[i : i + 7])
            for i in range(0, len(body), 7)
        )
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        return head + chunks + b"0\r\nX-Trailer: t\r\n\r\n"
    if how == "close":
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + body
    return b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


class Answers(socketserver.BaseRequestHandler):
    """Reads one request at a time and answers it framed as the server's ``how`` says."""

    def handle(self) -> None:
        how: str = self.server.how  # type: ignore[attr-defined]
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                more = self.request.recv(65536)
                if not more:
                    return
                data += more
            head, _, data = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(data) < length:
                data += self.request.recv(65536)
            body, data = data[:length], data[length:]
            answer = HANDSHAKE if b'"handshake"' in body else HEALTH
            self.request.sendall(framed(answer, how))
            if how not in ("chunked", "hints"):
                return  # these framings end with the connection


@pytest.fixture(params=["chunked", "close", "http10", "hints"])
def odd_server(request: pytest.FixtureRequest) -> Iterator[str]:
    served = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Answers)
    served.daemon_threads = True
    served.how = request.param  # type: ignore[attr-defined]
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{served.server_address[1]}"
    finally:
        served.shutdown()
        served.server_close()


def test_chunked_and_connection_framed_answers(odd_server: str) -> None:
    """And interim answers (``102``, ``103 Early Hints``) before the final one, skipped."""
    settings: dict[str, Any] = {"key": KEY, "scope": {"tenant": "t"}, "timeout": 3, "retry": 0}
    with Client(odd_server, **settings) as client:
        for _ in range(3):
            assert client.memory.health() == {"status": "ok", "reason": None}

    async def scenario() -> None:
        async with AsyncClient(odd_server, **settings) as client:
            for _ in range(3):
                assert await client.memory.health() == {"status": "ok", "reason": None}

    asyncio.run(scenario())
