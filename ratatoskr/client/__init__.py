"""A Python client of the Bifrost wire: ``Client`` (blocking) and ``AsyncClient``.

    from ratatoskr.client import Client

    with Client.from_env(scope={"tenant": "acme"}) as client:
        client.memory.upsert_many([{"id": "c1", "embedding": vector, "scope": {"tenant": "acme"},
                                    "distillate": "..."}], idempotency_key="turn-1")
        hits = client.memory.search(vector, top_k=5)

Every wire error is raised as its own class (``InvalidArguments``, ``RevisionMismatch``,
``Unavailable``, ...), all under ``RatatoskrError``. See docs/client.md.
"""

from ratatoskr.client.aio import AsyncClient
from ratatoskr.client.errors import (
    BindingMismatch,
    ClientClosed,
    EventConflict,
    IdempotencyConflict,
    InternalError,
    InvalidArguments,
    InvalidFilter,
    InvalidToken,
    MalformedEnvelope,
    MethodNotAllowed,
    MissingToken,
    NonFiniteNumber,
    PayloadTooLarge,
    PlaneError,
    RatatoskrError,
    RequestTimeout,
    RevisionMismatch,
    ScopeForbidden,
    TokenReplayed,
    TransportFailed,
    Unavailable,
    UnexpectedAnswer,
    UnknownPlane,
    UnknownRoute,
    UnknownVerb,
    Unsupported,
    UnsupportedMediaType,
    UnsupportedVersion,
    VerbNotListed,
)
from ratatoskr.client.http11 import MayHaveRun
from ratatoskr.client.sync import Client
from ratatoskr.client.tokens import KeyMinter, TokenProvider
from ratatoskr.client.transport import Answer, Retry

__all__ = [
    "Answer",
    "AsyncClient",
    "BindingMismatch",
    "Client",
    "ClientClosed",
    "EventConflict",
    "IdempotencyConflict",
    "InternalError",
    "InvalidArguments",
    "InvalidFilter",
    "InvalidToken",
    "KeyMinter",
    "MalformedEnvelope",
    "MayHaveRun",
    "MethodNotAllowed",
    "MissingToken",
    "NonFiniteNumber",
    "PayloadTooLarge",
    "PlaneError",
    "RatatoskrError",
    "RequestTimeout",
    "Retry",
    "RevisionMismatch",
    "ScopeForbidden",
    "TokenProvider",
    "TokenReplayed",
    "TransportFailed",
    "Unavailable",
    "UnexpectedAnswer",
    "UnknownPlane",
    "UnknownRoute",
    "UnknownVerb",
    "Unsupported",
    "UnsupportedMediaType",
    "UnsupportedVersion",
    "VerbNotListed",
]
