"""SIGKILL a worker while it handles a large ``upsert_many``.

The test finds the worker that holds the call's connection (``/proc/net/tcp`` and the
workers' descriptors), kills it right after the body is sent, and checks: the client sees
the call fail, gunicorn starts a replacement, the batch is all there or not there at all,
and a retry with the same idempotency key (a new token) converges.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

from tests.reliability.common import chunk, revisions, running, upsert
from tests.server.harness import envelope, ok, poll, token

RECORDS = 1000
DISTILLATE = "w" * 4000  # about 4 MB of body: seconds of work, not milliseconds


def _send(port: int, body: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = (
        "POST /bifrost/memory-call HTTP/1.1\r\nHost: ratatoskr\r\n"
        "Content-Type: application/json\r\n"
        f"Authorization: Bearer {token(body, 'memory', 'upsert_many')}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + body)
    return sock


def _answer(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk_ := sock.recv(65536):
            data += chunk_
            if b"\r\n\r\n" in data:
                break
    except OSError:  # reset by the dying worker
        pass
    return data


def test_a_worker_killed_mid_batch_leaves_all_or_nothing_and_a_retry_converges(
    tmp_path: Path,
) -> None:
    with running(tmp_path) as server:
        workers = server.worker_pids()
        assert len(workers) == 2
        batch = [chunk(f"k-{i:04d}", DISTILLATE) for i in range(RECORDS)]
        body = envelope("upsert_many", {"records": batch, "idempotency_key": "killed-batch"})
        sock = _send(server.port, body)
        try:
            client_port = sock.getsockname()[1]
            victim = poll(lambda: server.worker_serving(client_port), 10, "the serving worker")
            os.kill(victim, signal.SIGKILL)
            answer = _answer(sock)
        finally:
            sock.close()
        assert not answer.startswith(b"HTTP/1.1 200"), "the call finished before the kill"

        def replaced() -> list[int] | None:
            pids = server.worker_pids()
            started = server.output().count("Application startup complete")
            return pids if len(pids) == 2 and victim not in pids and started >= 3 else None

        assert victim not in poll(replaced, 30, "gunicorn to replace the killed worker")

        ids = [r["id"] for r in batch]
        present = revisions(server.url, "memory", ids)
        assert len(present) in (0, RECORDS), f"a partial batch: {len(present)} of {RECORDS}"
        result = ok(upsert(server.url, batch, "killed-batch"))
        assert result == {"upserted": RECORDS, "replayed": bool(present)}
        assert revisions(server.url, "memory", ids) == {cid: 1 for cid in ids}
        assert "Traceback" not in server.output()
