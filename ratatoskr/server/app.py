"""The one app factory: planes, one token verifier, one jti ledger, metrics, one Starlette app.

``create_app(settings)`` returns the app at once. Planes named by string are opened from the
settings in the lifespan (in each worker, after gunicorn forks) and closed on shutdown; until
then the routes are served by a small ASGI holder that answers 503. Planes passed ready-made
(the seed contract's ``build_memory_provider_app``, the tests) are served over stores their
caller owns, so their routes exist before the lifespan runs. Both ways build the wire the
same way, with the same metrics, store threads and probes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

from ratatoskr.affect.verbs import affect_plane
from ratatoskr.core.errors import Unavailable
from ratatoskr.memory.store import RatatoskrMemoryStore
from ratatoskr.memory.verbs import memory_plane
from ratatoskr.ops.locations import is_postgres, open_affect, open_memory
from ratatoskr.ops.locations import open_ledger as open_ledger_at
from ratatoskr.postgres.probe import unfinished_migrations
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
from ratatoskr.server.unopened import UnopenedWire
from ratatoskr.sqlite.database import MAX_DB_BYTES_ENV, SchemaError, remove_database_file
from ratatoskr.sqlite.jti import JtiLedger
from ratatoskr.wire.http import WireEndpoints
from ratatoskr.wire.openapi import openapi_document
from ratatoskr.wire.plane import Plane
from ratatoskr.wire.replay import ReplayGuard
from ratatoskr.wire.tokens import TokenVerifier

logger = logging.getLogger(__name__)
STARTING = "the server is starting or stopping"
OPEN_RETRY_MAX = 10.0  # seconds between two tries to open the stores, at most

PlaneSpec = str | Plane
LedgerSpec = ReplayGuard | str | None

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


def open_plane(settings: Settings, name: str) -> tuple[Plane, Any]:
    """One plane over its opened store; the store is returned to be closed."""
    if name == "memory":
        memory = open_memory(
            settings.memory_db,
            embedding_dim=settings.embedding_dim,
            database=settings.database,
            pool=settings.postgres,
        )
        return memory_plane(memory), memory
    affect = open_affect(settings.affect_db, database=settings.database, pool=settings.postgres)
    return affect_plane(affect), affect


def open_stores(settings: Settings, planes: Sequence[str]) -> OpenStores:
    """Open the planes' stores (closed by ``OpenStores.close``)."""
    opened = OpenStores()
    try:
        for name in planes:
            plane, store = open_plane(settings, name)
            opened.closers.append(store)
            opened.planes.append(plane)
    except BaseException:
        opened.close()
        raise
    return opened


def check_stores(settings: Settings, planes: Sequence[str] = PLANES) -> Settings:
    """Open and close every store once, so a bad file fails the start, naming its setting;
    returns the settings to open them with from then on: files that must exist.

    ``serve`` runs this in the gunicorn master: a worker that cannot boot would only say so
    in its own traceback. It creates the jti ledger as well, so no two workers create it. A
    database an ``admin migrate`` has only half filled is refused: served, it would answer
    from half the records, and the migration could not finish over the writes. Once the
    files are made, a worker (a replacement for one killed, too) must not make another: a
    file missing then is one an operator moved away, and a new empty one in its place would
    answer nothing and take writes the restored file would lose, so it is refused (503,
    ``down``) until the file is back.
    """
    for name in planes:
        location = settings.memory_db if name == "memory" else settings.affect_db
        made = not is_postgres(location) and not os.path.lexists(location)
        try:
            _check_plane(settings, name)
        except SettingsError:
            if made:  # a refused start leaves no half-made file behind
                remove_database_file(location)
            raise
    # the ledger too: a new file switched to WAL by two booting workers at once is a lock
    # race one of them loses (SQLite answers BUSY at once there, whatever the busy timeout)
    setting, location = MEMORY_DB_ENV, settings.memory_db
    try:
        open_ledger_at(location, database=settings.database, pool=settings.postgres).close()
    except Unavailable as exc:  # PostgreSQL not reachable (the message masks the URL)
        raise SettingsError(f"{setting}: {exc.message}") from None
    except SchemaError as exc:  # a plane file restored or copied in the ledger's place
        raise SettingsError(f"{setting}: the jti ledger beside it: {exc}") from None
    except Exception as exc:  # apsw: cannot open, read-only directory, ...
        raise SettingsError(
            f"{setting}: the jti ledger beside it cannot be opened ({type(exc).__name__})"
        ) from None
    return existing_files_only(settings)


def _check_plane(settings: Settings, name: str) -> None:
    """``check_stores`` for one plane: open and close its store, and refuse a size cap its
    file could not store one chunk under."""
    location = settings.memory_db if name == "memory" else settings.affect_db
    setting = MEMORY_DB_ENV if name == "memory" else AFFECT_DB_ENV
    try:
        _, store = open_plane(settings, name)
    except SchemaError as exc:
        if name == "memory" and "embedding_dim" in str(exc):
            raise SettingsError(f"{DIM_ENV}: {exc}") from None
        raise SettingsError(f"{setting}: {exc}") from None
    except ValueError as exc:
        raise SettingsError(f"{setting}: {exc}") from None
    except Unavailable as exc:  # PostgreSQL not reachable (the message masks the URL)
        raise SettingsError(f"{setting}: {exc.message}") from None
    except Exception as exc:  # apsw: not a database, cannot open, ...
        if is_postgres(location):
            raise SettingsError(
                f"{setting}: the database cannot be used ({type(exc).__name__})"
            ) from None
        cap = settings.database.max_db_bytes
        if cap and "full" in str(exc):  # SQLITE_FULL, as sqlite-vec words it too
            raise SettingsError(
                f"{MAX_DB_BYTES_ENV}: {cap:,} bytes is too small for {setting}'s file "
                "(a new memory file needs about 4.5 MiB at dimension 768)"
            ) from None
        raise SettingsError(
            f"{setting}: the file cannot be opened as a database ({type(exc).__name__})"
        ) from None
    try:
        needed = store.bytes_for_first_chunk() if isinstance(store, RatatoskrMemoryStore) else None
    finally:
        store.close()
    cap = settings.database.max_db_bytes
    if cap and needed is not None and cap < needed:
        raise SettingsError(
            f"{MAX_DB_BYTES_ENV}: {cap:,} bytes is too small for {setting}'s file: storing "
            f"its first chunk at dimension {settings.embedding_dim} takes it to {needed:,} "
            f"bytes (about {needed / (1 << 20):.1f} MiB)"
        )
    if is_postgres(location) and name in unfinished_migrations(location):
        raise SettingsError(
            f"{setting}: the database holds an unfinished ratatoskr admin migrate of "
            f"the {name} plane; run it again to the end, then start the server"
        )


def existing_files_only(settings: Settings) -> Settings:
    """``settings`` whose SQLite stores open only files that exist (``check_stores``)."""
    return dataclasses.replace(
        settings, database=dataclasses.replace(settings.database, create_files=False)
    )


class _WireHolder:
    """Forwards to the wire app once the lifespan has built it; before that, the wire's
    503 answers of a worker whose stores are not open (``unopened.UnopenedWire``)."""

    def __init__(self, names: Sequence[str], metrics: Metrics) -> None:
        self.app: Starlette | None = None
        self.reason = STARTING
        self.unopened = UnopenedWire(names, lambda: self.reason, metrics)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await (self.app or self.unopened)(scope, receive, send)


def wire_app(
    settings: Settings, planes: Sequence[Plane], guard: ReplayGuard, metrics: Metrics
) -> Starlette:
    """The wire over ready planes, plus ``GET /openapi.json`` describing exactly them."""
    verifier = TokenVerifier(
        settings.keyring,
        issuer=settings.issuer,
        audience=settings.consumer_id,
        max_lifetime=settings.max_token_ttl,
        allow_unscoped=settings.allow_unscoped,
    )
    metrics.know_planes(planes)
    wire = WireEndpoints(
        planes,
        verifier,
        guard,
        settings.consumer_id,
        max_body_bytes=settings.max_body_bytes,
        body_timeout=settings.body_timeout,
        auth_tarpit=settings.auth_tarpit_ms / 1000,
        auth_tarpit_max=settings.auth_tarpit_max,
        observer=metrics,
        offload=run_in_store_thread,
    )
    document = orjson.dumps(openapi_document([p.table for p in planes]))

    async def openapi(request: Request) -> Response:
        return Response(document, media_type="application/json")

    app = Starlette(routes=[*wire.routes(), Route("/openapi.json", openapi, methods=["GET"])])
    app.state.wire = wire
    return app


def create_app(
    settings: Settings,
    *,
    planes: Sequence[PlaneSpec] = PLANES,
    ledger: LedgerSpec = None,
) -> Starlette:
    """The server over ``planes``: names (``memory``, ``affect``) are opened from the settings;
    ``Plane`` objects are served as given and never closed here.

    ``ledger`` is the replay guard: by default the jti ledger beside the memory plane's file
    (``:memory:`` when every plane is given ready-made); a path opens a ledger there; a guard
    object is used as it is.
    """
    names = [p for p in planes if isinstance(p, str)]
    ready = [p for p in planes if isinstance(p, Plane)]
    if not planes or set(names) - set(PLANES) or len(names) + len(ready) != len(planes):
        raise ValueError(f"planes must be a non-empty list of {', '.join(PLANES)} or Plane objects")
    if names and ready:
        raise ValueError("serve either named planes or ready-made ones, not both")
    metrics = Metrics()

    def open_guard() -> tuple[ReplayGuard, bool]:
        if ledger is not None and not isinstance(ledger, str):
            return ledger, False
        if ledger is None and names:
            # beside the memory plane's file (or in its database) whichever planes this
            # process serves: a provider of one plane and a server of both over the same
            # files share it, so a token is used once across all of them
            return open_ledger_at(
                settings.memory_db, database=settings.database, pool=settings.postgres
            ), True
        path = ledger if ledger is not None else ":memory:"
        if is_postgres(path):
            return open_ledger_at(path, pool=settings.postgres), True
        return JtiLedger(path, settings=settings.database), True

    async def metrics_endpoint(request: Request) -> Response:
        wire = getattr(request.app.state, "wire", None)
        if wire is not None:
            # the planes asked at once, as /readyz asks them: each may wait about a second
            # for a database that went away, and a scrape must answer in time
            healths = await wire.healths(run_in_store_thread)
            await run_in_store_thread(metrics.refresh, wire.planes, healths)
        elif names:  # the stores are not open (yet): every plane this worker serves is down
            metrics.mark_down(names)
        body = await run_in_store_thread(metrics.exposition)
        return Response(body, media_type=CONTENT_TYPE)

    metrics_route = Route("/metrics", metrics_endpoint, methods=["GET"])
    if ready:
        return _ready_app(settings, ready, open_guard, metrics, metrics_route)
    holder = _WireHolder(names, metrics)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # every storage call, the stores' first connections included, runs on the store
        # threads: a fixed set, so each file has a bounded number of connections
        configure_store_threads(settings.store_threads)
        kept: list[OpenStores] = []

        async def build() -> None:
            opened = await run_in_store_thread(open_stores, settings, names)
            try:
                guard, owned = await run_in_store_thread(open_guard)
            except BaseException:
                await run_in_store_thread(opened.close)
                raise
            if owned:
                opened.closers.append(guard)
            kept.append(opened)
            holder.app = wire_app(settings, opened.planes, guard, metrics)
            app.state.wire = holder.app.state.wire

        # A worker that cannot open its stores (PostgreSQL away, a file being restored) keeps
        # trying and answers 503 meanwhile: failing its boot would make gunicorn stop the
        # whole server, the workers still serving included.
        retrying = await _first_build(build, holder)
        try:
            yield
        finally:
            if retrying is not None:
                retrying.cancel()
            holder.app = None
            app.state.wire = None
            for opened in kept:
                await run_in_store_thread(opened.close)

    app = Starlette(routes=[metrics_route, Mount("", app=holder)], lifespan=lifespan)
    app.state.metrics = metrics
    app.state.wire = None
    return app


async def _first_build(
    build: Callable[[], Awaitable[None]], holder: _WireHolder
) -> asyncio.Task[None] | None:
    """``build()`` now; if it fails, a task that tries again (1 s, doubling up to
    ``OPEN_RETRY_MAX`` seconds apart) until it succeeds, the holder saying why meanwhile."""
    try:
        await build()
        return None
    except Exception as exc:
        holder.reason = _unopened(exc)
        logger.warning("stores cannot be opened: %s; trying again", holder.reason)

    async def keep_trying() -> None:
        delay = 1.0
        while True:
            await asyncio.sleep(delay)
            try:
                await build()
            except Exception as exc:
                holder.reason = _unopened(exc)
                delay = min(delay * 2, OPEN_RETRY_MAX)
                continue
            holder.reason = STARTING
            logger.info("stores opened: serving")
            return

    return asyncio.create_task(keep_trying())


def _unopened(exc: Exception) -> str:
    """Why the stores cannot be opened, as a reason may say it (no path, no password)."""
    what = exc.message if isinstance(exc, Unavailable) else type(exc).__name__
    return f"the stores cannot be opened ({what}); trying again"


def _ready_app(
    settings: Settings,
    planes: list[Plane],
    open_guard: Any,
    metrics: Metrics,
    metrics_route: Route,
) -> Starlette:
    """Planes over stores the caller owns: the wire is built now, the guard opened now."""
    guard, owned = open_guard()
    inner = wire_app(settings, planes, guard, metrics)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        configure_store_threads(settings.store_threads)
        yield

    app = Starlette(routes=[metrics_route, *inner.routes], lifespan=lifespan)
    app.state.metrics = metrics
    app.state.wire = inner.state.wire
    app.state.ledger = guard if owned else None
    return app


def app_from_env() -> Starlette:
    """Factory for ``gunicorn 'ratatoskr.server.app:app_from_env()'``: settings from the
    environment."""
    return create_app(load_settings())
