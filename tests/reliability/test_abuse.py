"""Abuse: hostile bodies get a 4xx with the documented code, the server stays up,
worker memory stays bounded, and a body trickled slowly is cut after the body timeout.

Every abusive call carries a valid token bound to its body, so it reaches the parser and the
validators instead of stopping at authentication.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest

from tests.reliability.common import chunk, error_of, running, upsert
from tests.server.harness import Server, call, ok, post, rss_bytes, token, vec

BODY_TIMEOUT = 2
MIB = 1 << 20
# worker RSS: the first round may grow arenas and caches; a second round must not add more
FIRST_ROUND_BOUND = 256 * MIB
SECOND_ROUND_BOUND = 32 * MIB


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {"RATATOSKR_BODY_TIMEOUT": str(BODY_TIMEOUT)}
    with running(tmp_path_factory.mktemp("abuse"), env) as server:
        yield server


def _env(verb: str, args_json: bytes, **top: bytes) -> bytes:
    extra = b"".join(b',"' + k.encode() + b'":' + v for k, v in top.items())
    return b'{"wire":"0.6","verb":"' + verb.encode() + b'","args":' + args_json + extra + b"}"


def _records(*raw: bytes) -> bytes:
    return b'{"records":[' + b",".join(raw) + b'],"idempotency_key":"abuse"}'


def _chunk_json(**overrides: object) -> bytes:
    return orjson.dumps(chunk("c", **overrides))  # type: ignore[arg-type]


LONG = "L" * 1_000_000
DEEP = 100_000
CASES: list[tuple[str, str, str, bytes, int, str]] = [
    # name, plane, verb (token claim), body, status, code
    (
        "nested past the parser",
        "memory",
        "upsert_many",
        _env("upsert_many", b"[" * DEEP + b"]" * DEEP),
        400,
        "wire.malformed_envelope",
    ),
    (
        "nested past the contract",
        "memory",
        "upsert_many",
        _env(
            "upsert_many",
            _records(_chunk_json()[:-1] + b',"meta":' + b"[" * 100 + b"]" * 100 + b"}"),
        ),
        400,
        "memory.invalid_arguments",
    ),
    (
        "1.5M-element records",
        "memory",
        "upsert_many",
        _env(
            "upsert_many",
            b'{"records":[' + b",".join([b"0"] * 1_500_000) + b'],"idempotency_key":"k"}',
        ),
        400,
        "memory.invalid_arguments",
    ),
    (
        "1M-float embedding",
        "memory",
        "upsert_many",
        _env("upsert_many", _records(orjson.dumps({**chunk("c"), "embedding": [0.5] * 1_000_000}))),
        400,
        "memory.invalid_arguments",
    ),
    (
        "500k ids",
        "memory",
        "get_many",
        _env("get_many", orjson.dumps({"ids": [f"i{n}" for n in range(500_000)]})),
        400,
        "memory.invalid_arguments",
    ),
    (
        "10,000-element scope_any (memory)",
        "memory",
        "search",
        _env(
            "search",
            orjson.dumps(
                {
                    "vector": vec(1),
                    "top_k": 5,
                    "scope_any": [{"end_user": f"u{n}"} for n in range(10_000)],
                }
            ),
        ),
        400,
        "memory.invalid_arguments",
    ),
    (
        "10,000-element scope_any (affect)",
        "affect",
        "list",
        _env(
            "list",
            orjson.dumps({"limit": 5, "scope_any": [{"end_user": f"u{n}"} for n in range(10_000)]}),
        ),
        400,
        "affect.invalid_arguments",
    ),
    (
        "1M-char id",
        "memory",
        "upsert_many",
        _env("upsert_many", _records(orjson.dumps(chunk(LONG)))),
        400,
        "memory.invalid_arguments",
    ),
    (
        "1M-char scope value",
        "memory",
        "upsert_many",
        _env("upsert_many", _records(orjson.dumps({**chunk("c"), "scope": {"tenant": LONG}}))),
        400,
        "memory.invalid_arguments",
    ),
    (
        "1M-char idempotency_key",
        "memory",
        "upsert_many",
        _env("upsert_many", orjson.dumps({"records": [chunk("c")], "idempotency_key": LONG})),
        400,
        "memory.invalid_arguments",
    ),
    (
        "1M-char affect id",
        "affect",
        "get",
        _env("get", orjson.dumps({"id": LONG})),
        400,
        "affect.invalid_arguments",
    ),
    (
        "1M-char request_id",
        "memory",
        "health",
        _env("health", b"{}", request_id=orjson.dumps(LONG)),
        400,
        "wire.malformed_envelope",
    ),
    (
        "1M-char wire version",
        "memory",
        "health",
        b'{"wire":' + orjson.dumps(LONG) + b',"verb":"health","args":{}}',
        400,
        "wire.unsupported_version",
    ),
    ("1M-char verb", "memory", "health", _env(LONG, b"{}"), 401, "auth.binding_mismatch"),
    (
        "1M-char unknown arg name",
        "memory",
        "health",
        _env("health", b'{"' + LONG.encode() + b'":1}'),
        400,
        "memory.invalid_arguments",
    ),
    (
        "lone surrogate in content",
        "memory",
        "upsert_many",
        _env("upsert_many", _records(_chunk_json()[:-1] + b',"note":"\\ud800"}')),
        400,
        "wire.malformed_envelope",
    ),
    (
        "lone surrogate in an id",
        "affect",
        "get",
        _env("get", b'{"id":"a\\udc00"}'),
        400,
        "wire.malformed_envelope",
    ),
    (
        "invalid UTF-8",
        "memory",
        "upsert_many",
        _env("upsert_many", _records(_chunk_json()[:-1] + b',"note":"\xff\xfe"}')),
        400,
        "wire.malformed_envelope",
    ),
    (
        "1e400 in the embedding",
        "memory",
        "search",
        _env("search", b'{"vector":[1e400,0,0,0,0,0,0,0],"top_k":1}'),
        400,
        "wire.malformed_envelope",
    ),
    (
        "-1e400 in content",
        "memory",
        "upsert_many",
        _env("upsert_many", _records(_chunk_json()[:-1] + b',"note":-1e400}')),
        400,
        "wire.malformed_envelope",
    ),
    (
        "integer beyond 64 bits",
        "memory",
        "upsert_many",
        _env("upsert_many", _records(_chunk_json()[:-1] + b',"note":18446744073709551616}')),
        400,
        "wire.malformed_envelope",
    ),
    (
        "integer below -2**63",
        "memory",
        "upsert_many",
        _env("upsert_many", _records(_chunk_json()[:-1] + b',"note":-9223372036854775809}')),
        400,
        "wire.malformed_envelope",
    ),
    (
        "NaN literal",
        "memory",
        "search",
        _env("search", b'{"vector":[NaN,1,0,0,0,0,0,0],"top_k":1}'),
        400,
        "wire.malformed_envelope",
    ),
]


def _send(server: Server, plane: str, verb: str, body: bytes) -> httpx.Response:
    path = "/bifrost/handshake" if plane == "*" else f"/bifrost/{plane}-call"
    return post(server.url, path, body, token(body, plane, verb))


def _worker_rss(server: Server) -> dict[int, int]:
    return {pid: rss_bytes(pid) for pid in server.worker_pids()}


def _round(server: Server) -> None:
    for name, plane, verb, body, status, code in CASES:
        assert len(body) < 8 * MIB, name  # within the byte limit: the parser sees it
        response = _send(server, plane, verb, body)
        assert (response.status_code, error_of(response)["code"]) == (status, code), name
    too_big = b"[" * (9 * MIB)
    response = _send(server, "memory", "upsert_many", too_big)
    assert (response.status_code, error_of(response)["code"]) == (413, "wire.payload_too_large")
    unauthenticated = post(server.url, "/bifrost/memory-call", CASES[0][3], None)
    assert error_of(unauthenticated)["code"] == "auth.missing_token"
    assert httpx.get(server.url + "/healthz").status_code == 200


def test_hostile_bodies_get_documented_4xx_and_memory_stays_bounded(server: Server) -> None:
    ok(call(server.url, "memory", "health", {}))
    start = _worker_rss(server)
    _round(server)
    first = _worker_rss(server)
    _round(server)
    second = _worker_rss(server)
    assert set(start) == set(first) == set(second), "a worker died"
    for pid in start:
        assert first[pid] - start[pid] < FIRST_ROUND_BOUND, (start, first)
        assert second[pid] - first[pid] < SECOND_ROUND_BOUND, (first, second)
    assert ok(call(server.url, "memory", "health", {}))["status"] == "ok"
    assert "Traceback" not in server.output()


def test_content_edge_cases_are_stored_verbatim(server: Server) -> None:
    """What the contract keeps as opaque content: NUL, long text, astral characters."""
    record = chunk("nul\x00id", "nul \x00 inside 🜂 \u2028 " + "d" * 2_000_000, note="\x00")
    assert ok(upsert(server.url, [record], "verbatim"))["upserted"] == 1
    got = ok(call(server.url, "memory", "get", {"chunk_id": "nul\x00id"}))
    assert got["distillate"] == record["distillate"] and got["note"] == "\x00"


def _trickle(port: int, results: list[tuple[int, bytes, float, bool]]) -> None:
    """Headers and a first slice of a body, then a byte whenever the server stays silent
    for 0.2 s: a slow client, cut by the server (the answer arrives, then EOF)."""
    body = b'{"wire":"0.6","verb":"health","args":{}}' + b" " * 1000
    head = (
        "POST /bifrost/memory-call HTTP/1.1\r\nHost: ratatoskr\r\n"
        "Content-Type: application/json\r\n"
        f"Authorization: Bearer {token(body, 'memory', 'health')}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    sent, answer = 10, b""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        try:
            sock.sendall(head + body[:10])
            while sent < len(body) and time.monotonic() - started < 20:
                readable, _, _ = select.select([sock], [], [], 0.2)
                if readable:
                    break
                sock.sendall(body[sent : sent + 1])
                sent += 1
            while chunk_ := sock.recv(65536):
                answer += chunk_
        except TimeoutError:  # answered, perhaps, but the connection was not closed
            answer += b" (connection left open)"
        except ConnectionResetError:
            # the server closed with our unread bytes in its buffer: the kernel resets the
            # connection, which may drop the 408 before we read it. Cut either way.
            answer += b" (reset by the server)"
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    results.append((status, answer, time.monotonic() - started, sent < len(body)))


def test_a_trickled_body_is_cut_after_the_body_timeout_and_others_are_served(
    server: Server,
) -> None:
    results: list[tuple[int, bytes, float, bool]] = []
    slow = [threading.Thread(target=_trickle, args=(server.port, results)) for _ in range(20)]
    for thread in slow:
        thread.start()
    served = 0  # calls answered while the slow clients hold their connections
    while any(t.is_alive() for t in slow):
        assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200
        ok(call(server.url, "memory", "search", {"vector": vec(1), "top_k": 1}))
        served += 1
    for thread in slow:
        thread.join(timeout=30)
    assert served >= 1 and len(results) == 20
    answered = [r for r in results if r[0] == 408]
    assert answered, "at least one slow client reads its 408 before the close"
    for status, answer, elapsed, cut in results:
        assert cut and not answer.endswith(b"(connection left open)"), answer[:300]
        assert status == 408 or answer.endswith(b"(reset by the server)"), answer[:300]
        if status == 408:
            assert b'"code":"wire.request_timeout"' in answer
        assert BODY_TIMEOUT <= elapsed < BODY_TIMEOUT + 15  # a loaded 2-core CI machine
