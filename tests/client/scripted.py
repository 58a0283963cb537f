"""A scripted socket server for the transport's edges, plain or TLS: it reads each request
and answers as its ``how`` says (``ok``; ``drip``, a byte every 50 ms; ``dripbody``, the
head at once and the body a byte every 50 ms; ``silent``, never; ``drop``, the connection
closed unanswered),
counting the connections it accepted."""

from __future__ import annotations

import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

# a self-signed certificate for 127.0.0.1 (valid until 2126) and its key: test data only
CERT = """-----BEGIN CERTIFICATE-----
MIIBmjCCAUGgAwIBAgIUYoFNzMxRSscMGfNGuHpmxyGMMK4wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTIwNDE4MzQyMFoYDzIxMjYxMTEw
MTgzNDIwWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQWDH1GE0e5N1z39c5lj8kKzWQZbA18gpy6pcUNh24BV+lj8la0P5B6
GEJPx6fmC0LD7l9dUn6R67vxFWBKdVTno28wbTAdBgNVHQ4EFgQUenKvOQgxxm/F
VVA4077/DV2ki0QwHwYDVR0jBBgwFoAUenKvOQgxxm/FVVA4077/DV2ki0QwDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARhwR/AAABgglsb2NhbGhvc3QwCgYIKoZI
zj0EAwIDRwAwRAIgVql4Q28dZXigKrwbeoxPs/tTzyuHuvpXlF9UxuoSEDwCICgz
K8BAYH0iOEbP98uylKWjKiHlks/sbNLyiYe5jyLT
-----END CERTIFICATE-----
"""
KEY = """-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgXFmIG5OyZgCMWLe2
y2yp6gdh39XuFEb+xYqp+xdo9CqhRANCAAQWDH1GE0e5N1z39c5lj8kKzWQZbA18
gpy6pcUNh24BV+lj8la0P5B6GEJPx6fmC0LD7l9dUn6R67vxFWBKdVTn
-----END PRIVATE KEY-----
"""

HANDSHAKE = b'{"ok":true,"result":{"planes":{"memory":{"verbs":["health"]}}},"request_id":"h"}'
HEALTH = b'{"ok":true,"result":{"status":"ok","reason":null},"request_id":"r"}'


def answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def read_request(sock: socket.socket, data: bytes) -> tuple[bytes, bytes] | None:
    """One whole request's body from ``sock`` after ``data``, and what was read past it."""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            return None
        data += more
    head, _, data = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(data) < length:
        more = sock.recv(65536)
        if not more:
            return None
        data += more
    return data[:length], data[length:]


@dataclass
class Script:
    how: str = "ok"
    handshake_too: bool = True  # False: the handshake is answered at once whatever ``how``
    connections: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        script: Script = self.server.script  # type: ignore[attr-defined]
        context: ssl.SSLContext | None = self.server.tls  # type: ignore[attr-defined]
        script.connections += 1
        sock: socket.socket = self.request
        try:
            if context is not None:
                sock = context.wrap_socket(sock, server_side=True)
            data = b""
            while not script.stop.is_set():
                read = read_request(sock, data)
                if read is None:
                    return
                body, data = read
                handshake = b'"handshake"' in body
                reply = answer(HANDSHAKE if handshake else HEALTH)
                how = "ok" if handshake and not script.handshake_too else script.how
                if how == "drop":
                    return  # read, and the connection closed unanswered
                if how == "silent":
                    script.stop.wait(30)
                    return
                if how in ("drip", "dripbody"):
                    at = reply.index(b"\r\n\r\n") + 4 if how == "dripbody" else 0
                    sock.sendall(reply[:at])
                    for byte in reply[at:]:
                        sock.sendall(bytes([byte]))
                        if script.stop.wait(0.05):
                            return
                    continue
                sock.sendall(reply)
        except OSError:
            return  # the client gave up: what these scripts are for
        finally:
            if sock is not self.request:
                sock.close()  # the TLS socket (socketserver closes the plain one)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    request_queue_size = 1024  # a burst of connections is not refused (the default: 5)


@contextmanager
def scripted(tmp_path: Path, *, tls: bool) -> Iterator[tuple[str, Script, Path]]:
    """The server's URL, its script and the certificate file to trust."""
    cert = tmp_path / "cert.pem"
    key = tmp_path / "key.pem"
    cert.write_text(CERT)
    key.write_text(KEY)
    served = _Server(("127.0.0.1", 0), _Handler)
    script = Script()
    served.script = script  # type: ignore[attr-defined]
    context = None
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
    served.tls = context  # type: ignore[attr-defined]
    threading.Thread(target=served.serve_forever, args=(0.05,), daemon=True).start()
    scheme = "https" if tls else "http"
    try:
        yield f"{scheme}://127.0.0.1:{served.server_address[1]}", script, cert
    finally:
        script.stop.set()
        served.shutdown()
        served.server_close()
