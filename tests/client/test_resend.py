"""A request sent again after its pooled connection closed unanswered, against the real
server: the idle connection is broken on the client's side before the call (as a server's
keep-alive timeout leaves it), so the first sending fails before any answer and the
request goes out once more on a new connection, with the same token.

Only a replayed token answered to that re-sent request says the first sending reached the
server (``MayHaveRun``); any other token error is the call's own, raised as its class with
the server's code, message and request id."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest

from ratatoskr.client import AsyncClient, Client, KeyMinter
from ratatoskr.client.errors import (
    BindingMismatch,
    InvalidToken,
    RatatoskrError,
    TransportFailed,
)
from ratatoskr.client.http11 import Http11Pool, MayHaveRun
from ratatoskr.client.http11_async import AsyncHttp11Pool
from tests.server.harness import KEY, Server

WRONG_KEY = b"w" * 32


class Switch:
    """A token provider whose minter the test swaps between calls."""

    def __init__(self, minter: Callable[[str, str, bytes], str]) -> None:
        self.minter = minter

    def __call__(self, plane: str, verb: str, body: bytes) -> str:
        return self.minter(plane, verb, body)


def _break_idle(pool: Http11Pool) -> None:
    """The pooled connection fails its next sending before any answer, as one the server
    closed while it was idle."""
    assert len(pool.idle) == 1
    pool.idle[0].sock.shutdown(socket.SHUT_RDWR)


def _break_idle_async(pool: AsyncHttp11Pool) -> None:
    assert len(pool.idle) == 1
    pool.idle[0].writer.get_extra_info("socket").shutdown(socket.SHUT_RDWR)


def _bad_minters(
    tenant: str,
) -> list[tuple[Callable[[str, str, bytes], str], type[RatatoskrError]]]:
    scope = {"tenant": tenant}
    wrong_key = KeyMinter(WRONG_KEY, scope=scope, actor=tenant)
    expired = KeyMinter(KEY, scope=scope, actor=tenant, clock=lambda: 1_000_000.0)
    good = KeyMinter(KEY, scope=scope, actor=tenant)

    def other_verb(plane: str, verb: str, body: bytes) -> str:
        return good(plane, "health", body)

    return [(wrong_key, InvalidToken), (expired, InvalidToken), (other_verb, BindingMismatch)]


def test_a_token_error_to_a_resent_request_is_the_calls_own(server: Server, tenant: str) -> None:
    good = KeyMinter(KEY, scope={"tenant": tenant}, actor=tenant)
    for minter, raised in _bad_minters(tenant):
        tokens = Switch(good)
        with Client(server.url, token_provider=tokens, retry=0) as client:
            client.memory.get("resend-1")
            assert isinstance(client.transport, Http11Pool)
            _break_idle(client.transport)
            tokens.minter = minter
            with pytest.raises(raised) as failed:
                client.memory.get("resend-1")
        assert failed.value.status == 401 and failed.value.code.startswith("auth.")
        assert failed.value.message and failed.value.request_id


def test_the_async_client_raises_it_too(server: Server, tenant: str) -> None:
    good = KeyMinter(KEY, scope={"tenant": tenant}, actor=tenant)

    async def scenario(
        minter: Callable[[str, str, bytes], str], raised: type[RatatoskrError]
    ) -> None:
        tokens = Switch(good)
        async with AsyncClient(server.url, token_provider=tokens, retry=0) as aio:
            await aio.memory.get("resend-1")
            assert isinstance(aio.transport, AsyncHttp11Pool)
            _break_idle_async(aio.transport)
            tokens.minter = minter
            with pytest.raises(raised) as failed:
                await aio.memory.get("resend-1")
        assert failed.value.status == 401 and failed.value.request_id

    for minter, raised in _bad_minters(tenant):
        asyncio.run(scenario(minter, raised))


def test_a_replayed_token_to_a_resent_request_may_have_run(server: Server, tenant: str) -> None:
    """The first sending's token used already (as when the first sending was taken): the
    re-sent write is refused as replayed, and the call may have run."""
    good = KeyMinter(KEY, scope={"tenant": tenant}, actor=tenant)
    used: list[str] = []

    def once_used(plane: str, verb: str, body: bytes) -> str:
        token = good(plane, verb, body)
        used.append(token)
        return token

    record = {"id": "resend-2", "embedding": [1.0] + [0.0] * 7, "scope": {"tenant": tenant}}
    tokens = Switch(good)
    with Client(server.url, token_provider=tokens, retry=0) as client:
        client.memory.upsert_many([record], idempotency_key="resend-2a")
        tokens.minter = once_used
        client.memory.upsert_many([record], idempotency_key="resend-2b")
        assert isinstance(client.transport, Http11Pool)
        _break_idle(client.transport)
        tokens.minter = lambda plane, verb, body: used[-1]
        with pytest.raises(TransportFailed) as failed:
            client.memory.upsert_many([record], idempotency_key="resend-2b")
    assert failed.value.sent and isinstance(failed.value.__cause__, MayHaveRun)
