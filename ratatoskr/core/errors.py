"""Typed errors of the Bifrost wire and their HTTP mapping.

Stores raise the plane errors (``InvalidArguments`` ...) without knowing their plane; the
plane framework qualifies the code (``memory.invalid_arguments``). Messages name fields and
ids, never values: they are sent to callers and written to logs.
"""

from __future__ import annotations

from typing import Any, ClassVar


class BifrostError(Exception):
    """Base of every error the wire answers with a JSON error body."""

    code: ClassVar[str] = "internal"
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def wire_code(self, plane: str | None = None) -> str:
        return self.code


class PlaneError(BifrostError):
    """An error a plane's store raises; its wire code is ``<plane>.<code>``."""

    def wire_code(self, plane: str | None = None) -> str:
        return f"{plane}.{self.code}" if plane else self.code


class InvalidArguments(PlaneError):
    code = "invalid_arguments"
    http_status = 400


class InvalidFilter(PlaneError):
    code = "invalid_filter"
    http_status = 400


class IdempotencyConflict(PlaneError):
    code = "idempotency_conflict"
    http_status = 409


class RevisionMismatch(PlaneError):
    code = "revision_mismatch"
    http_status = 409

    def __init__(self, mismatches: list[dict[str, Any]]) -> None:
        ids = ", ".join(str(m["id"]) for m in mismatches[:10])
        super().__init__(
            f"expected_revisions is stale for {len(mismatches)} record(s): {ids}",
            details={"mismatches": mismatches},
        )
        self.mismatches = mismatches


class EventConflict(PlaneError):
    code = "event_conflict"
    http_status = 409


class UnknownVerb(PlaneError):
    code = "unknown_verb"
    http_status = 404


class Unsupported(PlaneError):
    code = "unsupported"
    http_status = 501


class Unavailable(PlaneError):
    code = "unavailable"
    http_status = 503
    retryable = True


class ScopeForbidden(BifrostError):
    code = "scope.forbidden"
    http_status = 403


class PayloadTooLarge(BifrostError):
    code = "wire.payload_too_large"
    http_status = 413


class RequestTimeout(BifrostError):
    """The body did not arrive in time; the connection is closed after this answer."""

    code = "wire.request_timeout"
    http_status = 408
    retryable = True


class UnsupportedMediaType(BifrostError):
    code = "wire.unsupported_media_type"
    http_status = 415


class MalformedEnvelope(BifrostError):
    code = "wire.malformed_envelope"
    http_status = 400


class UnsupportedVersion(BifrostError):
    code = "wire.unsupported_version"
    http_status = 400


class UnknownPlane(BifrostError):
    code = "wire.unknown_plane"
    http_status = 404


class UnknownRoute(BifrostError):
    """A path under ``/bifrost/`` the wire does not define."""

    code = "wire.unknown_route"
    http_status = 404


class MethodNotAllowed(BifrostError):
    """A wire route called with a method other than POST; the answer carries ``Allow``."""

    code = "wire.method_not_allowed"
    http_status = 405


class MissingToken(BifrostError):
    code = "auth.missing_token"
    http_status = 401


class InvalidToken(BifrostError):
    code = "auth.invalid_token"
    http_status = 401


class BindingMismatch(BifrostError):
    code = "auth.binding_mismatch"
    http_status = 401


class TokenReplayed(BifrostError):
    code = "auth.token_replayed"
    http_status = 401


class InternalError(BifrostError):
    code = "internal"
    http_status = 500
