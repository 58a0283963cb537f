"""App factories: the planes, a verifier and a replay ledger assembled into a Starlette app.

``build_plane_app`` serves any set of planes (the composite server passes memory and
affect); ``build_memory_app`` is the standalone memory provider of the seed contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ratatoskr.affect.verbs import AffectStore, affect_plane
from ratatoskr.memory.verbs import MemoryStore, memory_plane
from ratatoskr.server.threads import run_in_store_thread
from ratatoskr.sqlite.jti import JtiLedger
from ratatoskr.wire.http import (
    DEFAULT_AUTH_TARPIT_MAX,
    DEFAULT_AUTH_TARPIT_MS,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    WireEndpoints,
)
from ratatoskr.wire.keys import Keyring
from ratatoskr.wire.observer import CallObserver
from ratatoskr.wire.openapi import openapi_document
from ratatoskr.wire.plane import Plane
from ratatoskr.wire.replay import ReplayGuard
from ratatoskr.wire.tokens import DEFAULT_CONSUMER, DEFAULT_ISSUER, TokenVerifier


def build_plane_app(
    planes: Sequence[Plane],
    verifier: TokenVerifier,
    replay_guard: ReplayGuard,
    consumer_id: str,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    observer: CallObserver | None = None,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    auth_tarpit: float = DEFAULT_AUTH_TARPIT_MS / 1000,
    auth_tarpit_max: int = DEFAULT_AUTH_TARPIT_MAX,
) -> Starlette:
    """The wire over ``planes``, plus ``GET /openapi.json`` describing exactly them.

    ``observer`` (the server's metrics) is told of every call; see ``wire.observer``.
    ``auth_tarpit`` seconds delay every 401 (0: none), at most ``auth_tarpit_max`` at once.
    """
    if not planes:
        raise ValueError("an app serves at least one plane")
    if verifier.audience != consumer_id:
        raise ValueError("the verifier's audience must be the consumer id")
    wire = WireEndpoints(
        planes,
        verifier,
        replay_guard,
        consumer_id,
        max_body_bytes=max_body_bytes,
        body_timeout=body_timeout,
        auth_tarpit=auth_tarpit,
        auth_tarpit_max=auth_tarpit_max,
        observer=observer,
        offload=run_in_store_thread,
    )
    document = orjson.dumps(openapi_document([p.table for p in planes]))

    async def openapi(request: Request) -> Response:
        return Response(document, media_type="application/json")

    routes = [*wire.routes(), Route("/openapi.json", openapi, methods=["GET"])]
    app = Starlette(routes=routes)
    app.state.wire = wire
    return app


def build_single_plane_app(
    plane: Plane,
    heimdall_key: bytes | Keyring,
    consumer_id: str = DEFAULT_CONSUMER,
    *,
    replay_guard: ReplayGuard | None = None,
    ledger_path: str = ":memory:",
    issuer: str = DEFAULT_ISSUER,
    allow_unscoped: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    auth_tarpit: float = DEFAULT_AUTH_TARPIT_MS / 1000,
    auth_tarpit_max: int = DEFAULT_AUTH_TARPIT_MAX,
    **verifier_options: Any,
) -> Starlette:
    """One plane with its own verifier and replay ledger (the standalone providers).

    Without a ``replay_guard`` a jti ledger is opened at ``ledger_path``; the default
    ``":memory:"`` protects one process only, so a multi-worker server passes a file.
    """
    keyring = (
        heimdall_key
        if isinstance(heimdall_key, Keyring)
        else Keyring(heimdall_key, setting="heimdall_key")
    )
    verifier = TokenVerifier(
        keyring,
        issuer=issuer,
        audience=consumer_id,
        allow_unscoped=allow_unscoped,
        **verifier_options,
    )
    guard = replay_guard if replay_guard is not None else JtiLedger(ledger_path)
    return build_plane_app(
        [plane],
        verifier,
        guard,
        consumer_id,
        max_body_bytes,
        auth_tarpit=auth_tarpit,
        auth_tarpit_max=auth_tarpit_max,
    )


def build_memory_app(
    store: MemoryStore,
    heimdall_key: bytes | Keyring,
    consumer_id: str = DEFAULT_CONSUMER,
    **kw: Any,
) -> Starlette:
    """The standalone memory provider (options as ``build_single_plane_app``)."""
    if store is None:
        raise ValueError("the memory app needs a store")
    return build_single_plane_app(memory_plane(store), heimdall_key, consumer_id, **kw)


def build_affect_app(
    store: AffectStore,
    heimdall_key: bytes | Keyring,
    consumer_id: str = DEFAULT_CONSUMER,
    **kw: Any,
) -> Starlette:
    """The standalone affect provider (options as ``build_single_plane_app``)."""
    if store is None:
        raise ValueError("the affect app needs a store")
    return build_single_plane_app(affect_plane(store), heimdall_key, consumer_id, **kw)
