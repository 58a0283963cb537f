"""The HTTP face of the wire: one endpoint per plane, the handshake, and the probes.

Each call walks the checks in the wire's order, and each check answers before the next one
looks at anything: size and media type, token, body binding, envelope, plane/verb binding,
verb, args, scope, replay, store. Storage (and the CPU-heavy argument parsing) runs on the
store threads the server hands in (``offload``), except a read-only verb's ``quick`` path:
work bounded to about half a millisecond (a small scoped search), run on the event loop
because the hand-off would cost more than the work. Every failure is a JSON error body.

A failed authentication (every 401) is answered only after ``auth_tarpit`` seconds, so a
client flooding bad tokens over a few connections is slowed to a trickle without costing CPU
(the task sleeps); at most ``auth_tarpit_max`` calls are held per worker, beyond that the 401
goes out at once and the connection is closed, so a flood never holds unbounded memory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ratatoskr import __version__
from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import (
    BifrostError,
    BindingMismatch,
    InternalError,
    MalformedEnvelope,
    MethodNotAllowed,
    MissingToken,
    PayloadTooLarge,
    RequestTimeout,
    TokenReplayed,
    Unavailable,
    UnknownPlane,
    UnknownRoute,
    UnsupportedMediaType,
)
from ratatoskr.wire.calllog import (
    ANSWERING,
    CallRecord,
    log_call,
    log_internal_error,
    log_observer_error,
)
from ratatoskr.wire.envelope import (
    WIRE_VERSION,
    Envelope,
    decode_object,
    envelope_from,
    error_body,
    new_request_id,
    request_id_of,
    success_body,
)
from ratatoskr.wire.observer import CallObserver
from ratatoskr.wire.plane import DEFERRED, LEDGER_DOWN, Plane, Verb
from ratatoskr.wire.readiness import BoundedHealth
from ratatoskr.wire.replay import CheckedGuard, ReplayGuard
from ratatoskr.wire.tokens import BodyDigest, TokenVerifier, VerifiedToken

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_BODY_TIMEOUT = 30  # seconds a body may take to arrive: a trickling client is cut
# a refused token waits this long: 8 flooding connections then send 32 calls/s, not thousands,
# while a legitimate client with a bad token only learns of it a quarter second later
DEFAULT_AUTH_TARPIT_MS = 250
# refused calls held at once per worker: a held call costs a task and a few KiB (its body is
# already dropped), so 512 is a few MiB; past it the 401 is immediate and the connection closed
DEFAULT_AUTH_TARPIT_MAX = 512
HANDSHAKE_PLANE = "*"
HANDSHAKE_VERB = "handshake"
JSON = "application/json"
# the wire's routes below /bifrost/, every one POST only: the handshake and ``<plane>-call``
# (a plane this app does not serve included: POSTed, it answers ``wire.unknown_plane``)
WIRE_ROUTE = re.compile(r"handshake|[^/]+-call")

_BODY_LEFT_UNREAD = (RequestTimeout, PayloadTooLarge)
# a client that closed its connection before its body ended: the call's outcome and the
# status its log line and metric carry (nginx's "client closed request"); nothing is sent
CLIENT_GONE = "client.disconnected"
CLIENT_GONE_STATUS = 499


class ClientGone(Exception):
    """The client closed the connection before the body ended."""


Handler = Callable[[CallRecord, VerifiedToken, Envelope], Awaitable[bytes]]
# runs a blocking store call off the event loop: the server hands in its store threads
Offload = Callable[..., Awaitable[Any]]


class WireEndpoints:
    """The wire over a set of planes; ``routes()`` mounts it into a Starlette app."""

    def __init__(
        self,
        planes: Sequence[Plane],
        verifier: TokenVerifier,
        replay_guard: ReplayGuard,
        consumer_id: str,
        *,
        offload: Offload,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        auth_tarpit: float = DEFAULT_AUTH_TARPIT_MS / 1000,
        auth_tarpit_max: int = DEFAULT_AUTH_TARPIT_MAX,
        server_name: str = "ratatoskr",
        server_version: str = __version__,
        observer: CallObserver | None = None,
    ) -> None:
        names = [p.name for p in planes]
        if len(set(names)) != len(names):
            raise ValueError("two planes share a name")
        if max_body_bytes < 1:
            raise ValueError("max_body_bytes must be positive")
        if auth_tarpit < 0 or auth_tarpit_max < 1:
            raise ValueError("auth_tarpit must be >= 0 and auth_tarpit_max positive")
        # every plane's health says so when the ledger its mutating calls need is unusable
        problem = replay_guard.problem if isinstance(replay_guard, CheckedGuard) else None
        self.planes: dict[str, Plane] = {
            p.name: dataclasses.replace(p, ledger_problem=problem) if problem else p for p in planes
        }
        self.verifier = verifier
        self.replay_guard = replay_guard
        self.consumer_id = consumer_id
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.auth_tarpit = auth_tarpit
        self.auth_tarpit_max = auth_tarpit_max
        self.tarpit_held = 0  # refused calls sleeping now (one event loop: no lock needed)
        self.server = {"name": server_name, "version": server_version}
        self.observer = observer
        self.offload = offload
        self._health_checks = {name: BoundedHealth(p.health) for name, p in self.planes.items()}

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = [
            Route("/bifrost/handshake", self.handshake, methods=["POST"]),
        ]
        for name in self.planes:
            routes.append(
                Route(f"/bifrost/{name}-call", self._plane_endpoint(name), methods=["POST"])
            )
        routes += [
            Route("/bifrost/{plane}-call", self.other_plane, methods=["POST"]),
            # after every POST route, for any method: what Starlette would answer in plain
            # text (405 on a wire route, 404 elsewhere under /bifrost) in the error envelope
            Route("/bifrost", _AnyMethod(self.not_routed)),
            Route("/bifrost/{path:path}", _AnyMethod(self.not_routed)),
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/readyz", self.readyz, methods=["GET"]),
        ]
        return routes

    # -- endpoints -----------------------------------------------------------------------

    def _plane_endpoint(self, name: str) -> Callable[[Request], Awaitable[Response]]:
        plane = self.planes[name]

        async def endpoint(request: Request) -> Response:
            return await self._serve(request, plane.name, self._call_handler(plane))

        return endpoint

    async def handshake(self, request: Request) -> Response:
        return await self._serve(request, HANDSHAKE_PLANE, self._handshake)

    async def other_plane(self, request: Request) -> Response:
        return _unrouted(UnknownPlane("this app does not serve that plane"))

    async def not_routed(self, request: Request) -> Response:
        """A request under ``/bifrost`` no wire route takes: a wire route's path with a
        method other than POST (405, ``Allow: POST``), or a path the wire does not define."""
        if WIRE_ROUTE.fullmatch(request.path_params.get("path", "")):
            response = _unrouted(MethodNotAllowed("the wire's routes take POST only"))
            response.headers["Allow"] = "POST"
            return response
        wire_routes = "POST /bifrost/handshake or POST /bifrost/<plane>-call"
        return _unrouted(UnknownRoute(f"no such wire route: {wire_routes}"))

    async def healthz(self, request: Request) -> Response:
        return Response(orjson.dumps({"status": "ok"}), media_type=JSON)

    async def healths(self, offload: Offload) -> dict[str, dict[str, Any]]:
        """Every plane's health, asked at once (each may wait about a second for a database
        that went away), each within its deadline (``readiness.py``)."""
        checks = self._health_checks
        answers = await asyncio.gather(*(checks[name](offload) for name in self.planes))
        return dict(zip(self.planes, answers, strict=True))

    async def readyz(self, request: Request) -> Response:
        planes = await self.healths(self.offload)
        ready = all(h["status"] in ("ok", "degraded") for h in planes.values())
        body = orjson.dumps({"ready": ready, "planes": planes})
        return Response(body, status_code=200 if ready else 503, media_type=JSON)

    # -- the pipeline --------------------------------------------------------------------

    async def _serve(self, request: Request, plane: str, handler: Handler) -> Response:
        started = time.perf_counter()
        record = CallRecord(request_id=new_request_id(), plane=plane)
        response = await self._answer(request, plane, handler, record)
        response.headers["X-Request-ID"] = record.request_id
        ANSWERING.set(record.request_id)
        elapsed = time.perf_counter() - started
        log_call(record, elapsed * 1000)
        if self.observer is not None:
            try:
                self.observer.call_finished(record, elapsed)
            except Exception as exc:  # watching a call never changes its answer
                log_observer_error(exc)
        if response.status_code == HTTPStatus.UNAUTHORIZED:
            # after ``_answer`` returned: the body, the parsed envelope and the error's
            # traceback are gone, so a held call holds its small response only
            await self._tarpit(response)
        return response

    async def _answer(
        self, request: Request, plane: str, handler: Handler, record: CallRecord
    ) -> Response:
        """The checks in the wire's order, then the handler; every failure as its answer."""
        try:
            body = await self._read_body(request)
            token = self.verifier.verify(_bearer(request))
            record.actor = token.actor
            obj = self._decode_bound(plane, token, body)
            record.request_id = request_id_of(obj) or record.request_id
            envelope = envelope_from(obj)
            if token.plane != plane:
                raise BindingMismatch("the token's plane claim does not match this route")
            if token.verb != envelope.verb:
                raise BindingMismatch("the token's verb claim does not match the envelope")
            content = await handler(record, token, envelope)
            return Response(content, media_type=JSON)
        except ClientGone:
            # nobody to answer: logged and counted as itself, not as a bad request
            record.outcome, record.status = CLIENT_GONE, CLIENT_GONE_STATUS
            return Response(b"", status_code=CLIENT_GONE_STATUS)
        except BifrostError as error:
            record.outcome, record.status = error.wire_code(_qualifier(plane)), error.http_status
            response = _error_response(error, plane, record.request_id)
            if isinstance(error, _BODY_LEFT_UNREAD):
                # the rest of the body may still be coming: without this, uvicorn keeps the
                # connection open for it, and a trickling client holds it forever
                response.headers["Connection"] = "close"
            return response
        except Exception as exc:
            log_internal_error(record.request_id, exc)
            internal = InternalError("internal error")
            record.outcome, record.status = internal.code, internal.http_status
            return _error_response(internal, plane, record.request_id)

    def _decode_bound(self, plane: str, token: VerifiedToken, body: bytes) -> dict[str, Any]:
        """Step 3, the body's binding, then the envelope's JSON (with the split of the verb
        the token names). The hash of a large body runs on another thread beside the
        decode; a mismatch is the answer whatever the decode found, as when it ran first."""
        digest = BodyDigest(body)
        served = self.planes.get(plane)
        try:
            obj = served.decode(token.verb, body) if served is not None else decode_object(body)
        except Exception:
            self.verifier.check_digest(token, digest.hexdigest())
            raise
        self.verifier.check_digest(token, digest.hexdigest())
        return obj

    async def _tarpit(self, response: Response) -> None:
        """Hold a refused call ``auth_tarpit`` seconds, unless ``auth_tarpit_max`` calls are
        held already: then answer at once and close the connection, so the flooder has to
        reconnect and nothing queues up in this worker."""
        if self.auth_tarpit <= 0:
            return
        if self.tarpit_held >= self.auth_tarpit_max:
            response.headers["Connection"] = "close"
            return
        self.tarpit_held += 1
        try:
            await asyncio.sleep(self.auth_tarpit)
        finally:
            self.tarpit_held -= 1

    async def _read_body(self, request: Request) -> bytes:
        """The raw body, refused with 413 as soon as it is known to exceed the limit, and
        with 408 when it has not all arrived within ``body_timeout`` (uvicorn has no such
        deadline: a client trickling a body would hold its connection and task forever)."""
        length = request.headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise MalformedEnvelope("Content-Length is not a number")
            if int(length) > self.max_body_bytes:
                raise PayloadTooLarge(f"the body exceeds {self.max_body_bytes} bytes")
        if not _is_json(request.headers.get("content-type")):
            raise UnsupportedMediaType("the body must be application/json")
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise PayloadTooLarge(f"the body exceeds {self.max_body_bytes} bytes")
                    chunks.append(chunk)
        except ClientDisconnect:
            raise ClientGone from None
        except TimeoutError:
            raise RequestTimeout(
                f"the body did not arrive within {self.body_timeout:g} s"
            ) from None
        return b"".join(chunks)

    def _call_handler(self, plane: Plane) -> Handler:
        async def handler(record: CallRecord, token: VerifiedToken, envelope: Envelope) -> bytes:
            verb = plane.verb(envelope.verb)
            record.verb = verb.name
            for name in verb.counted:
                value = envelope.args.get(name)
                if isinstance(value, list):
                    record.counts[name] = len(value)
            ctx = CallContext(
                actor=token.actor,
                scope=token.scope,
                plane=plane.name,
                verb=verb.name,
                request_id=record.request_id,
                jti=token.jti,
            )
            if verb.quick is not None:
                # A read-only verb with a bounded fast path: validated and, when cheap for
                # sure, answered right here; the threadpool hand-off would cost more.
                prepared = plane.prepare(verb, envelope.args, ctx)
                result = plane.execute_quick(verb, prepared, ctx)
                if result is not DEFERRED:
                    return self._answer_body(result, ctx, record)
                body: bytes = await self.offload(self._execute, plane, verb, prepared, ctx, record)
                return body
            body = await self.offload(self._run, plane, verb, envelope.args, ctx, token, record)
            return body

        return handler

    def _run(
        self,
        plane: Plane,
        verb: Verb,
        args: Mapping[str, Any],
        ctx: CallContext,
        token: VerifiedToken,
        record: CallRecord,
    ) -> bytes:
        """Steps 6 to 8 and the store, in the threadpool: args, scope, replay, execute."""
        prepared = plane.prepare(verb, args, ctx)
        if verb.mutating and not self._claim(token):
            raise TokenReplayed("this token was already used for a mutating call")
        return self._execute(plane, verb, prepared, ctx, record)

    def _claim(self, token: VerifiedToken) -> bool:
        """The token's claim in the jti ledger; a ledger that cannot be used says it is the
        ledger (its file, not the plane's, is missing or damaged)."""
        try:
            return self.replay_guard.claim(token.jti, token.expires_at)
        except Unavailable as exc:
            why = exc.message.removeprefix("store unavailable: ")
            raise Unavailable(f"store unavailable: {LEDGER_DOWN.format(why)}") from None

    def _execute(
        self, plane: Plane, verb: Verb, prepared: Any, ctx: CallContext, record: CallRecord
    ) -> bytes:
        return self._answer_body(plane.execute(verb, prepared, ctx), ctx, record)

    @staticmethod
    def _answer_body(result: Any, ctx: CallContext, record: CallRecord) -> bytes:
        if isinstance(result, list):
            record.counts["results"] = len(result)
        elif isinstance(result, dict) and result.get("replayed") is True:
            record.replayed = True
        return success_body(result, ctx.request_id)

    async def _handshake(self, record: CallRecord, token: VerifiedToken, env: Envelope) -> bytes:
        record.verb = HANDSHAKE_VERB
        if env.verb != HANDSHAKE_VERB:
            raise BindingMismatch("the handshake route takes the verb handshake only")
        names = self._handshake_planes(env.args)
        planes = {name: await self.offload(self.planes[name].handshake) for name in names}
        result = {
            "wire": WIRE_VERSION,
            "consumer_id": self.consumer_id,
            "server": self.server,
            "planes": planes,
        }
        return success_body(result, record.request_id)

    def _handshake_planes(self, args: Mapping[str, Any]) -> list[str]:
        if set(args) - {"planes"}:
            raise MalformedEnvelope("handshake args may only hold planes")
        if "planes" not in args:
            return list(self.planes)
        wanted = args["planes"]
        if not isinstance(wanted, list) or not all(isinstance(p, str) for p in wanted):
            raise MalformedEnvelope("handshake args.planes must be a list of plane names")
        unknown = [p for p in wanted if p not in self.planes]
        if unknown:
            raise UnknownPlane(f"this app serves only: {', '.join(self.planes)}")
        return list(dict.fromkeys(wanted))


class _AnyMethod:
    """An endpoint as an ASGI app, so its ``Route`` takes every method: Starlette gives a
    plain function GET alone."""

    def __init__(self, endpoint: Callable[[Request], Awaitable[Response]]) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.endpoint(Request(scope, receive))
        await response(scope, receive, send)


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise MissingToken("an Authorization: Bearer token is required")
    return token


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media, *params = (part.strip().lower() for part in content_type.split(";"))
    if media != JSON:
        return False
    for param in params:
        name, _, value = param.partition("=")
        if name.strip() == "charset" and value.strip().strip('"') not in ("utf-8", "utf8"):
            return False
    return True


def _qualifier(plane: str | None) -> str | None:
    """The plane that qualifies a plane error's code; the handshake has none."""
    return None if plane == HANDSHAKE_PLANE else plane


def _unrouted(error: BifrostError) -> Response:
    """The envelope of a request no plane takes, under a new request id that its access
    log line carries too."""
    request_id = new_request_id()
    ANSWERING.set(request_id)
    return _error_response(error, None, request_id)


def _error_response(error: BifrostError, plane: str | None, request_id: str) -> Response:
    return Response(
        error_body(error, _qualifier(plane), request_id),
        status_code=error.http_status,
        media_type=JSON,
        headers={"X-Request-ID": request_id},
    )
