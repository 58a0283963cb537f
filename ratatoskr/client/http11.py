"""The client's own HTTP/1.1 over keep-alive sockets, for a plain ``http://`` server.

A wire call is one ``POST`` with a ``Content-Length`` body and one JSON answer, and httpx's
general machinery (request and response models, header normalisation, its h11 state
machine, anyio) costs ~0.5 ms of CPU a call: more than a scoped search takes the server, and
on a machine the client shares with the server, CPU taken from it. This speaks exactly
what the wire needs: a request head and body written at once, the answer's status, headers
and body (``Content-Length``, ``chunked`` or until close) read back; connections kept
alive in a pool and closed when the server says ``Connection: close``.

A pooled connection the server has meanwhile closed (its keep-alive timeout, 5 s) fails
before a byte of the answer arrives: the request is then sent once more, as it was, token
included, on a new connection. The server closes only an idle connection, so it read
nothing; were the first sending ever taken (a worker dying before it answered, a proxy
closing the connection), the second is refused as a replayed token for a mutating verb:
never two executions. That refusal (``auth.token_replayed`` to a resent request) is raised
as ``MayHaveRun``, an ``OSError``, as any other failure is, for the client to report as
``TransportFailed``: the call may have run, and a retry with the same idempotency key
tells. The re-sent request keeps its token (a new ``jti`` would let the second sending run
too); any other answer to it, another token error included, is the call's own.

``timeout`` bounds a whole exchange, connecting, sending and every read of the answer
together, not each read: a server trickling its answer a byte at a time cannot hold a call
past it.

A body of ``EXPECT_BODY`` bytes or more is asked for first (``Expect: 100-continue``): the
server answers a body over its limit with 413 before reading it and closes the connection,
and a client still writing megabytes would see the reset, not the answer. The body goes
out on ``100 Continue``, or after ``CONTINUE_WAIT`` seconds of silence (a server or proxy
that ignores the header); any other answer is the call's, and the body is never sent.

Here the framing both clients share and the blocking pool (``Http11Pool``); the asyncio
pool is ``http11_async``. ``https://`` URLs and callers who need proxies, TLS settings or
their own hooks pass an httpx client instead (``http=``), which ``httpx_transport`` adapts.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import orjson

MAX_HEAD = 64 * 1024
_SMALL_BODY = 64 * 1024  # below this, head and body go out as one write
EXPECT_BODY = 1024 * 1024  # from this size the server is asked before the body is sent
CONTINUE_WAIT = 1.0  # seconds to wait for ``100 Continue`` before sending anyway


class IncompleteAnswer(OSError):
    """The connection ended before the answer did."""


class StaleConnection(OSError):
    """A pooled connection was closed by the server before it answered anything."""


_UNSENT = "ratatoskr_unsent"


def unsent(exc: BaseException) -> None:
    """Mark ``exc`` as a failure before any of the request was sent (a refused or timed-out
    connect): the call cannot have run. An unmarked failure may have come after."""
    setattr(exc, _UNSENT, True)


def was_sent(exc: BaseException) -> bool:
    """Whether the request may have reached the server before ``exc``."""
    return getattr(exc, _UNSENT, False) is not True


class MayHaveRun(OSError):
    """A request resent after its connection closed unanswered was refused as a replayed
    token: the first sending reached the server, which may have run the call."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    authority: str

    @classmethod
    def of(cls, base_url: str) -> Endpoint:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError("the built-in transport speaks plain http:// only")
        if parts.path not in ("", "/"):
            raise ValueError("the server's URL must not have a path")
        port = parts.port or 80
        return cls(parts.hostname, port, f"{parts.hostname}:{port}")


def request_head(endpoint: Endpoint, path: str, headers: Mapping[str, str], size: int) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {endpoint.authority}"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value:
            raise ValueError(f"the {name} header holds a line break")
        lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {size}")
    if size >= EXPECT_BODY:
        lines.append("Expect: 100-continue")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass
class Head:
    """The answer's status line and the headers that frame its body."""

    status: int
    length: int | None
    chunked: bool
    close: bool

    @classmethod
    def parse(cls, raw: bytes) -> Head:
        """From the raw head (without its final blank line): the three headers that frame
        the body are looked up in the lowered bytes, not every header split out."""
        if not raw.startswith(b"HTTP/1.") or not raw[9:12].isdigit():
            raise IncompleteAnswer("not an HTTP/1.1 answer")
        low = raw.lower()
        length_text = _header(low, b"content-length")
        chunked = b"chunked" in (_header(low, b"transfer-encoding") or b"")
        connection = _header(low, b"connection") or b""
        close = b"close" in connection or (raw[7:8] == b"0" and b"keep-alive" not in connection)
        length = int(length_text) if length_text is not None and not chunked else None
        if length is None and not chunked:
            close = True  # the body runs to the end of the connection
        return cls(int(raw[9:12]), length, chunked, close)


def interim(status: int) -> bool:
    """An informational answer that comes before the final one (``103 Early Hints`` from a
    proxy, ``102 Processing``): headers only, to be skipped (RFC 9110, 15.2). ``101``
    switches protocols, which a wire call never asks for: it is final, and not HTTP."""
    return 100 <= status < 200 and status != 101


def _header(low: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` in the lowered head ``low``, if it is there."""
    at = low.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    end = low.find(b"\r\n", start)
    return low[start : end if end >= 0 else len(low)].strip()


# -- blocking -------------------------------------------------------------------------------


class _Reader:
    """Buffered reads from a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.received = False  # whether any byte of the answer came
        self.deadline: float | None = None  # ``time.monotonic()`` the exchange must end by

    def fill(self) -> bool:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the answer took longer than the timeout")
            self.sock.settimeout(left)
        data = self.sock.recv(65536)
        if not data:
            return False
        self.received = True
        self.buffer += data
        return True

    def until(self, mark: bytes, limit: int = MAX_HEAD) -> bytes:
        while True:
            at = self.buffer.find(mark)
            if at >= 0:
                out = bytes(self.buffer[:at])
                del self.buffer[: at + len(mark)]
                return out
            if len(self.buffer) > limit or not self.fill():
                raise IncompleteAnswer("the connection ended inside the answer's head")

    def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self.fill():
                raise IncompleteAnswer("the connection ended inside the answer's body")
        out = bytes(self.buffer[:size])
        del self.buffer[:size]
        return out

    def rest(self) -> bytes:
        while self.fill():
            pass
        out = bytes(self.buffer)
        self.buffer.clear()
        return out


def _read_body(reader: _Reader, head: Head) -> bytes:
    if head.chunked:
        parts: list[bytes] = []
        while True:
            size = int(reader.until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                while reader.until(b"\r\n"):
                    pass  # trailers, up to the empty line
                return b"".join(parts)
            parts.append(reader.exactly(size))
            reader.exactly(2)
    if head.length is not None:
        return reader.exactly(head.length)
    return reader.rest()


class Connection:
    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.timeout = timeout
        self.sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = _Reader(self.sock)

    def exchange(
        self, head: bytes, body: bytes, deadline: float | None = None
    ) -> tuple[int, bytes, bool]:
        """Status, body, and whether the connection may be used again; by ``deadline``
        (``time.monotonic()``, default ``timeout`` from now)."""
        self.reader.received = False
        self.reader.deadline = time.monotonic() + self.timeout if deadline is None else deadline
        self.sock.settimeout(max(0.001, self.reader.deadline - time.monotonic()))
        try:
            if len(body) < _SMALL_BODY:
                self.sock.sendall(head + body)
            elif len(body) < EXPECT_BODY:
                self.sock.sendall(head)
                self.sock.sendall(body)
            else:
                early = self._ask(head)
                if early is not None:  # answered without the body (a 413): never sent
                    return early.status, _read_body(self.reader, early), False
                self.sock.sendall(body)
            parsed = self._final_head()
        except OSError as exc:
            if not self.reader.received and not isinstance(exc, TimeoutError):
                raise StaleConnection(str(exc)) from exc
            raise
        content = _read_body(self.reader, parsed)
        return parsed.status, content, not parsed.close and not self.reader.buffer

    def _final_head(self) -> Head:
        """The final answer's head, past any interim ones."""
        while True:
            parsed = Head.parse(self.reader.until(b"\r\n\r\n"))
            if not interim(parsed.status):
                return parsed

    def _ask(self, head: bytes) -> Head | None:
        """Send ``head`` (which expects ``100 Continue``) and wait for the server's word:
        ``None`` to send the body (a 100, or silence), else its final answer's head."""
        self.sock.sendall(head)
        deadline = self.reader.deadline
        wait = time.monotonic() + CONTINUE_WAIT
        self.reader.deadline = wait if deadline is None else min(wait, deadline)
        try:
            parsed = Head.parse(self.reader.until(b"\r\n\r\n"))
            while interim(parsed.status) and parsed.status != 100:
                parsed = Head.parse(self.reader.until(b"\r\n\r\n"))
        except TimeoutError:
            if deadline is not None and time.monotonic() >= deadline:
                raise
            return None  # a server that ignores Expect: the body goes out now
        finally:
            self.reader.deadline = deadline
        if deadline is not None:
            self.sock.settimeout(max(0.001, deadline - time.monotonic()))
        return None if parsed.status == 100 else parsed

    def close(self) -> None:
        self.sock.close()


class Http11Pool:
    """Keep-alive connections to one server, each used by one call at a time."""

    def __init__(self, base_url: str, timeout: float) -> None:
        self.endpoint = Endpoint.of(base_url)
        self.timeout = timeout
        self.idle: deque[Connection] = deque()
        self.lock = threading.Lock()
        self.closed = False

    def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        head = request_head(self.endpoint, path, headers, len(body))
        deadline = time.monotonic() + self.timeout
        with self.lock:
            conn = self.idle.pop() if self.idle else None
        if conn is not None:
            try:
                return self._exchange(conn, head, body, deadline)
            except StaleConnection:
                pass  # closed by the server while idle: it read nothing; a new connection
            return resent(self._exchange(self._open(deadline), head, body, deadline))
        try:
            fresh = self._open(deadline)
        except OSError as exc:
            unsent(exc)  # (not after a stale connection: that sending may have run)
            raise
        return self._exchange(fresh, head, body, deadline)

    def _open(self, deadline: float) -> Connection:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no time left to connect")
        return Connection(self.endpoint, left)

    def _exchange(
        self, conn: Connection, head: bytes, body: bytes, deadline: float
    ) -> tuple[int, bytes]:
        try:
            status, content, reusable = conn.exchange(head, body, deadline)
        except BaseException:
            conn.close()
            raise
        with self.lock:
            kept = reusable and not self.closed
            if kept:
                self.idle.append(conn)
        if not kept:
            conn.close()
        return status, content

    def close(self) -> None:
        with self.lock:
            self.closed = True
            while self.idle:
                self.idle.pop().close()


def resent(answer: tuple[int, bytes]) -> tuple[int, bytes]:
    """The answer to a request sent again, with the same token, after its first connection
    closed unanswered: a replayed token there means the first sending used that token, so
    it reached the server. Any other answer, another 401 included (a bad signature, an
    expired or mis-bound token), is the call's own, raised as its class."""
    status, content = answer
    if status == 401 and _code(content) == "auth.token_replayed":
        raise MayHaveRun("the connection closed unanswered after the server took the call")
    return answer


def _code(content: bytes) -> str | None:
    """The error code of a wire answer, if it is one."""
    try:
        answer = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    error = answer.get("error") if isinstance(answer, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None
