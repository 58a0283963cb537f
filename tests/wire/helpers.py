"""Builders shared by the wire tests: a client that mints a token bound to each body."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from starlette.testclient import TestClient

from ratatoskr.wire.tokens import mint_token

if TYPE_CHECKING:
    # starlette types its TestClient as an httpx2.Client, whose answers are httpx2's
    from httpx2 import Response

KEY = b"k" * 40 + b"-wire-tests"  # 51 bytes: PyJWT asks at least 48 of HS384
OTHER_KEY = b"o" * 40
DIM = 8
TENANT = {"tenant": "acme"}


def vec(*head: float) -> list[float]:
    return [float(x) for x in head] + [0.0] * (DIM - len(head))


def record(chunk_id: str, vector: list[float], **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": chunk_id,
        "embedding": vector,
        "scope": dict(TENANT),
        "distillate": f"about {chunk_id}",
    }
    out.update(fields)
    return out


def envelope(verb: str, args: Mapping[str, Any], **extra: Any) -> bytes:
    return orjson.dumps({"wire": "0.6", "verb": verb, "args": dict(args), **extra})


def token_for(
    body: bytes,
    *,
    plane: str = "memory",
    verb: str = "search",
    scope: Mapping[str, str] | None = None,
    key: bytes = KEY,
    **options: Any,
) -> str:
    return mint_token(
        key,
        plane=plane,
        verb=verb,
        scope=TENANT if scope is None else scope,
        sub=options.pop("sub", "worldtree"),
        body=body,
        **options,
    )


def post(
    client: TestClient,
    body: bytes,
    token: str | None,
    *,
    path: str = "/bifrost/memory-call",
    content_type: str = "application/json",
) -> Response:
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return client.post(path, content=body, headers=headers)


def call(
    client: TestClient,
    verb: str,
    args: Mapping[str, Any],
    *,
    plane: str = "memory",
    scope: Mapping[str, str] | None = None,
    **token_options: Any,
) -> Response:
    """One well-formed call: the token is minted for exactly this body, plane and verb."""
    body = envelope(verb, args)
    token = token_for(body, plane=plane, verb=verb, scope=scope, **token_options)
    path = "/bifrost/handshake" if plane == "*" else f"/bifrost/{plane}-call"
    return post(client, body, token, path=path)


def ok(response: Response) -> Any:
    body = response.json()
    assert response.status_code == 200, body
    assert body["ok"] is True
    return body["result"]


def error_code(response: Response) -> str:
    body = response.json()
    assert body["ok"] is False
    assert set(body) == {"ok", "error", "request_id"}
    assert set(body["error"]) <= {"code", "message", "retryable", "details"}
    assert response.headers["x-request-id"] == body["request_id"]
    return str(body["error"]["code"])


def past(seconds: float) -> float:
    return time.time() - seconds
