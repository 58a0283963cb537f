"""A client that closes its connection before its body ended is logged and counted as
``client.disconnected`` (status 499, nothing sent), not as a malformed envelope it never
sent, and the server goes on serving."""

from __future__ import annotations

import socket

import httpx

from tests.server.harness import Server, call, ok, poll


def _half_a_body(server: Server) -> None:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(
        b"POST /bifrost/memory-call HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n" + b'{"wire": "0.6", "verb": "he'
    )
    sock.close()


def test_a_client_gone_mid_body_is_its_own_outcome(server: Server) -> None:
    for _ in range(3):
        _half_a_body(server)

    def logged() -> list[dict[str, object]] | None:
        lines = [
            line
            for line in server.log_lines()
            if line.get("event") == "bifrost.call" and line.get("outcome") == "client.disconnected"
        ]
        return lines if len(lines) == 3 else None

    lines = poll(logged, 30, "three disconnected calls in the log")
    assert all(line["status"] == 499 for line in lines)
    assert not any(
        line.get("outcome") == "wire.malformed_envelope"
        for line in server.log_lines()
        if line.get("event") == "bifrost.call"
    )
    ok(call(server.url, "memory", "describe_store", {}))

    def counted() -> tuple[float, str] | None:
        # a worker writes a call's log line, then counts it: the count can trail the line
        scraped = httpx.get(server.url + "/metrics", timeout=10).text
        total = sum(
            float(line.rsplit(" ", 1)[1])
            for line in scraped.splitlines()
            if line.startswith("ratatoskr_requests_total{") and 'code="client.disconnected"' in line
        )
        return (total, scraped) if total >= 3 else None

    total, scraped = poll(counted, 30, "the three disconnected calls to be counted")
    assert total == 3
    assert 'code="wire.malformed_envelope"' not in scraped
