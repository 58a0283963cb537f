"""The client's exceptions: one class per wire error code, under ``RatatoskrError``.

Each carries what the server answered: ``code`` (``memory.invalid_arguments``), ``message``
(names fields and ids, never values: the server's rule), ``retryable``, ``details`` and the
HTTP ``status``, with the call's ``request_id``. A plane error's class is the same for both
planes (``InvalidArguments``); its ``plane`` says which. The codes are the server's own
(``ratatoskr.core.errors``), so the two cannot drift apart.

Three classes are the client's own, for what never got a wire answer: ``VerbNotListed``
(refused before sending: the handshake does not list the verb), ``TransportFailed`` (no
answer: the connection failed or timed out) and ``UnexpectedAnswer`` (an answer that is not
the wire's, e.g. a proxy's error page). Their messages name the verb or the error's type,
never anything sent.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import urlsplit

from ratatoskr.core import errors as wire


class RatatoskrError(Exception):
    """Base of every exception the client raises."""

    wire_code: ClassVar[str | None] = None  # the code (or a plane code's suffix) it stands for
    plane_error: ClassVar[bool] = False

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
        status: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details
        self.status = status
        self.request_id = request_id

    @property
    def plane(self) -> str | None:
        """``memory`` or ``affect`` for a plane error, else ``None``."""
        head, dot, _ = self.code.partition(".")
        return head if self.plane_error and dot else None


class PlaneError(RatatoskrError):
    """A plane's error (``<plane>.<code>``)."""

    plane_error = True


class InvalidArguments(PlaneError):
    wire_code = wire.InvalidArguments.code


class InvalidFilter(PlaneError):
    wire_code = wire.InvalidFilter.code


class IdempotencyConflict(PlaneError):
    wire_code = wire.IdempotencyConflict.code


class RevisionMismatch(PlaneError):
    """``expected_revisions`` was stale: ``mismatches`` lists ``{id, expected, actual}``."""

    wire_code = wire.RevisionMismatch.code

    @property
    def mismatches(self) -> list[dict[str, Any]]:
        found = (self.details or {}).get("mismatches")
        return list(found) if isinstance(found, list) else []


class EventConflict(PlaneError):
    wire_code = wire.EventConflict.code


class UnknownVerb(PlaneError):
    wire_code = wire.UnknownVerb.code


class Unsupported(PlaneError):
    wire_code = wire.Unsupported.code


class Unavailable(PlaneError):
    """The store cannot serve now (a held lock, a full disk): retryable."""

    wire_code = wire.Unavailable.code


class ScopeForbidden(RatatoskrError):
    wire_code = wire.ScopeForbidden.code


class PayloadTooLarge(RatatoskrError):
    wire_code = wire.PayloadTooLarge.code


class RequestTimeout(RatatoskrError):
    wire_code = wire.RequestTimeout.code


class UnsupportedMediaType(RatatoskrError):
    wire_code = wire.UnsupportedMediaType.code


class MalformedEnvelope(RatatoskrError):
    wire_code = wire.MalformedEnvelope.code


class UnsupportedVersion(RatatoskrError):
    wire_code = wire.UnsupportedVersion.code


class UnknownPlane(RatatoskrError):
    wire_code = wire.UnknownPlane.code


class UnknownRoute(RatatoskrError):
    wire_code = wire.UnknownRoute.code


class MethodNotAllowed(RatatoskrError):
    wire_code = wire.MethodNotAllowed.code


class MissingToken(RatatoskrError):
    wire_code = wire.MissingToken.code


class InvalidToken(RatatoskrError):
    wire_code = wire.InvalidToken.code


class BindingMismatch(RatatoskrError):
    wire_code = wire.BindingMismatch.code


class TokenReplayed(RatatoskrError):
    wire_code = wire.TokenReplayed.code


class InternalError(RatatoskrError):
    wire_code = wire.InternalError.code


class NonFiniteNumber(RatatoskrError, ValueError):
    """A NaN or an infinity in a call's arguments: JSON cannot carry it, and orjson would
    have written ``null`` in its place. Nothing was sent; the message says where."""

    def __init__(self, where: str) -> None:
        super().__init__(
            "client.non_finite_number",
            f"{where} is not a finite number: JSON cannot carry it; nothing was sent",
        )


class ClientClosed(RatatoskrError, RuntimeError):
    """A call on a client after ``close()`` (or ``aclose()``, or the end of its ``with``
    block), or on one whose ``http`` client was closed: nothing was sent."""

    def __init__(self) -> None:
        super().__init__("client.closed", "the client is closed; nothing was sent")


class VerbNotListed(RatatoskrError):
    """The server's handshake does not list this verb (or plane): nothing was sent."""

    def __init__(self, plane: str, verb: str) -> None:
        super().__init__(
            "client.verb_not_listed",
            f"the server's handshake does not list {plane}.{verb}; nothing was sent",
        )


class TransportFailed(RatatoskrError):
    """No answer: the connection failed or timed out (the cause is chained). ``sent``: the
    request may have reached the server, so the call may have run (the same call again,
    with the same idempotency key, says whether it did); ``False`` when it cannot have
    (the connection was refused, or not made in time)."""

    def __init__(self, what: str, url: str, *, sent: bool = True) -> None:
        after = "; the request was sent, so the call may have run" if sent else ""
        super().__init__(
            "client.transport_failed", f"{what}: no answer from {shown_url(url)}{after}"
        )
        self.sent = sent


def shown_url(url: str) -> str:
    """``url`` as a message may show it: scheme, host and port; a user, a password, a path
    and a query (which may hold a token) are left out."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def masked_url(url: str) -> str:
    """``url`` as a ``repr`` may show it (tracebacks, debug logs): its password masked and
    its query and fragment (which may hold a token) left out."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        name, colon, _ = user.partition(":")
        netloc = f"{name}{':***' if colon else ''}@{host}"
    return f"{parts.scheme}://{netloc}{parts.path}"


class UnexpectedAnswer(RatatoskrError):
    """An answer that is not a wire answer (not JSON, or not its shape)."""

    def __init__(self, status: int) -> None:
        super().__init__(
            "client.unexpected_answer", f"HTTP {status} without a wire answer", status=status
        )


WIRE_ERRORS: tuple[type[RatatoskrError], ...] = (
    InvalidArguments,
    InvalidFilter,
    IdempotencyConflict,
    RevisionMismatch,
    EventConflict,
    UnknownVerb,
    Unsupported,
    Unavailable,
    ScopeForbidden,
    PayloadTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
    MalformedEnvelope,
    UnsupportedVersion,
    UnknownPlane,
    UnknownRoute,
    MethodNotAllowed,
    MissingToken,
    InvalidToken,
    BindingMismatch,
    TokenReplayed,
    InternalError,
)
_WHOLE = {cls.wire_code: cls for cls in WIRE_ERRORS if not cls.plane_error}
_PLANE = {cls.wire_code: cls for cls in WIRE_ERRORS if cls.plane_error}


def error_class(code: str) -> type[RatatoskrError]:
    """The class of a wire code; ``RatatoskrError`` itself for a code this client does not
    know (a newer server's)."""
    found = _WHOLE.get(code)
    if found is not None:
        return found
    _, dot, suffix = code.partition(".")
    return _PLANE.get(suffix, RatatoskrError) if dot else RatatoskrError


def from_answer(error: dict[str, Any], status: int, request_id: str | None) -> RatatoskrError:
    """The exception for an error answer's ``error`` object."""
    code = error.get("code")
    code = code if isinstance(code, str) else "internal"
    message = error.get("message")
    details = error.get("details")
    return error_class(code)(
        code,
        message if isinstance(message, str) else "",
        retryable=error.get("retryable") is True,
        details=details if isinstance(details, dict) else None,
        status=status,
        request_id=request_id,
    )
