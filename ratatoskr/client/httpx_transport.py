"""An httpx client behind the pools' ``post``: for an ``https://`` server, or the caller's
own (``http=``: TLS settings, proxies, event hooks).

The client's ``timeout`` bounds each exchange as a whole here too, whatever timeouts the
httpx client was made with: httpx's own are per phase and per read, so an answer dripped a
byte at a time would hold a call for as long as it drips. Each request carries timeouts
that are the time left until the exchange's deadline, read as httpx starts each phase
(waiting for a pooled connection, connecting, sending, waiting for the answer), so a
silent server is cut at the deadline. For asyncio the exchange runs under
``asyncio.timeout``. The blocking client shuts the connection's socket down at the deadline
(``_Deadline``), which ends a read under way; httpx shows that socket when it makes a new
connection, and for a kept-alive one only once the answer's head is in (but see
``HttpxTransport``'s ``own``): a head itself dripped on a kept-alive connection of a
caller's httpx client, or of the client's own with other calls under way, runs on, each
read bounded by the time left when the head was first awaited, and its body is cut as soon
as the head is in. A timeout raises
``TimeoutError``; any other failure the socket's own error (a ``ConnectionRefusedError``,
an ``ssl.SSLError``), each with httpx's exception as its cause.

httpx cannot wait for ``100 Continue``, so a body over the server's limit is written until
the server's reset; httpcore then reads the 413 the server sent first. The blocking client
reads it from the socket; for asyncio, ``Listening`` keeps the connection reading while a
large body goes out, so the 413 is not lost with the socket asyncio closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx

from ratatoskr.client.http11 import unsent

TOO_LONG = "the answer took longer than the timeout"


class TimeLeft(dict[str, float | None]):
    """httpx's per-request timeouts, each the time left until ``deadline`` when httpx (its
    transport, httpcore) asks for it, at the start of a phase."""

    def __init__(self, deadline: float) -> None:
        super().__init__(connect=None, read=None, write=None, pool=None)
        self.deadline = deadline

    def left(self) -> float:
        return max(0.001, self.deadline - time.monotonic())

    def get(self, key: str, default: Any = None) -> float | None:  # type: ignore[override]
        return self.left() if key in self else default

    def __getitem__(self, key: str) -> float | None:
        super().__getitem__(key)  # a KeyError for any other key
        return self.left()


# failures of httpx's that come before a byte of the request is sent
_BEFORE_SENDING = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class Progress:
    """How far an exchange got, from httpx's ``trace`` extension: a timeout before the
    request's head went out (while connecting) sent nothing. Not having seen a connection
    made says nothing (a kept-alive one, or a transport that does not trace)."""

    def __init__(self) -> None:
        self.connecting = False
        self.sending = False

    def saw(self, event: str) -> None:
        if event.startswith(("connection.connect_tcp.", "connection.start_tls.")):
            self.connecting = True
        elif event == "http11.send_request_headers.started":
            self.sending = True

    def unsent_timeout(self) -> bool:
        return self.connecting and not self.sending


def failure(exc: httpx.TransportError) -> OSError:
    """``socket_error(exc)``, marked unsent when ``exc`` came before the request went out."""
    error = socket_error(exc)
    if isinstance(exc, _BEFORE_SENDING):
        unsent(error)
    return error


def socket_error(exc: httpx.TransportError) -> OSError:
    """The error to report for ``exc``: a ``TimeoutError`` for httpx's timeouts, else a
    copy of the socket's own error that caused it (``OSError`` naming httpx's class when
    there is none)."""
    if isinstance(exc, httpx.TimeoutException):
        return TimeoutError(TOO_LONG)
    seen: set[int] = set()
    inner: BaseException | None = exc
    while inner is not None and id(inner) not in seen:
        seen.add(id(inner))
        if isinstance(inner, OSError):
            with contextlib.suppress(Exception):
                copy = type(inner)(*inner.args)
                return copy
        inner = inner.__cause__ or inner.__context__
    return OSError(type(exc).__name__)


class _Deadline:
    """Shuts an exchange's socket down at its deadline unless the exchange ended first: a
    read under way then ends at once, in the caller's thread (the socket is only shut
    down, never closed here: httpx closes the broken connection itself). The socket is
    learnt from httpx's trace of a new connection, else from the answer once its head is
    in; the deadline passed before that, it is shut down as soon as it is learnt."""

    def __init__(self, deadline: float, kept: socket.socket | None = None) -> None:
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.kept = kept  # the one kept-alive connection this exchange can be sent on
        self.progress = Progress()
        self.finished = False
        self.fired = False
        self.timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self.timer.daemon = True
        self.timer.start()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: a new connection's stream, once it is made."""
        self.progress.saw(event)
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self.learn(info.get("return_value"))
        elif event == "http11.send_request_headers.started" and self.sock is None and self.kept:
            self._learn(self.kept)  # no new connection was made: the kept-alive one

    def learn(self, stream: Any) -> None:
        get_info = getattr(stream, "get_extra_info", None)
        sock = get_info("socket") if get_info is not None else None
        if isinstance(sock, socket.socket):
            self._learn(sock)

    def _learn(self, sock: socket.socket) -> None:
        with self.lock:
            self.sock = sock
            if self.fired and not self.finished:
                self._shut()

    def _fire(self) -> None:
        with self.lock:
            if not self.finished:
                self.fired = True
                self._shut()

    def _shut(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):  # the plain socket's, not TLS's, shutdown
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def finish(self) -> None:
        """After this the socket is left alone (its connection may go back to the pool)."""
        with self.lock:
            self.finished = True
        self.timer.cancel()


class HttpxTransport:
    """An ``httpx.Client`` behind the pools' ``post``: requests go to the client's URL,
    whatever ``base_url`` the httpx client has, bounded by ``timeout``.

    ``own``: the client made the httpx client and nothing else sends on it, so the sockets
    of the answers it read are the pool's kept-alive connections: with one of them and no
    other call under way, a call that opens no connection is sent on that one, and its
    deadline can cut it before the answer's head is in. (On a caller's httpx client that
    guess could name a connection another of its requests is using: not made there.)"""

    def __init__(
        self, http: httpx.Client, base_url: str, timeout: float, *, own: bool = False
    ) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.own = own
        self.lock = threading.Lock()
        self.under_way = 0
        self.kept_alive: set[socket.socket] = set()

    def _start(self) -> socket.socket | None:
        """A call begins: the connection it will be sent on, if no new one is made and that
        can be known."""
        if not self.own:
            return None
        with self.lock:
            self.kept_alive = {s for s in self.kept_alive if s.fileno() != -1}
            alone = self.under_way == 0 and len(self.kept_alive) == 1
            self.under_way += 1
            return next(iter(self.kept_alive)) if alone else None

    def _end(self, cut: _Deadline, answered: bool) -> None:
        if not self.own:
            return
        with self.lock:
            self.under_way -= 1
            if cut.sock is not None:
                if answered and cut.sock.fileno() != -1:
                    self.kept_alive.add(cut.sock)
                else:
                    self.kept_alive.discard(cut.sock)

    @property
    def closed(self) -> bool:
        return self.http.is_closed

    def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        deadline = time.monotonic() + self.timeout
        cut = _Deadline(deadline, self._start())
        answered = False
        try:
            request = self.http.build_request(
                "POST",
                self.base_url + path,
                content=body,
                headers=dict(headers),
                extensions={"timeout": TimeLeft(deadline), "trace": cut.trace},
            )
            response = self.http.send(request, stream=True)
            try:
                cut.learn(response.extensions.get("network_stream"))
                chunks = list(response.iter_bytes())
                cut.finish()
            finally:
                response.close()
            answered = not cut.fired
        except httpx.TransportError as exc:
            if cut.fired or time.monotonic() >= deadline:
                late = TimeoutError(TOO_LONG)
                if isinstance(exc, _BEFORE_SENDING) or cut.progress.unsent_timeout():
                    unsent(late)
                raise late from exc
            raise failure(exc) from exc
        finally:
            cut.finish()
            self._end(cut, answered)
        if not answered:  # an answer whole at the deadline's instant: late all the same
            raise TimeoutError(TOO_LONG)
        return response.status_code, b"".join(chunks)

    def close(self) -> None:
        self.http.close()


LISTEN_BODY = 64 * 1024  # from this size the answer is listened for while the body goes out
KNOWN_BOUND = 256  # connections remembered before the closed ones are forgotten


def asyncio_transport(stream: Any) -> asyncio.Transport | None:
    """The asyncio transport under an httpcore network stream (anyio's socket stream, under
    its TLS stream for ``https://``), if it is one: ``None`` for any other kind."""
    inner = getattr(stream, "_stream", None)  # httpcore's AnyIOStream
    while inner is not None and not hasattr(inner, "_transport"):
        inner = getattr(inner, "transport_stream", None)  # anyio's TLSStream
    transport = getattr(inner, "_transport", None)
    return transport if isinstance(transport, asyncio.Transport) else None


class Listening:
    """Keeps reading the connections a large body may go out on while it is written.

    A server refusing a body over its limit answers 413 before reading it and closes the
    connection, so the client, still writing, meets a reset. httpcore then reads the
    answer, but anyio reads a connection only while it is asked for data, and asyncio
    closes the socket on the failed write, dropping the 413 the kernel held (the blocking
    client reads it from the socket). So while a large body is written, every connection
    this transport has used and the new one the request may open keep reading: asyncio
    reads the early answer into the connection's stream before the reset, and httpcore's
    read after the failed write gets it. Reading a connection another request of the same
    httpx client is using is harmless: what it reads is kept for that request."""

    def __init__(self) -> None:
        self.known: set[asyncio.Transport] = set()

    def learn(self, stream: Any) -> None:
        transport = asyncio_transport(stream)
        if transport is not None and transport not in self.known:
            if len(self.known) >= KNOWN_BOUND:
                self.known = {t for t in self.known if not t.is_closing()}
            if not transport.is_closing():
                self.known.add(transport)

    def listen(self) -> None:
        self.known = {t for t in self.known if not t.is_closing()}
        for transport in self.known:
            with contextlib.suppress(Exception):
                transport.resume_reading()


class AsyncHttpxTransport:
    """An ``httpx.AsyncClient`` of the caller's behind the pools' ``post`` (as
    ``HttpxTransport``), the exchange under ``asyncio.timeout``; a large body is written
    while its connection is read (``Listening``)."""

    def __init__(self, http: httpx.AsyncClient, base_url: str, timeout: float) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.listening = Listening()

    def _trace(self, progress: Progress, large: bool) -> Any:
        """httpcore's ``trace``: the exchange's progress, and for a large body the
        connections to read while it goes out."""

        async def trace(event: str, info: dict[str, Any]) -> None:
            progress.saw(event)
            if not large:
                return
            if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
                self.listening.learn(info.get("return_value"))
            elif event == "http11.send_request_body.started":
                self.listening.listen()

        return trace

    @property
    def closed(self) -> bool:
        return self.http.is_closed

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        deadline = time.monotonic() + self.timeout
        progress = Progress()
        try:
            async with asyncio.timeout(self.timeout):
                request = self.http.build_request(
                    "POST",
                    self.base_url + path,
                    content=body,
                    headers=dict(headers),
                    extensions={
                        "timeout": TimeLeft(deadline),
                        "trace": self._trace(progress, len(body) >= LISTEN_BODY),
                    },
                )
                response = await self.http.send(request, stream=True)
                self.listening.learn(response.extensions.get("network_stream"))
                try:
                    content = await response.aread()
                finally:
                    await response.aclose()
        except TimeoutError as exc:
            late = TimeoutError(TOO_LONG)
            if progress.unsent_timeout():
                unsent(late)
            raise late from exc
        except httpx.TransportError as exc:
            raise failure(exc) from exc
        return response.status_code, content

    async def aclose(self) -> None:
        await self.http.aclose()
