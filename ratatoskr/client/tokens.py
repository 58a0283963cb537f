"""Where a call's token comes from: a ``token_provider`` (Heimdall, in production), or a
``KeyMinter`` that mints a fresh one per call from the shared key (development, tests).

A provider is ``f(plane, verb, body) -> token``: the token must be bound to exactly
``body`` (its SHA-256), to ``plane`` (``*`` for the handshake) and to ``verb``. The client
asks for a new one for every attempt, retries included.

``KeyMinter`` mints what ``ratatoskr.wire.tokens.mint_token`` mints (the same claims, HS256,
the same defaults), in about half its time: PyJWT's generic encode costs ~40 µs a token,
which a client minting one per search would spend on every call.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson

from ratatoskr.wire.keys import MIN_KEY_BYTES, load_keyring
from ratatoskr.wire.tokens import ALGORITHM, DEFAULT_CONSUMER, DEFAULT_ISSUER

TokenProvider = Callable[[str, str, bytes], str]
DEFAULT_ACTOR = "worldtree"
DEFAULT_LIFETIME = 60


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


class KeyMinter:
    """A token provider over the shared HS256 key: every call gets its own ``jti``, the
    minter's scope and actor, and a ``lifetime`` of seconds. The key never shows in its
    ``repr`` or in any error."""

    def __init__(
        self,
        key: bytes | str,
        *,
        scope: Mapping[str, str],
        actor: str = DEFAULT_ACTOR,
        kid: str | None = None,
        issuer: str = DEFAULT_ISSUER,
        audience: str = DEFAULT_CONSUMER,
        lifetime: int = DEFAULT_LIFETIME,
        clock: Callable[[], float] = time.time,
    ) -> None:
        raw = key.encode() if isinstance(key, str) else bytes(key)
        if len(raw) < MIN_KEY_BYTES:
            raise ValueError(f"the key is shorter than {MIN_KEY_BYTES} bytes (HS256)")
        if not isinstance(scope, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in scope.items()
        ):
            raise TypeError("scope must map axis names to strings")
        self._key = raw
        self.scope = dict(scope)
        self.actor = actor
        self.kid = kid
        self.issuer = issuer
        self.audience = audience
        self.lifetime = lifetime
        self.clock = clock
        header: dict[str, str] = {"alg": ALGORITHM, "typ": "JWT"}
        if kid is not None:
            header["kid"] = kid
        self._header = _b64(orjson.dumps(header)) + b"."
        self._jti_pid = -1
        self._jti_prefix = ""
        self._jti_count = itertools.count()

    def _jti(self) -> str:
        """A fresh ``jti``: 128 random bits per minter (new ones after a fork) and a count.
        ``os.urandom`` per token would cost ~10 µs a call (a system call each)."""
        pid = os.getpid()
        if pid != self._jti_pid:
            self._jti_pid, self._jti_prefix = pid, os.urandom(16).hex()
        return f"{self._jti_prefix}{next(self._jti_count):x}"

    def __call__(self, plane: str, verb: str, body: bytes) -> str:
        issued = int(self.clock())
        claims = {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": self.actor,
            "iat": issued,
            "exp": issued + self.lifetime,
            "jti": self._jti(),
            "plane": plane,
            "verb": verb,
            "scope": self.scope,
            "body_sha256": hashlib.sha256(body).hexdigest(),
        }
        signing_input = self._header + _b64(orjson.dumps(claims))
        signature = _b64(hmac.new(self._key, signing_input, hashlib.sha256).digest())
        return (signing_input + b"." + signature).decode("ascii")

    def with_scope(self, scope: Mapping[str, str], actor: str | None = None) -> KeyMinter:
        """The same key and settings for another scope (and actor)."""
        return KeyMinter(
            self._key,
            scope=scope,
            actor=self.actor if actor is None else actor,
            kid=self.kid,
            issuer=self.issuer,
            audience=self.audience,
            lifetime=self.lifetime,
            clock=self.clock,
        )

    def __repr__(self) -> str:
        return f"KeyMinter(actor={self.actor!r}, scope={self.scope!r}, kid={self.kid!r})"


def key_from_env(
    env: Mapping[str, str] | None = None, kid: str | None = None, cwd: Path | None = None
) -> bytes:
    """The signing key as ``ratatoskr call`` finds it: ``RATATOSKR_HEIMDALL_KEY``,
    ``RATATOSKR_HEIMDALL_KEY_FILE``, ``RATATOSKR_HEIMDALL_KEYS_FILE`` (with ``kid``), else
    ``./data/heimdall.key``. ``ValueError`` names the setting when none is usable."""
    ring = load_keyring(env, cwd)
    if kid is None and not ring.has_default:
        raise ValueError("no default key is configured: name a kid of the keys file")
    try:
        return ring.key_for(kid)
    except Exception:  # an unknown kid: the keyring's error is the server's InvalidToken
        raise ValueError("the keys file has no such kid") from None
