"""Every wire error code arrives as its own exception class, raised by a real wrong call
against the real server, carrying code, message, retryable, details, status and request id;
no exception message holds what was sent; an unlisted verb is refused without being sent."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import inspect
import socket
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

import ratatoskr.client as client_module
from ratatoskr.client import (
    AsyncClient,
    BindingMismatch,
    Client,
    ClientClosed,
    EventConflict,
    IdempotencyConflict,
    InternalError,
    InvalidArguments,
    InvalidFilter,
    InvalidToken,
    KeyMinter,
    MalformedEnvelope,
    MissingToken,
    NonFiniteNumber,
    PayloadTooLarge,
    PlaneError,
    RatatoskrError,
    RequestTimeout,
    RevisionMismatch,
    ScopeForbidden,
    TokenReplayed,
    TransportFailed,
    UnexpectedAnswer,
    UnknownPlane,
    UnknownVerb,
    Unsupported,
    UnsupportedMediaType,
    UnsupportedVersion,
    VerbNotListed,
    http11,
)
from ratatoskr.client.errors import WIRE_ERRORS, error_class
from ratatoskr.client.transport import read_answer
from ratatoskr.core import errors as server_errors
from ratatoskr.wire.envelope import error_body
from tests.client.conftest import MAX_BODY
from tests.server.harness import DIM, KEY, Server, vec

SECRET = "SECRET-CONTENT-MARKER"


@dataclasses.dataclass
class Stamp:
    text: str


def chunk(chunk_id: str, tenant: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"{tenant}-{chunk_id}",
        "embedding": vec(1, 2),
        "scope": {"tenant": tenant},
        "distillate": SECRET,
        **fields,
    }


def raised(kind: type[RatatoskrError], call: Callable[[], Any]) -> RatatoskrError:
    with pytest.raises(kind) as caught:
        call()
    error = caught.value
    assert type(error) is kind
    assert SECRET not in str(error) and SECRET not in repr(error.details)
    return error


def counting(server: Server) -> tuple[httpx.Client, list[str]]:
    """An httpx client of the server that notes the path of every request it sends."""
    sent: list[str] = []

    def note(request: httpx.Request) -> None:
        sent.append(request.url.path)

    return httpx.Client(base_url=server.url, event_hooks={"request": [note]}), sent


def test_the_server_codes_and_the_client_classes_are_the_same() -> None:
    server_classes = {
        cls.__name__: cls
        for cls in vars(server_errors).values()
        if inspect.isclass(cls)
        and issubclass(cls, server_errors.BifrostError)
        and cls not in (server_errors.BifrostError, server_errors.PlaneError)
    }
    ours = {cls.__name__: cls for cls in WIRE_ERRORS}
    assert set(ours) == set(server_classes)
    for name, cls in ours.items():
        assert cls.wire_code == server_classes[name].code
        assert issubclass(cls, PlaneError) == issubclass(
            server_classes[name], server_errors.PlaneError
        )
        assert getattr(client_module, name) is cls  # exported
    assert error_class("affect.invalid_arguments") is InvalidArguments
    assert error_class("memory.revision_mismatch") is RevisionMismatch
    assert error_class("scope.forbidden") is ScopeForbidden
    assert error_class("memory.something_new") is RatatoskrError
    assert error_class("brand_new") is RatatoskrError


def test_plane_errors_from_real_calls(client: Client, tenant: str) -> None:
    memory, affect = client.memory, client.affect
    error = raised(InvalidArguments, lambda: memory.search([1.0, 2.0], top_k=3))
    assert (error.code, error.status, error.retryable, error.plane) == (
        "memory.invalid_arguments",
        400,
        False,
        "memory",
    )
    assert error.request_id and "vector" in error.message
    error = raised(InvalidArguments, lambda: affect.list(limit=0))
    assert error.code == "affect.invalid_arguments" and error.plane == "affect"
    error = raised(InvalidFilter, lambda: memory.search(vec(1), scope_all={"planet": "x"}))
    assert error.code == "memory.invalid_filter"
    memory.upsert_many([chunk("a", tenant)], idempotency_key="k")
    error = raised(
        IdempotencyConflict,
        lambda: memory.upsert_many([chunk("a", tenant, extra=1)], idempotency_key="k"),
    )
    assert error.status == 409
    stale = {f"{tenant}-a": 7}
    mismatch = raised(
        RevisionMismatch,
        lambda: memory.upsert_many(
            [chunk("a", tenant)], idempotency_key="k2", expected_revisions=stale
        ),
    )
    assert isinstance(mismatch, RevisionMismatch)
    assert mismatch.mismatches == [{"id": f"{tenant}-a", "expected": 7, "actual": 1}]
    event = {"id": f"{tenant}-e", "at": "2026-01-01T00:00:00Z", "scope": {"tenant": tenant}}
    affect.append_events([event], idempotency_key="e1")
    error = raised(
        EventConflict,
        lambda: affect.append_events([{**event, "kind": SECRET}], idempotency_key="e2"),
    )
    assert error.code == "affect.event_conflict"
    error = raised(
        ScopeForbidden,
        lambda: memory.upsert_many(
            [chunk("b", tenant, scope={"tenant": "elsewhere"})], idempotency_key="k3"
        ),
    )
    assert (error.code, error.status, error.plane) == ("scope.forbidden", 403, None)


def test_verbs_the_handshake_does_not_list(client: Client, server: Server) -> None:
    """Refused before sending; sent anyway (a stale list), the server's own answers."""
    http, sent = counting(server)
    with Client(server.url, key=KEY, scope={"tenant": "t"}, http=http) as gated:
        gated.handshake()
        before = list(sent)
        error = raised(VerbNotListed, lambda: gated.call("memory", "scan", {}))
        assert error.status is None and "memory.scan" in error.message
        raised(VerbNotListed, lambda: gated.call("memory", "no_such_verb", {}))
        raised(VerbNotListed, lambda: gated.call("planet", "search", {}))
        assert sent == before  # nothing left the client
        assert gated.catalog is not None
        gated.catalog.verbs["memory"] |= {"scan", "no_such_verb"}  # as if the list were stale
        assert raised(Unsupported, lambda: gated.call("memory", "scan", {})).status == 501
        assert raised(UnknownVerb, lambda: gated.call("memory", "no_such_verb", {})).status == 404
        assert sent[len(before) :] == ["/bifrost/memory-call"] * 2


def test_an_unlisted_verb_is_refused_before_the_first_call_is_sent(server: Server) -> None:
    """The very first call fetches the handshake, then refuses: only the handshake is sent."""
    http, sent = counting(server)
    with Client(server.url, key=KEY, scope={"tenant": "t"}, http=http) as fresh:
        raised(VerbNotListed, lambda: fresh.call("affect", "upsert_many", {}))
    assert sent == ["/bifrost/handshake"]

    async def async_refusal() -> None:
        async with AsyncClient(server.url, key=KEY, scope={"tenant": "t"}) as aio:
            await aio.handshake()
            with pytest.raises(VerbNotListed):
                await aio.call("memory", "mark_invalid", {})

    asyncio.run(async_refusal())


def test_a_body_far_over_the_limit_is_answered_413_not_cut_off(
    server: Server, client: Client, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body of megabytes is asked for first (``Expect: 100-continue``): the server's 413
    arrives before the client writes it, where writing it all would meet a reset. Below
    the limit the same path stores the record; both clients."""
    scope = {"tenant": tenant}
    huge = {"id": f"{tenant}-huge", "scope": scope, "pad": SECRET * 700_000}  # ~15 MB
    error = raised(PayloadTooLarge, lambda: client.affect.put_many([huge], idempotency_key="h"))
    assert error.status == 413
    monkeypatch.setattr(http11, "EXPECT_BODY", 64 * 1024)  # the asking path, under the limit
    fits = {"id": f"{tenant}-fits", "scope": scope, "pad": "x" * 100_000}
    assert client.affect.put_many([fits], idempotency_key="fits")["written"] == 1
    assert client.affect.get(f"{tenant}-fits") == {**fits, "revision": 1}

    async def in_asyncio() -> None:
        async with AsyncClient(server.url, key=KEY, scope=scope, actor=tenant) as aio:
            with pytest.raises(PayloadTooLarge):
                await aio.affect.put_many([huge], idempotency_key="h2")
            again = {**fits, "id": f"{tenant}-fits2"}
            assert (await aio.affect.put_many([again], idempotency_key="f2"))["written"] == 1

    asyncio.run(in_asyncio())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_nan_or_an_infinity_is_refused_unsent(client: Client, tenant: str, bad: float) -> None:
    """orjson writes them as ``null``, which would store something other than what was sent:
    the client refuses them before sending, saying where; ``None`` and the text "null"
    go through."""
    scope = {"tenant": tenant}
    record = {"id": f"{tenant}-nan", "scope": scope, "deep": {"list": [1.0, bad]}}
    caught = raised(NonFiniteNumber, lambda: client.affect.put_many([record], idempotency_key="n"))
    assert isinstance(caught, ValueError) and "args.records[0].deep.…[1]" in caught.message
    # a key inside a field's value may be content: the path names the field, not the key
    said = "Alice Jones told me her diagnosis"
    meta = {"id": f"{tenant}-nan", "embedding": vec(1), "scope": scope, "meta": {said: bad}}
    caught = raised(NonFiniteNumber, lambda: client.memory.upsert_many([meta], idempotency_key="m"))
    assert "args.records[0].meta.…" in caught.message and "Alice" not in caught.message
    event = {"id": "e", "at": "2026-01-01T00:00:00Z", "scope": scope, "w": {said: [bad]}}
    caught = raised(
        NonFiniteNumber, lambda: client.affect.append_events([event], idempotency_key="e")
    )
    assert "args.events[0].w.…[0]" in caught.message and "Alice" not in caught.message
    vector = np.array(vec(1, 2), dtype=np.float32)
    vector[3] = bad  # in a vector the memory plane itself refuses it (a null is no number)
    chunk = {"id": f"{tenant}-nan", "embedding": vector, "scope": scope}
    raised(InvalidArguments, lambda: client.memory.upsert_many([chunk], idempotency_key="n"))
    raised(InvalidArguments, lambda: client.memory.search([bad] + vec(1)[1:], top_k=1))
    assert client.affect.get(f"{tenant}-nan") is None and client.memory.get(f"{tenant}-nan") is None
    plain = {"id": f"{tenant}-null", "scope": scope, "note": "null", "none": None}
    assert client.affect.put_many([plain], idempotency_key="p")["written"] == 1
    assert client.affect.get(f"{tenant}-null") == {**plain, "revision": 1}


def test_wire_and_auth_errors_from_real_calls(server: Server, client: Client) -> None:
    tenant = {"tenant": "t"}
    error = raised(UnknownPlane, lambda: client.handshake(planes=["planet"]))
    assert (error.code, error.status) == ("wire.unknown_plane", 404)
    error = raised(MalformedEnvelope, lambda: client.call("memory", "health", request_id="\x01"))
    assert error.code == "wire.malformed_envelope"
    big = {"id": "big", "embedding": vec(1), "scope": {"tenant": "t"}, "distillate": SECRET * 13000}
    assert len(SECRET) * 13000 > MAX_BODY
    error = raised(PayloadTooLarge, lambda: client.memory.upsert_many([big], idempotency_key="big"))
    assert error.status == 413
    with Client(server.url, token_provider=lambda plane, verb, body: "") as tokenless:
        assert raised(MissingToken, tokenless.handshake).status == 401
    with Client(server.url, key=b"w" * 40, scope=tenant) as wrong_key:
        assert raised(InvalidToken, wrong_key.handshake).code == "auth.invalid_token"
    minter = KeyMinter(KEY, scope=tenant)
    with Client(server.url, token_provider=lambda p, v, b: minter(p, v, b + b" ")) as unbound:
        assert raised(BindingMismatch, unbound.handshake).code == "auth.binding_mismatch"
    tokens: dict[str, str] = {}

    def once(plane: str, verb: str, body: bytes) -> str:
        return tokens.setdefault(verb, minter(plane, verb, body))

    with Client(server.url, token_provider=once, retry=5) as replaying:
        args = {"ids": ["nothing-here"]}
        assert replaying.call("memory", "delete_many", args) == {"deleted": 0}
        error = raised(TokenReplayed, lambda: replaying.call("memory", "delete_many", args))
        assert (error.status, error.retryable) == (401, False)


def _raw(server: Server, head: bytes, body: bytes) -> tuple[int, bytes]:
    """One request over a plain socket, as a client other than ours would send it; the
    status and body of the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    status = int(answer.split(b" ", 2)[1])
    return status, answer.partition(b"\r\n\r\n")[2]


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 1 << 30


def _head(server: Server, length: int, media: str = "application/json", token: str = "") -> bytes:
    return (
        f"POST /bifrost/memory-call HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Content-Type: {media}\r\nContent-Length: {length}\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()


def test_answers_no_client_of_ours_can_provoke_read_as_their_classes(server: Server) -> None:
    """The client always sends JSON, a whole body, wire 0.6: the answers to a raw client
    that does not are read into their classes all the same."""
    minter = KeyMinter(KEY, scope={"tenant": "t"})
    status, body = _raw(server, _head(server, 2, "text/plain"), b"{}")
    assert raised(UnsupportedMediaType, lambda: read_answer(status, body)).status == 415
    old = orjson.dumps({"wire": "0.5", "verb": "health", "args": {}})
    status, body = _raw(server, _head(server, len(old), token=minter("memory", "health", old)), old)
    assert raised(UnsupportedVersion, lambda: read_answer(status, body)).status == 400
    status, body = _raw(server, _head(server, 100), b'{"wire":')  # then nothing: 1 s later, 408
    error = raised(RequestTimeout, lambda: read_answer(status, body))
    assert (error.status, error.retryable) == (408, True)
    internal = error_body(server_errors.InternalError("internal error"), "memory", "r1")
    assert raised(InternalError, lambda: read_answer(500, internal)).status == 500
    assert raised(UnexpectedAnswer, lambda: read_answer(502, b"<html>bad gateway")).status == 502


def test_no_answer_at_all() -> None:
    with Client("http://127.0.0.1:9", key=KEY, scope={"tenant": "t"}, retry=3) as nowhere:
        error = raised(TransportFailed, nowhere.handshake)
    assert isinstance(error.__cause__, ConnectionRefusedError)
    assert error.status is None and not error.retryable
    http = httpx.Client(base_url="http://127.0.0.1:9")
    with Client("http://127.0.0.1:9", key=KEY, scope={"tenant": "t"}, http=http) as nowhere:
        error = raised(TransportFailed, nowhere.handshake)
    assert isinstance(error.__cause__, OSError)
    assert isinstance(error.__cause__.__cause__, httpx.ConnectError)


def test_an_error_exception_never_quotes_content(client: Client, tenant: str) -> None:
    bad = chunk("c", tenant, embedding=[SECRET] + [0.0] * (DIM - 1))
    error = raised(
        InvalidArguments, lambda: client.memory.upsert_many([bad], idempotency_key="bad")
    )
    assert "embedding" in error.message


def test_a_closed_client_refuses_every_call_unsent(
    server: Server, client: Client, tenant: str
) -> None:
    """After ``close()`` a call raises ``ClientClosed`` (also a ``RuntimeError``) and
    sends nothing, on the client's own connections, on a client made from it with another
    scope, and on an ``http`` client of the caller's that was closed; so does an
    ``AsyncClient`` after ``aclose()``."""
    scope = {"tenant": tenant}
    record = {"id": f"{tenant}-late", "scope": scope}
    own = Client(server.url, key=KEY, scope=scope, actor=tenant)
    assert own.affect.get(f"{tenant}-late") is None
    child = own.with_scope(scope)
    own.close()
    for closed in (own, child):

        def late(c: Client = closed) -> Any:
            return c.affect.put_many([record], idempotency_key="l")

        caught = raised(ClientClosed, late)
        assert isinstance(caught, RuntimeError) and caught.code == "client.closed"
    http = httpx.Client(base_url=server.url)
    theirs = Client(server.url, key=KEY, scope=scope, actor=tenant, http=http)
    http.close()
    raised(ClientClosed, lambda: theirs.affect.put_many([record], idempotency_key="l"))

    async def in_asyncio() -> None:
        aio = AsyncClient(server.url, key=KEY, scope=scope, actor=tenant)
        assert await aio.affect.get(f"{tenant}-late") is None
        await aio.aclose()
        with pytest.raises(ClientClosed):
            await aio.affect.put_many([record], idempotency_key="l")

    asyncio.run(in_asyncio())
    assert client.affect.get(f"{tenant}-late") is None  # nothing was sent


def test_one_string_where_a_list_is_wanted_is_refused_unsent(
    server: Server, client: Client, tenant: str
) -> None:
    """A string is a sequence too: ``delete_many("ab")`` must not delete the records ``a``
    and ``b``. A string, bytes or a mapping given as ``ids``, ``records`` or ``events`` is
    a ``TypeError`` before anything is sent, on both planes and in both clients; any other
    iterable of ids (a tuple, a set, a generator) is still a list of ids."""
    scope = {"tenant": tenant}
    one, two = f"{tenant}-a", f"{tenant}-b"
    chunks = [{"id": i, "embedding": vec(1, 2), "scope": scope} for i in (one, two)]
    assert client.memory.upsert_many(chunks, idempotency_key="s")["upserted"] == 2
    states = [{"id": i, "scope": scope} for i in (one, two)]
    assert client.affect.put_many(states, idempotency_key="s")["written"] == 2
    http, sent = counting(server)
    with Client(server.url, key=KEY, scope=scope, actor=tenant, http=http) as counted:
        counted.handshake()
        before = len(sent)
        wrongs: tuple[Any, ...] = (one, one.encode(), {one: 1})
        for plane in (counted.memory, counted.affect):
            for wrong in wrongs:
                with pytest.raises(TypeError, match="ids must be a list"):
                    plane.delete_many(wrong)
                with pytest.raises(TypeError, match="ids must be a list"):
                    plane.get_many(wrong)
        with pytest.raises(TypeError, match="records must be a sequence"):
            counted.memory.upsert_many(one, idempotency_key="w")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="records must be a sequence"):
            counted.affect.put_many(one, idempotency_key="w")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="events must be a sequence"):
            counted.affect.append_events(one, idempotency_key="w")  # type: ignore[arg-type]
        assert len(sent) == before  # nothing was sent
    assert [c["id"] for c in client.memory.get_many((one, two))] == [one, two]
    assert len(client.affect.get_many({one, two})) == 2
    assert len(client.memory.get_many(i for i in (one, two))) == 2

    async def in_asyncio() -> None:
        async with AsyncClient(server.url, key=KEY, scope=scope, actor=tenant) as aio:
            for plane in (aio.memory, aio.affect):
                with pytest.raises(TypeError, match="ids must be a list"):
                    await plane.delete_many(one)
                with pytest.raises(TypeError, match="ids must be a list"):
                    await plane.get_many(one)
            assert len(await aio.memory.get_many([one, two])) == 2

    asyncio.run(in_asyncio())
    assert client.memory.delete_many([one, two]) == {"deleted": 2}
    assert client.affect.delete_many([one, two]) == {"deleted": 2}


def _nested(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


def test_arguments_json_cannot_carry_are_refused_unsent_saying_why(
    server: Server, tenant: str
) -> None:
    """A lone surrogate, an integer beyond 64 bits, a value of a type JSON does not have
    (which orjson would write in a form of its own: a datetime or a UUID as a string, a
    dataclass as an object), nesting deeper than orjson writes, or a value that holds
    itself: a ``TypeError`` that says which, names no value and sends nothing."""
    scope = {"tenant": tenant}
    http, sent = counting(server)
    itself: dict[str, Any] = {}
    itself["again"] = itself
    no_json_type = "a value of type {}, which JSON has no type for"
    with Client(server.url, key=KEY, scope=scope, actor=tenant, http=http) as counted:
        counted.handshake()
        before = len(sent)
        cases: tuple[tuple[Any, str], ...] = (
            ("zq\ud800marker", "a string holds a lone surrogate"),
            (2**70, "an integer exceeds 64 bits"),
            ({"zq-marker"}, no_json_type.format("set")),
            (datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), no_json_type.format("datetime")),
            (datetime.date(2026, 1, 1), no_json_type.format("date")),
            ([uuid.UUID(int=7)], no_json_type.format("UUID")),
            ({"at": Stamp("zq-marker")}, no_json_type.format("Stamp")),
            (_nested(300), "nesting too deep"),
            (_nested(200_000), "nesting too deep"),
            (itself, "nesting too deep"),
        )
        for value, why in cases:
            record = {"id": "x", "scope": scope, "note": value}
            with pytest.raises(TypeError) as info:
                counted.affect.put_many([record], idempotency_key="w")
            message = str(info.value)
            assert message == f"the arguments of put_many are not JSON ({why}); nothing was sent"
            assert "marker" not in message
        assert len(sent) == before
