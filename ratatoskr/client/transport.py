"""What the sync and the async client share around one HTTP exchange: the route, a fresh
token per attempt, the answer read into a result or an exception, the retry policy, and
the handshake's list of verbs that gates every call.

A call is retried only when the server says its error is ``retryable`` (``<plane>.unavailable``
503: a lock held past the busy timeout, a full disk; ``wire.request_timeout``), after a
backoff with full jitter, with a new token (a mutating verb's token may be used once) and
the same body, so the same idempotency key: the store answers a retry of a write that did
land as a replay. Nothing else is retried, transport failures included.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ratatoskr.client.encoding import envelope
from ratatoskr.client.errors import (
    RatatoskrError,
    UnexpectedAnswer,
    VerbNotListed,
    from_answer,
)
from ratatoskr.client.tokens import TokenProvider

logger = logging.getLogger("ratatoskr.client")

HANDSHAKE = "handshake"
HANDSHAKE_PLANE = "*"
MEMORY_PLANE = "memory"  # refuses a non-number in a vector itself (``envelope``)
HANDSHAKE_PATH = "/bifrost/handshake"
JSON = "application/json"


@dataclass(frozen=True)
class Retry:
    """How often and how patiently a retryable error is retried: ``attempts`` retries after
    the first try (0: none), retry n (from 0) after a random delay in ``[0, min(max_delay,
    base_delay * 2**n)]`` seconds."""

    attempts: int = 3
    base_delay: float = 0.05
    max_delay: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 0 or self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("attempts and delays must not be negative")

    def delay(self, retry: int, rng: random.Random) -> float:
        return rng.uniform(0, min(self.max_delay, self.base_delay * 2**retry))


@dataclass(frozen=True)
class Answer:
    """A successful call: the verb's result and the request id the server answered with."""

    result: Any
    request_id: str


@dataclass(frozen=True)
class Prepared:
    """One call ready to send: its route, the token's plane and verb, and the body."""

    path: str
    plane: str
    verb: str
    body: bytes


@dataclass
class Catalog:
    """The verbs each plane lists in the handshake; a call outside them is never sent."""

    handshake: dict[str, Any]
    verbs: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, handshake: Any) -> Catalog:
        planes = handshake.get("planes") if isinstance(handshake, dict) else None
        if not isinstance(planes, dict):
            raise UnexpectedAnswer(200)
        verbs = {
            name: frozenset(v for v in entry.get("verbs", []) if isinstance(v, str))
            for name, entry in planes.items()
            if isinstance(entry, dict)
        }
        return cls(handshake, verbs)

    def require(self, plane: str, verb: str) -> None:
        if verb not in self.verbs.get(plane, frozenset()):
            raise VerbNotListed(plane, verb)


def prepare(
    plane: str, verb: str, args: Mapping[str, Any] | None, request_id: str | None
) -> Prepared:
    """The route and body of a call; ``*`` (or the verb ``handshake``) is the handshake."""
    if not isinstance(args, Mapping | None):
        raise TypeError("args must be a mapping")
    body = envelope(
        verb, {} if args is None else args, request_id, vectors_checked=plane == MEMORY_PLANE
    )
    if plane == HANDSHAKE_PLANE:
        return Prepared(HANDSHAKE_PATH, HANDSHAKE_PLANE, verb, body)
    return Prepared(f"/bifrost/{plane}-call", plane, verb, body)


def headers(prepared: Prepared, tokens: TokenProvider) -> dict[str, str]:
    """The headers of one attempt, with a token minted for it (none when the provider has
    none to give: the server answers ``auth.missing_token``)."""
    token = tokens(prepared.plane, prepared.verb, prepared.body)
    if not token:
        return {"Content-Type": JSON}
    return {"Authorization": f"Bearer {token}", "Content-Type": JSON}


def read_answer(status: int, content: bytes) -> Answer:
    """The result of a success, else the error answered, raised as its class."""
    try:
        answer = orjson.loads(content)
    except orjson.JSONDecodeError:
        raise UnexpectedAnswer(status) from None
    if not isinstance(answer, dict):
        raise UnexpectedAnswer(status)
    request_id = answer.get("request_id")
    request_id = request_id if isinstance(request_id, str) else ""
    if answer.get("ok") is True and status == 200 and "result" in answer:
        return Answer(answer["result"], request_id)
    error = answer.get("error")
    if answer.get("ok") is not False or not isinstance(error, dict):
        raise UnexpectedAnswer(status)
    raise from_answer(error, status, request_id)


def retry_delay(
    error: RatatoskrError, retry: int, policy: Retry, rng: random.Random, prepared: Prepared
) -> float | None:
    """The pause before retry number ``retry`` (0-based) of ``error``, or ``None``: not
    retryable, or the attempts are spent."""
    if not error.retryable or retry >= policy.attempts:
        return None
    delay = policy.delay(retry, rng)
    logger.warning(
        "ratatoskr client retry plane=%s verb=%s code=%s retry=%d delay_ms=%.0f request_id=%s",
        prepared.plane,
        prepared.verb,
        error.code,
        retry + 1,
        delay * 1000,
        error.request_id,
    )
    return delay
