"""What ``Client`` and ``AsyncClient`` are made of: the server's URL, where tokens come
from, the retry policy, and the handshake once it is known."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self, TypedDict
from urllib.parse import urlsplit

from ratatoskr.client.tokens import (
    DEFAULT_ACTOR,
    DEFAULT_LIFETIME,
    KeyMinter,
    TokenProvider,
    key_from_env,
)
from ratatoskr.client.transport import Catalog, Retry
from ratatoskr.wire.tokens import DEFAULT_CONSUMER, DEFAULT_ISSUER

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "RATATOSKR_URL"
DEFAULT_TIMEOUT = 30.0


def checked_url(url: str, name: str = "the server's URL") -> str:
    """``url`` without its trailing slash, once it is an ``http://`` or ``https://`` URL
    with a host: anything else is refused here, naming the setting (``name``), rather
    than by every call as a server that does not answer."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{name} is empty: give an http:// or https:// URL")
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} must be an http:// or https:// URL with a host")
    return url.strip().rstrip("/")


def checked_timeout(timeout: float, name: str = "timeout") -> float:
    """``timeout`` once it is a finite number of seconds above 0."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"{name} must be a number of seconds")
    if not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"{name} must be a finite number of seconds above 0")
    return float(timeout)


def url_from_env(env: Mapping[str, str] | None = None) -> str:
    """``RATATOSKR_URL``, else the local server on ``RATATOSKR_PORT`` (default 8000)."""
    env = os.environ if env is None else env
    if env.get(URL_ENV):
        return checked_url(env[URL_ENV], URL_ENV)
    port = (env.get("RATATOSKR_PORT") or "8000").strip()
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError("RATATOSKR_PORT must be a port number (1..65535)")
    return f"http://127.0.0.1:{port}"


class ClientSettings(TypedDict, total=False):
    """What ``Client`` and ``AsyncClient`` take besides the URL and their own ``http``; the
    meaning and defaults are ``ClientBase``'s."""

    key: bytes | str | None
    scope: Mapping[str, str] | None
    actor: str
    kid: str | None
    token_provider: TokenProvider | None
    retry: Retry | int
    timeout: float
    lifetime: int
    issuer: str
    audience: str


class ClientBase:
    """The settings both clients share; see ``Client`` for what each argument means."""

    def __init__(
        self,
        base_url: str,
        *,
        key: bytes | str | None = None,
        scope: Mapping[str, str] | None = None,
        actor: str = DEFAULT_ACTOR,
        kid: str | None = None,
        token_provider: TokenProvider | None = None,
        retry: Retry | int = 3,
        timeout: float = DEFAULT_TIMEOUT,
        lifetime: int = DEFAULT_LIFETIME,
        issuer: str = DEFAULT_ISSUER,
        audience: str = DEFAULT_CONSUMER,
    ) -> None:
        if (key is None) == (token_provider is None):
            raise TypeError("give either key= (with scope=) or token_provider=")
        if key is not None:
            if scope is None:
                raise TypeError("key= needs scope= (the region of the store tokens name)")
            token_provider = KeyMinter(
                key,
                scope=scope,
                actor=actor,
                kid=kid,
                issuer=issuer,
                audience=audience,
                lifetime=lifetime,
            )
        assert token_provider is not None
        self.base_url = checked_url(base_url)
        self.tokens: TokenProvider = token_provider
        self.retry = retry if isinstance(retry, Retry) else Retry(attempts=retry)
        self.timeout = checked_timeout(timeout)
        self.catalog: Catalog | None = None
        self.rng = random.Random()

    @classmethod
    def from_env(
        cls,
        base_url: str | None = None,
        *,
        scope: Mapping[str, str],
        actor: str = DEFAULT_ACTOR,
        kid: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        **options: Any,
    ) -> Self:
        """A client with the key ``ratatoskr call`` reads (``RATATOSKR_HEIMDALL_KEY``,
        ``..._KEY_FILE``, ``..._KEYS_FILE`` with ``kid``, else ``./data/heimdall.key``)
        and the URL of ``RATATOSKR_URL`` (else ``http://127.0.0.1:$RATATOSKR_PORT``)."""
        key = key_from_env(env, kid, cwd)
        url = base_url or url_from_env(env)
        return cls(url, key=key, scope=scope, actor=actor, kid=kid, **options)

    def _scoped_settings(self, scope: Mapping[str, str], actor: str | None) -> dict[str, Any]:
        if not isinstance(self.tokens, KeyMinter):
            raise TypeError("with_scope needs a client made with key=")
        return {
            "token_provider": self.tokens.with_scope(scope, actor),
            "retry": self.retry,
            "timeout": self.timeout,
        }
