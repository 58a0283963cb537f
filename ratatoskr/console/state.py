"""What every console handler shares: the stores behind one lock, the operator, the secret."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request

from ratatoskr.console import planes
from ratatoskr.console.auth import Secret
from ratatoskr.ops.stores import PlaneStore, Stores

T = TypeVar("T")


@dataclass
class Console:
    """What every handler needs: the stores, who operates, and the secret's CSRF value."""

    stores: Stores
    secret: Secret
    operator: str
    known: frozenset[str] = frozenset()  # the planes there at start: gone now means down
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def run(self, work: Callable[[Stores], T]) -> T:
        def locked() -> T:
            with self.lock:
                return work(self.stores)

        return await run_in_threadpool(locked)

    def store(self, stores: Stores, plane: str) -> PlaneStore:
        """The plane's store, or why not (``planes.PlaneDown``: 503; ``planes.Absent``: 404)."""
        return planes.open_plane(stores, self.known, plane)

    def context(self, request: Request, **extra: Any) -> dict[str, Any]:
        base = {"csrf": self.secret.csrf, "operator": self.operator, "section": None, "title": ""}
        return {**base, "path": request.url.path, **extra}


MAX_FORM_BYTES = 1 << 20


async def read_form(request: Request) -> FormData:
    """The URL-encoded body the page's script sends (no multipart: nothing is uploaded)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise Refused("the form is too large", 413)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("the form is not UTF-8") from None
    fields: list[tuple[str, str | UploadFile]] = list(
        parse_qsl(text, keep_blank_values=True, max_num_fields=10_000)
    )
    return FormData(fields)


class Refused(Exception):
    """Bad input from the page: shown to the operator as it is, with this status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
