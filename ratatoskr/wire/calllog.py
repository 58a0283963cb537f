"""One log line per call: who, what, how it ended, how long, how many. Never args or records.

The line is built from an allow-list of fields, so nothing the caller sent can reach the log
except the request id (printable ASCII, the tracing handle), the verb when the plane knows it,
and lengths. Tracebacks of unexpected errors are logged as frames and the exception type only:
an exception's message may quote a value.
"""

from __future__ import annotations

import contextvars
import logging
import traceback
from dataclasses import dataclass, field

logger = logging.getLogger("ratatoskr.wire")
# the request id of the call whose answer is being sent: the server's access line, logged
# by uvicorn as the answer goes out (in the call's own context), carries it too
ANSWERING = contextvars.ContextVar[str | None]("ratatoskr_answering_request_id", default=None)


@dataclass
class CallRecord:
    """What the log line of one call says; filled in as the call goes through its checks."""

    request_id: str
    plane: str
    verb: str = "-"
    actor: str = "-"
    outcome: str = "ok"
    status: int = 200
    counts: dict[str, int] = field(default_factory=dict)
    replayed: bool = False  # the store answered from its idempotency cache


def log_call(record: CallRecord, duration_ms: float) -> None:
    counts = " ".join(f"{k}={v}" for k, v in sorted(record.counts.items()))
    logger.info(
        "bifrost call request_id=%s plane=%s verb=%s actor=%s outcome=%s status=%d "
        "duration_ms=%.2f%s",
        record.request_id,
        record.plane,
        record.verb,
        record.actor,
        record.outcome,
        record.status,
        duration_ms,
        f" {counts}" if counts else "",
        extra={
            "bifrost": {
                "request_id": record.request_id,
                "plane": record.plane,
                "verb": record.verb,
                "actor": record.actor,
                "outcome": record.outcome,
                "status": record.status,
                "duration_ms": round(duration_ms, 3),
                **record.counts,
            }
        },
    )


def log_observer_error(exc: BaseException) -> None:
    """An observer (metrics) failed; the call's answer stands, the type is logged."""
    logger.error("bifrost observer error type=%s", type(exc).__qualname__)


def log_internal_error(request_id: str, exc: BaseException) -> None:
    """The traceback of an unexpected error, redacted to frame locations and the type name."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = " <- ".join(f"{f.filename}:{f.lineno}:{f.name}" for f in reversed(frames[-12:]))
    logger.error(
        "bifrost internal error request_id=%s type=%s at %s",
        request_id,
        type(exc).__qualname__,
        where or "-",
        # its own field, as on the call's other lines: a search by request id finds it
        extra={"fields": {"request_id": request_id, "error": type(exc).__qualname__}},
    )
