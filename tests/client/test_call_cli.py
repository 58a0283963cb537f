"""``ratatoskr call`` against a real server: what it refuses before sending, and what it
says when an answer does not come."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ratatoskr.cli import build_parser
from ratatoskr.cli import call as call_cli
from ratatoskr.client import AsyncClient, Client, TransportFailed
from tests.client.scripted import scripted
from tests.server.harness import KEY, Server


def shell(server_url: str, *argv: str) -> int:
    env = {"RATATOSKR_HEIMDALL_KEY": KEY, "RATATOSKR_URL": server_url}
    return call_cli.run(build_parser().parse_args(["call", *argv]), env=env)


def put_args(tenant: str, numbers: str, key: str) -> str:
    """``put_many``'s arguments as typed in a shell: ``numbers`` a JSON array's text."""
    record = f'{{"id":"{tenant}-big","scope":{{"tenant":"{tenant}"}},"n":{numbers}}}'
    return f'{{"records":[{record}],"idempotency_key":"{key}"}}'


def test_an_integer_beyond_64_bits_in_args_is_refused_not_made_a_float(
    server: Server, tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """orjson would read it as a float and the store would keep another number: refused,
    exit 2, nothing sent; the largest 64-bit integers beside a float go through as typed."""
    scope = ["--scope", f"tenant={tenant}", "--sub", tenant]
    for big in (2**64, -(2**63) - 1, 123456789012345678901234567890):
        args = put_args(tenant, f"[0.5,{big}]", "b")
        assert shell(server.url, "affect", "put_many", "--args", args, *scope) == 2
        assert "integer beyond 64 bits" in capsys.readouterr().err
    get = orjson.dumps({"id": f"{tenant}-big"}).decode()
    assert shell(server.url, "affect", "get", "--args", get, *scope) == 0
    assert orjson.loads(capsys.readouterr().out)["result"] is None  # nothing was written
    edge = put_args(tenant, f"[0.5,{2**64 - 1},{-(2**63)}]", "e")
    assert shell(server.url, "affect", "put_many", "--args", edge, *scope) == 0
    capsys.readouterr()
    assert shell(server.url, "affect", "get", "--args", get, *scope) == 0
    stored = orjson.loads(capsys.readouterr().out)["result"]
    assert stored["n"] == [0.5, 2**64 - 1, -(2**63)]


def test_sent_without_answer_is_not_cannot_reach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refused connection sent nothing: "cannot reach", exit 3. A call sent and then
    timed out, or whose connection closed unanswered, may have run: said so, exit 4."""
    with scripted(tmp_path, tls=False) as (url, script, _):
        script.handshake_too = False
        argv = ["memory", "health", "--scope", "tenant=t", "--timeout", "0.5", "--retries", "0"]
        for how in ("silent", "drop"):
            script.how = how
            assert shell(url, *argv) == call_cli.MAY_HAVE_RUN
            said = capsys.readouterr().err
            assert said.startswith(f"ratatoskr call: no answer from {url} after the call was sent")
            assert "may have run" in said and "same idempotency key" in said
    assert shell(url, *argv) == call_cli.UNREACHED  # the server is gone: refused
    assert capsys.readouterr().err.strip() == f"ratatoskr call: cannot reach {url}"


def test_the_client_says_whether_a_failed_call_was_sent(tmp_path: Path) -> None:
    """``TransportFailed.sent``: False for a refused connection, True once the request went
    out; on the client's own connections and on httpx, sync and async."""
    with scripted(tmp_path, tls=False) as (url, script, _):
        script.handshake_too = False
        script.how = "silent"
        kinds: list[dict[str, Any]] = [{}, {"http": httpx.Client()}]
        for kind in kinds:
            with Client(url, key=KEY, scope={"tenant": "t"}, timeout=0.3, **kind) as client:
                failed = raised(client.memory.health)
                assert failed.sent and "the call may have run" in failed.message

        async def in_asyncio() -> None:
            for http in (None, httpx.AsyncClient()):
                aio = AsyncClient(url, key=KEY, scope={"tenant": "t"}, timeout=0.3, http=http)
                async with aio:
                    with pytest.raises(TransportFailed) as failed:
                        await aio.memory.health()
                    assert failed.value.sent
                if http is not None:
                    await http.aclose()

        asyncio.run(in_asyncio())
    for kind in kinds:
        with Client(url, key=KEY, scope={"tenant": "t"}, **kind) as client:
            refused = raised(client.handshake)
            assert not refused.sent and "may have run" not in refused.message
        if "http" in kind:
            kind["http"].close()

    async def refused_in_asyncio() -> None:
        for http in (None, httpx.AsyncClient()):
            async with AsyncClient(url, key=KEY, scope={"tenant": "t"}, http=http) as aio:
                with pytest.raises(TransportFailed) as failed:
                    await aio.handshake()
                assert not failed.value.sent
            if http is not None:
                await http.aclose()

    asyncio.run(refused_in_asyncio())


def raised(call: Callable[[], Any]) -> TransportFailed:
    with pytest.raises(TransportFailed) as failed:
        call()
    return failed.value


@pytest.mark.parametrize("lifetime", ["0", "-5", "400"])
def test_a_lifetime_the_server_refuses_is_a_usage_error(
    server: Server, tenant: str, lifetime: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``ratatoskr token`` refuses it: exit 2, nothing sent; within 1..300 it is sent."""
    scope = ["--scope", f"tenant={tenant}", "--sub", tenant]
    assert shell(server.url, "memory", "health", "--lifetime", lifetime, *scope) == 2
    assert "--lifetime must be 1 to 300 seconds" in capsys.readouterr().err
    assert shell(server.url, "memory", "health", "--lifetime", "300", *scope) == 0
