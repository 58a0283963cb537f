"""The composite server: both planes, one token verifier, one jti ledger, one Starlette app.

``create_app(settings)`` returns the app at once; its stores are opened in the lifespan (in
each worker, after gunicorn forks) and closed on shutdown. Until then the wire app does not
exist, so the routes are served by a small ASGI holder that forwards to it once it is built
by ``build_plane_app``: the wire is assembled exactly as the standalone providers assemble it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

from ratatoskr.affect.store import open_affect_store
from ratatoskr.affect.verbs import affect_plane
from ratatoskr.memory.store import open_memory_store
from ratatoskr.memory.verbs import memory_plane
from ratatoskr.server.apps import build_plane_app
from ratatoskr.server.metrics import CONTENT_TYPE, Metrics
from ratatoskr.server.settings import (
    AFFECT_DB_ENV,
    DIM_ENV,
    MEMORY_DB_ENV,
    Settings,
    SettingsError,
    load_settings,
)
from ratatoskr.server.threads import configure_store_threads, run_in_store_thread
from ratatoskr.sqlite.database import SchemaError
from ratatoskr.sqlite.jti import JtiLedger, ledger_beside
from ratatoskr.wire.plane import Plane
from ratatoskr.wire.tokens import TokenVerifier

PLANES = ("memory", "affect")


@dataclass
class OpenStores:
    """What the lifespan opened, closed in reverse order on shutdown."""

    planes: list[Plane] = field(default_factory=list)
    closers: list[Any] = field(default_factory=list)

    def close(self) -> None:
        for closer in reversed(self.closers):
            closer.close()
        self.closers.clear()


def ledger_path(settings: Settings, planes: Sequence[str]) -> str:
    """The jti ledger every worker shares: beside the memory file (where the standalone
    memory provider keeps it too), or beside the affect file when memory is not served."""
    return ledger_beside(settings.memory_db if "memory" in planes else settings.affect_db)


def open_plane(settings: Settings, name: str) -> tuple[Plane, Any]:
    """One plane over its opened store; the store is returned to be closed."""
    if name == "memory":
        memory = open_memory_store(
            settings.memory_db, embedding_dim=settings.embedding_dim, settings=settings.database
        )
        return memory_plane(memory), memory
    affect = open_affect_store(settings.affect_db, settings=settings.database)
    return affect_plane(affect), affect


def open_stores(settings: Settings, planes: Sequence[str]) -> tuple[OpenStores, JtiLedger]:
    """Open the planes' stores and the shared jti ledger."""
    opened = OpenStores()
    try:
        for name in planes:
            plane, store = open_plane(settings, name)
            opened.closers.append(store)
            opened.planes.append(plane)
        ledger = JtiLedger(ledger_path(settings, planes), settings=settings.database)
        opened.closers.append(ledger)
    except BaseException:
        opened.close()
        raise
    return opened, ledger


def check_stores(settings: Settings, planes: Sequence[str] = PLANES) -> None:
    """Open and close every store once, so a bad file fails the start, naming its setting.

    ``serve`` runs this in the gunicorn master: a worker that cannot boot would only say so
    in its own traceback.
    """
    for name in planes:
        setting = MEMORY_DB_ENV if name == "memory" else AFFECT_DB_ENV
        try:
            _, store = open_plane(settings, name)
        except SchemaError as exc:
            if name == "memory" and "embedding_dim" in str(exc):
                raise SettingsError(f"{DIM_ENV}: {exc}") from None
            raise SettingsError(f"{setting}: {exc}") from None
        except ValueError as exc:
            raise SettingsError(f"{setting}: {exc}") from None
        except Exception as exc:  # apsw: not a database, cannot open, ...
            raise SettingsError(
                f"{setting}: the file cannot be opened as a database ({type(exc).__name__})"
            ) from None
        store.close()


class _WireHolder:
    """Forwards to the wire app once the lifespan has built it; 503 before that."""

    def __init__(self) -> None:
        self.app: Starlette | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.app is None:
            body = orjson.dumps({"ready": False, "reason": "the server is starting or stopping"})
            response = Response(body, status_code=503, media_type="application/json")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_app(settings: Settings, *, planes: Sequence[str] = PLANES) -> Starlette:
    """The server over ``planes`` (both by default; one for the standalone providers)."""
    unknown = set(planes) - set(PLANES)
    if unknown or not planes:
        raise ValueError(f"planes must be a non-empty subset of {', '.join(PLANES)}")
    metrics = Metrics()
    holder = _WireHolder()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # every storage call, the stores' first connections included, runs on the store
        # threads: a fixed set, so each file has a bounded number of connections
        configure_store_threads(settings.store_threads)
        opened, ledger = await run_in_store_thread(open_stores, settings, planes)
        try:
            verifier = TokenVerifier(
                settings.keyring,
                issuer=settings.issuer,
                audience=settings.consumer_id,
                max_lifetime=settings.max_token_ttl,
                allow_unscoped=settings.allow_unscoped,
            )
            metrics.know_planes(opened.planes)
            holder.app = build_plane_app(
                opened.planes,
                verifier,
                ledger,
                settings.consumer_id,
                settings.max_body_bytes,
                observer=metrics,
                body_timeout=settings.body_timeout,
                auth_tarpit=settings.auth_tarpit_ms / 1000,
                auth_tarpit_max=settings.auth_tarpit_max,
            )
            app.state.wire = holder.app.state.wire
            yield
        finally:
            holder.app = None
            await run_in_store_thread(opened.close)

    async def metrics_endpoint(request: Request) -> Response:
        if holder.app is not None:
            await run_in_store_thread(metrics.refresh, holder.app.state.wire.planes)
        body = await run_in_store_thread(metrics.exposition)
        return Response(body, media_type=CONTENT_TYPE)

    routes = [Route("/metrics", metrics_endpoint, methods=["GET"]), Mount("", app=holder)]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.metrics = metrics
    return app


def app_from_env() -> Starlette:
    """Factory for ``gunicorn 'ratatoskr.server.app:app_from_env()'``: settings from the
    environment."""
    return create_app(load_settings())
