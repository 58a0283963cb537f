"""Readiness follows the database files; SIGTERM lets in-flight calls finish, then exits 0;
a master killed outright takes its workers with it."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import httpx
import pytest

from ratatoskr.memory.store import open_memory_store
from tests.server.harness import DIM, Server, alive, call, envelope, ok, poll, post, token, vec


def test_readyz_turns_503_when_a_database_becomes_unreadable(server: Server) -> None:
    assert httpx.get(server.url + "/readyz").status_code == 200
    # tests run as root, where chmod does not stop a read: overwrite the file instead
    with open(server.root / "data" / "memory.db", "r+b") as handle:
        handle.write(b"this is not a SQLite database. " * 8)

    def not_ready() -> httpx.Response | None:
        response = httpx.get(server.url + "/readyz")
        return response if response.status_code == 503 else None

    body = poll(not_ready, 10, "/readyz to answer 503").json()
    assert body["ready"] is False
    assert body["planes"]["memory"]["status"] == "down"
    assert body["planes"]["memory"]["reason"]
    assert body["planes"]["affect"]["status"] == "ok"
    assert httpx.get(server.url + "/healthz").status_code == 200  # liveness touches no file
    assert 'ratatoskr_plane_health{plane="memory"} 0.0' in httpx.get(server.url + "/metrics").text


def _read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a Content-Length: its status and body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection before answering"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(
        int(v) for k, _, v in (h.partition(":") for h in lines[1:]) if k.lower() == "content-length"
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection mid-body"
        rest += chunk
    return status, rest[:length]


def test_sigterm_drains_in_flight_calls_and_exits_0(server: Server) -> None:
    """Calls whose body is still arriving when SIGTERM lands are answered, and committed."""
    in_flight = []
    for i in range(4):
        record = {
            "id": f"d{i}",
            "embedding": vec(1, i),
            "scope": {"tenant": "acme"},
            "distillate": "x",
        }
        body = envelope("upsert_many", {"records": [record], "idempotency_key": f"drain-{i}"})
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        # a complete keep-alive request first: the worker has now accepted this connection
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: ratatoskr\r\n\r\n")
        assert _read_response(sock)[0] == 200
        head = (
            "POST /bifrost/memory-call HTTP/1.1\r\nHost: ratatoskr\r\n"
            "Content-Type: application/json\r\n"
            f"Authorization: Bearer {token(body, 'memory', 'upsert_many')}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        sock.sendall(head + body[:10])  # the call has started; its body is not complete
        in_flight.append((sock, body))

    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    poll(
        lambda: server.output().count('"event":"Shutting down"') >= server.workers or None,
        15,
        "both workers to begin shutting down",
    )
    for sock, body in in_flight:
        sock.sendall(body[10:])
    answers = [_read_response(sock) for sock, _ in in_flight]
    for sock, _ in in_flight:
        sock.close()
    assert [status for status, _ in answers] == [200] * len(in_flight), answers
    assert server.process.wait(timeout=40) == 0

    store = open_memory_store(str(server.root / "data" / "memory.db"), embedding_dim=DIM)
    try:
        assert [c["id"] for c in store.get_many([f"d{i}" for i in range(4)])] == [
            f"d{i}" for i in range(4)
        ]
    finally:
        store.close()


def test_workers_end_when_the_master_is_killed_outright(tmp_path: Path) -> None:
    """kill -9 of the master (as the OOM killer does): no worker serves on alone, answering
    calls its master no longer watches, and the port is free for the next start."""
    server = Server(tmp_path, workers=2).start()
    try:
        workers = server.worker_pids()
        assert len(workers) == 2
        ok(call(server.url, "memory", "describe_store", {}))
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        poll(lambda: not any(alive(pid) for pid in workers) or None, 30, "the workers to end")
        (tmp_path / "again").mkdir()
        again = Server(tmp_path / "again", workers=1)
        again.port, again.url = server.port, server.url
        again.start()
        try:
            ok(call(again.url, "memory", "describe_store", {}))
        finally:
            assert again.terminate() == 0
    finally:
        server.kill()


def test_a_worker_that_cannot_open_its_stores_still_answers_the_wire_and_the_probes(
    tmp_path: Path,
) -> None:
    """A worker replaced (a crash, the OOM killer) while a plane file is unusable keeps
    trying to open its stores; meanwhile it is alive, not ready, and every call gets the
    wire's 503, logged and counted, so the alerts on unavailable answers see it."""
    server = Server(tmp_path, workers=1)
    try:
        server.start()
        memory = server.root / "data" / "memory.db"
        memory.rename(memory.with_suffix(".moved"))
        memory.write_bytes(b"not a SQLite database. " * 64)
        first = server.worker_pids()
        os.kill(first[0], signal.SIGKILL)
        poll(
            lambda: True if "stores cannot be opened" in server.output() else None,
            30,
            "the new worker to say it cannot open its stores",
        )
        assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
        ready = httpx.get(server.url + "/readyz")
        assert ready.status_code == 503
        planes = ready.json()["planes"]
        assert {p: planes[p]["status"] for p in planes} == {"memory": "down", "affect": "down"}
        assert "cannot be opened" in planes["affect"]["reason"]
        body = envelope("list", {}, request_id="while-unopened")
        answer = post(server.url, "/bifrost/affect-call", body, token(body, "affect", "list"))
        assert answer.status_code == 503
        error = answer.json()
        assert error["ok"] is False and error["error"]["code"] == "affect.unavailable"
        assert error["error"]["retryable"] is True
        assert error["request_id"] == answer.headers["X-Request-ID"]
        metrics = httpx.get(server.url + "/metrics").text
        assert 'ratatoskr_plane_health{plane="memory"} 0.0' in metrics
        assert 'code="affect.unavailable",plane="affect"' in metrics
        lines = [
            line for line in server.log_lines() if line.get("request_id") == error["request_id"]
        ]
        assert {line["event"] for line in lines} >= {"bifrost.call"}
        memory.unlink()
        memory.with_suffix(".moved").rename(memory)  # the file back: the worker serves again
        poll(
            lambda: True if httpx.get(server.url + "/readyz").status_code == 200 else None,
            30,
            "the worker to open its stores",
        )
        assert server.terminate() == 0
    finally:
        server.kill()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGQUIT])
def test_sigint_or_sigquit_to_the_master_alone_stops_the_workers_promptly(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """What ``kill -INT`` or a process manager's stop signal sends: the master alone, which
    passes SIGQUIT to its workers. They stop taking calls and exit, not after the graceful
    timeout's SIGKILL."""
    server = Server(tmp_path, workers=2)
    try:
        server.start()
        assert server.process is not None
        workers = server.worker_pids()
        os.kill(server.process.pid, sig)
        assert server.process.wait(timeout=25) == 0  # the graceful timeout is 30 s
        assert not [pid for pid in workers if alive(pid)]
        assert "SIGKILL" not in server.output()
    finally:
        server.kill()
