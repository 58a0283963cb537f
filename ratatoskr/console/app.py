"""The console's Starlette app: routes over the ops API, behind ``auth.Guard``.

Every handler reads its inputs, then runs the ops call in the threadpool under one lock
(the console serves one operator; the stores open lazily and are not shared across
concurrent first uses), then renders. GET never changes a file; every POST needs the CSRF
header (``auth``), and a removal also needs the typed confirmation (``actions``).
"""

from __future__ import annotations

import apsw
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ratatoskr.console import actions, pages
from ratatoskr.console.auth import Guard, Secret
from ratatoskr.console.planes import Absent, PlaneDown, found_at_start
from ratatoskr.console.render import page, static_files
from ratatoskr.console.state import Console, Refused
from ratatoskr.core.errors import BifrostError, Unavailable
from ratatoskr.ops.stores import Stores
from ratatoskr.sqlite.database import SchemaError

# (method, path, handler name); the tests walk this table to try every route without the secret
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("GET", "/", "overview"),
    ("GET", "/tree/{plane}", "tree"),
    ("GET", "/erase", "erase_form"),
    ("GET", "/check", "check"),
    ("POST", "/open/{plane}", "open_record"),
    ("POST", "/forget/preview", "forget_preview"),
    ("POST", "/forget", "forget"),
    ("POST", "/erase/preview", "erase_preview"),
    ("POST", "/erase", "erase"),
)
HANDLERS = {**pages.HANDLERS, **actions.HANDLERS}


def _route(console: Console, method: str, path: str, name: str) -> Route:
    handler = HANDLERS[name]

    def error(request: Request, title: str, message: str, status: int) -> Response:
        return page(
            "error_fragment.html" if method == "POST" else "error.html",
            console.context(request, message=message, title=title),
            status,
        )

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(console, request)
        except PlaneDown as exc:
            # a plane the console serves cannot be read now (its file gone or damaged, its
            # database unreachable): the reason, and worth retrying
            return error(request, "Store unavailable", str(exc), 503)
        except Absent as exc:
            return error(request, "Refused", str(exc), 404)
        except Unavailable as exc:
            # the store cannot be reached now (PostgreSQL down, a lock held too long): not the
            # operator's input, and worth retrying
            return error(request, "Store unavailable", str(exc), 503)
        except (ValueError, BifrostError, Refused) as exc:
            status = exc.status if isinstance(exc, Refused) else 400
            return error(request, "Refused", str(exc), status)
        except (SchemaError, apsw.Error, OSError) as exc:
            # the type only: an SQLite message can quote a statement, and a path is not needed
            message = f"the database could not be read ({type(exc).__name__})"
            return error(request, "Database error", message, 500)

    return Route(path, endpoint, methods=[method], name=name)


def create_console_app(
    stores: Stores, secret: Secret, *, operator: str, hosts: frozenset[str] | None = None
) -> Starlette:
    console = Console(stores, secret, operator, found_at_start(stores))
    files = static_files()

    async def static(request: Request) -> Response:
        found = files.get(request.path_params["name"])
        if found is None:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(found[0], media_type=found[1])

    routes = [_route(console, *row) for row in ROUTES]
    routes.append(Route("/static/{name}", static, methods=["GET"], name="static"))
    return Starlette(routes=routes, middleware=[Middleware(Guard, secret=secret, hosts=hosts)])
