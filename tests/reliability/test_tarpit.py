"""Token abuse at rate: every 401 is answered only after the tarpit delay, nothing
else is, and past the cap of held calls a 401 is immediate and closes its connection.

Real ``ratatoskr serve`` processes with one worker (the cap is per worker), real HTTP. The
only waits are the server's own tarpit: a held call can never answer before the delay, so a
lower bound is exact, and one answer faster than the delay proves a call was not held.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from ratatoskr.wire.http import DEFAULT_AUTH_TARPIT_MS
from tests.server.harness import KEY, Server, call, envelope, ok, post, token

DEFAULT_DELAY = DEFAULT_AUTH_TARPIT_MS / 1000
CAP = 2
CAPPED_DELAY = 1.5  # long enough that every call of a burst arrives while the first are held
BURST = 8


def _serve(root: Path, env: dict[str, str]) -> Iterator[Server]:
    server = Server(root, workers=1, env=env)
    try:
        yield server.start()
        assert server.terminate() == 0
    finally:
        server.kill()


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """No tarpit setting at all: the defaults apply."""
    yield from _serve(tmp_path_factory.mktemp("tarpit"), {})


@pytest.fixture(scope="module")
def capped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {
        "RATATOSKR_AUTH_TARPIT_MAX": str(CAP),
        "RATATOSKR_AUTH_TARPIT_MS": str(int(CAPPED_DELAY * 1000)),
    }
    yield from _serve(tmp_path_factory.mktemp("tarpit-capped"), env)


Send = Callable[[], httpx.Response]


def _timed(send: Send) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    response = send()
    return response, time.perf_counter() - started


def _one_fast(send: Send, tries: int = 5) -> httpx.Response:
    """The first of ``tries`` answers that came back faster than the default delay."""
    for _ in range(tries):
        response, elapsed = _timed(send)
        if elapsed < DEFAULT_DELAY:
            return response
    raise AssertionError(f"{tries} calls in a row took the tarpit delay or longer")


def _bad_calls(url: str) -> dict[str, Send]:
    body = envelope("health", {})
    other_key = token(body, "memory", "health").rsplit(".", 1)[0] + ".AAAA"
    return {
        "auth.missing_token": lambda: post(url, "/bifrost/memory-call", body, None),
        "auth.invalid_token": lambda: post(url, "/bifrost/memory-call", body, other_key),
        "auth.binding_mismatch": lambda: post(
            url, "/bifrost/memory-call", body, token(body, "affect", "health")
        ),
    }


@pytest.mark.parametrize(
    "code", ["auth.missing_token", "auth.invalid_token", "auth.binding_mismatch"]
)
def test_a_401_waits_at_least_the_default_delay(default_server: Server, code: str) -> None:
    response, elapsed = _timed(_bad_calls(default_server.url)[code])
    assert response.status_code == 401
    body = response.json()
    assert body["ok"] is False and body["error"]["code"] == code
    assert set(body) == {"ok", "error", "request_id"}
    assert response.headers["x-request-id"] == body["request_id"]
    assert "connection" not in response.headers  # held, not refused: the connection stays
    assert elapsed >= DEFAULT_DELAY


def test_a_valid_call_is_not_delayed(default_server: Server) -> None:
    response = _one_fast(lambda: call(default_server.url, "memory", "health", {}))
    assert ok(response)["status"] == "ok"


def test_a_403_is_not_delayed(default_server: Server) -> None:
    record = {"id": "x", "embedding": [1.0] + [0.0] * 7, "scope": {"tenant": "other"}}
    args = {"records": [record], "idempotency_key": "k"}

    def forbidden() -> httpx.Response:
        return call(default_server.url, "memory", "upsert_many", args)

    response = _one_fast(forbidden)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "scope.forbidden"


def test_the_log_line_of_a_401_is_unchanged(default_server: Server) -> None:
    """One call line with the outcome, written before the wait, and nothing secret."""
    response = post(default_server.url, "/bifrost/memory-call", envelope("health", {}), None)
    assert response.status_code == 401
    request_id = response.headers["x-request-id"]
    lines = [
        x
        for x in default_server.log_lines()
        if x.get("request_id") == request_id and x["event"] == "bifrost.call"
    ]
    assert [(x["outcome"], x["status"]) for x in lines] == [("auth.missing_token", 401)]
    assert KEY not in default_server.output()


async def _burst(url: str) -> list[tuple[httpx.Response, float]]:
    body = envelope("health", {})
    headers = {"Content-Type": "application/json", "Authorization": "Bearer not.a.token"}
    limits = httpx.Limits(max_connections=BURST)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:

        async def one() -> tuple[httpx.Response, float]:
            started = time.perf_counter()
            response = await http.post(f"{url}/bifrost/memory-call", content=body, headers=headers)
            return response, time.perf_counter() - started

        return await asyncio.gather(*(one() for _ in range(BURST)))


def test_past_the_cap_a_401_is_immediate_and_closes_its_connection(
    capped_server: Server,
) -> None:
    answers = asyncio.run(_burst(capped_server.url))
    assert all(r.status_code == 401 for r, _ in answers)
    assert all(r.json()["error"]["code"] == "auth.invalid_token" for r, _ in answers)
    held = [elapsed for r, elapsed in answers if "connection" not in r.headers]
    refused = [elapsed for r, elapsed in answers if r.headers.get("connection") == "close"]
    assert len(held) == CAP and len(refused) == BURST - CAP, answers
    assert all(elapsed >= CAPPED_DELAY for elapsed in held)
    assert all(elapsed < CAPPED_DELAY for elapsed in refused)
    # the held calls have left the tarpit: the next bad call is held again
    response, elapsed = _timed(_bad_calls(capped_server.url)["auth.missing_token"])
    assert response.status_code == 401 and "connection" not in response.headers
    assert elapsed >= CAPPED_DELAY
