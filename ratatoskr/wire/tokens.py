"""Per-dispatch tokens: Heimdall's HS256 JWT, verified and bound to one request.

A token authorises exactly one call: one plane, one verb, one body (by its SHA-256), one
region of the store (its scope), for a short while. PyJWT checks the signature and the
registered claims; the wire's own claims are checked here. Every failure is
``auth.invalid_token`` with a message that names the claim, never the token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt
import orjson

from ratatoskr.core.errors import BifrostError, BindingMismatch, InvalidToken
from ratatoskr.core.scope import Scope, validate_scope
from ratatoskr.wire.keys import Keyring, keyring_from_env, load_keyring

__all__ = [
    "ALGORITHM",
    "BodyDigest",
    "Keyring",
    "TokenVerifier",
    "VerifiedToken",
    "body_digest",
    "keyring_from_env",
    "load_keyring",
    "mint_token",
]

ALGORITHM = "HS256"
DEFAULT_ISSUER = "heimdall"
DEFAULT_CONSUMER = "ratatoskr"
DEFAULT_MAX_LIFETIME = 300
DEFAULT_LEEWAY = 10
MAX_SUB_CHARS = 256
MAX_JTI_CHARS = 128
REQUIRED_CLAIMS = (
    "iss",
    "aud",
    "sub",
    "iat",
    "exp",
    "jti",
    "plane",
    "verb",
    "scope",
    "body_sha256",
)
ALLOW_UNSCOPED_ENV = "RATATOSKR_ALLOW_UNSCOPED_TOKENS"

_PYJWT_REASONS: tuple[tuple[type[Exception], str], ...] = (
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not yet valid"),
    (jwt.InvalidAudienceError, "the token's aud does not name this consumer"),
    (jwt.InvalidIssuerError, "the token's iss is not the configured issuer"),
    (jwt.MissingRequiredClaimError, "the token lacks a required claim"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
    (jwt.InvalidAlgorithmError, f"the token is not signed with {ALGORITHM}"),
    (jwt.InvalidIssuedAtError, "the token's iat is malformed"),
)


def _split(token: str) -> tuple[dict[str, Any], bytes, bytes]:
    """The header, the signing input and the signature of a compact JWS, read leniently:
    only to pick the key and pre-check the signature. PyJWT's decode is the strict parse."""
    parts = token.encode("ascii", "replace").split(b".")
    if len(parts) != 3:
        raise InvalidToken("the token is malformed")
    try:
        header = orjson.loads(_b64decode(parts[0]))
        signature = _b64decode(parts[2])
    except (ValueError, binascii.Error):
        raise InvalidToken("the token is malformed") from None
    if not isinstance(header, dict):
        raise InvalidToken("the token is malformed")
    return header, parts[0] + b"." + parts[1], signature


def _b64decode(segment: bytes) -> bytes:
    return base64.urlsafe_b64decode(segment + b"=" * (-len(segment) % 4))


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class BodyDigest:
    """``body_digest(body)``, computed on a thread of its own when the body is large, so
    the wire decodes the body meanwhile on the other core (hashlib releases the GIL while
    it hashes: ~4 ms for a 7.6 MB upsert). A small body is hashed at once: a thread costs
    more (~50-100 µs to start) than the hash it would take over."""

    THREAD_MIN_BYTES = 256 * 1024

    def __init__(self, body: bytes) -> None:
        self._hash = hashlib.sha256()
        self._thread: threading.Thread | None = None
        if len(body) < self.THREAD_MIN_BYTES:
            self._hash.update(body)
        else:
            self._thread = threading.Thread(
                target=self._hash.update, args=(body,), name="ratatoskr-body-hash", daemon=True
            )
            self._thread.start()

    def hexdigest(self) -> str:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self._hash.hexdigest()


@dataclass(frozen=True)
class VerifiedToken:
    """The claims of a token that verified; ``expires_at`` includes the leeway."""

    actor: str
    scope: Scope
    plane: str
    verb: str
    jti: str
    body_sha256: str
    expires_at: float


def _number(claims: Mapping[str, Any], name: str) -> float:
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"the token's {name} must be a number")
    if not math.isfinite(value):  # NaN compares false with every bound: never expires
        raise InvalidToken(f"the token's {name} must be a finite number")
    return float(value)


def _string(claims: Mapping[str, Any], name: str, max_chars: int) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not 1 <= len(value) <= max_chars:
        raise InvalidToken(f"the token's {name} must be a string of 1..{max_chars} characters")
    return value


class TokenVerifier:
    """Verifies Heimdall tokens for one consumer id."""

    def __init__(
        self,
        keyring: Keyring,
        *,
        issuer: str = DEFAULT_ISSUER,
        audience: str = DEFAULT_CONSUMER,
        max_lifetime: int = DEFAULT_MAX_LIFETIME,
        leeway: int = DEFAULT_LEEWAY,
        allow_unscoped: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(keyring, Keyring):
            raise TypeError("keyring must be a Keyring")
        self.keyring = keyring
        self.issuer = issuer
        self.audience = audience
        self.max_lifetime = max_lifetime
        self.leeway = leeway
        self.allow_unscoped = allow_unscoped
        self.clock = clock

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, audience: str = DEFAULT_CONSUMER
    ) -> TokenVerifier:
        env = os.environ if env is None else env
        allow = env.get(ALLOW_UNSCOPED_ENV, "").strip().lower() in ("1", "true", "yes")
        return cls(load_keyring(env), audience=audience, allow_unscoped=allow)

    def verify(self, token: str) -> VerifiedToken:
        """Signature, registered claims, then the wire's claims; ``InvalidToken`` otherwise."""
        try:
            return self._verify(token)
        except BifrostError:
            raise
        except jwt.PyJWTError as exc:
            raise InvalidToken(_reason(exc)) from None
        except Exception:  # a malformed token must never become a 500
            raise InvalidToken("the token is malformed") from None

    def _verify(self, token: str) -> VerifiedToken:
        header, signing_input, signature = _split(token)
        if header.get("alg") != ALGORITHM:
            raise InvalidToken(f"the token is not signed with {ALGORITHM}")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the token's kid header must be a string")
        key = self.keyring.key_for(kid)
        # A forged or garbled token is refused here for the price of one HMAC; PyJWT (whose
        # parse checks the alphabet character by character, ~100 µs a token) then decodes
        # and checks what a correctly signed token claims.
        expected = hmac.new(key, signing_input, hashlib.sha256).digest()
        if not hmac.compare_digest(expected, signature):
            raise InvalidToken("the token's signature does not verify")
        now = self.clock()
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            audience=self.audience,
            issuer=self.issuer,
            leeway=self.leeway,
            options={
                "require": list(REQUIRED_CLAIMS),
                "verify_signature": True,
                # the times are checked by ``_check_times`` against this verifier's clock
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "verify_aud": True,
                "verify_iss": True,
                "strict_aud": False,
            },
        )
        self._check_times(claims, now)
        scope = self._scope(claims.get("scope"))
        digest = claims.get("body_sha256")
        if not isinstance(digest, str) or len(digest) != 64:
            raise InvalidToken("the token's body_sha256 must be 64 lowercase hex characters")
        if any(c not in "0123456789abcdef" for c in digest):
            raise InvalidToken("the token's body_sha256 must be 64 lowercase hex characters")
        return VerifiedToken(
            actor=_string(claims, "sub", MAX_SUB_CHARS),
            scope=scope,
            plane=_string(claims, "plane", 64),
            verb=_string(claims, "verb", 128),
            jti=_string(claims, "jti", MAX_JTI_CHARS),
            body_sha256=digest,
            expires_at=_number(claims, "exp") + self.leeway,
        )

    def _check_times(self, claims: Mapping[str, Any], now: float) -> None:
        iat = _number(claims, "iat")
        exp = _number(claims, "exp")
        if exp <= iat:
            raise InvalidToken("the token's exp is not after its iat")
        if exp - iat > self.max_lifetime:
            raise InvalidToken(f"the token's lifetime exceeds {self.max_lifetime} seconds")
        if exp + self.leeway <= now:
            raise InvalidToken("the token has expired")
        if iat - self.leeway > now:
            raise InvalidToken("the token is not yet valid")
        if "nbf" in claims and _number(claims, "nbf") - self.leeway > now:
            raise InvalidToken("the token is not yet valid")

    def _scope(self, value: Any) -> Scope:
        if not isinstance(value, dict):
            raise InvalidToken("the token's scope must be an object")
        try:
            scope = validate_scope(value, "scope")
        except BifrostError:
            raise InvalidToken("the token's scope is not a scope over the lattice") from None
        if not scope and not self.allow_unscoped:
            raise InvalidToken("the token is unscoped and this server refuses unscoped tokens")
        return scope

    @staticmethod
    def check_body(token: VerifiedToken, body: bytes) -> None:
        """The token must have been minted for exactly these bytes."""
        TokenVerifier.check_digest(token, body_digest(body))

    @staticmethod
    def check_digest(token: VerifiedToken, hexdigest: str) -> None:
        """``check_body`` given the body's ``body_digest``."""
        if not hmac.compare_digest(token.body_sha256, hexdigest):
            raise BindingMismatch("the token's body_sha256 does not match the request body")


def _reason(exc: Exception) -> str:
    for kind, reason in _PYJWT_REASONS:
        if isinstance(exc, kind):
            return reason
    return "the token is malformed"


def mint_token(
    key: bytes,
    *,
    plane: str,
    verb: str,
    scope: Mapping[str, str],
    sub: str,
    body: bytes,
    kid: str | None = None,
    issuer: str = DEFAULT_ISSUER,
    audience: str | list[str] = DEFAULT_CONSUMER,
    lifetime: int = 60,
    now: float | None = None,
    jti: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Mint a token the way Heimdall does, for the developer CLI and the tests."""
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "iss": issuer,
        "aud": audience,
        "sub": sub,
        "iat": issued,
        "exp": issued + lifetime,
        "jti": jti or uuid.uuid4().hex,
        "plane": plane,
        "verb": verb,
        "scope": dict(scope),
        "body_sha256": body_digest(body),
        **(extra or {}),
    }
    headers = {"kid": kid} if kid is not None else None
    return jwt.encode(claims, key, algorithm=ALGORITHM, headers=headers)
