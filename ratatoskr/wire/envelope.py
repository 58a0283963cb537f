"""The request envelope and the two response bodies of wire v0.6.

Parsing is strict: a caller that sends a key this version does not define gets told, rather
than having it silently ignored (a typo in ``request_id`` would otherwise lose tracing).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from ratatoskr.wire.errors import BifrostError, MalformedEnvelope, UnsupportedVersion

WIRE_VERSION = "0.6"
ENVELOPE_KEYS = frozenset({"wire", "verb", "args", "request_id"})
MAX_REQUEST_ID_CHARS = 128
# orjson reads an integer beyond 64 bits as a float, silently altering it; any such literal
# has at least 20 digits, so only a body holding such a run is parsed a second time. The run
# must stand as a number of its own: a float's fraction often has 20 digits (an embedding
# sent as float32 values printed in full), and the second pass costs ~50 µs per KB. A run
# stands alone when the character before it is none of ``.eE+-`` and no digit, or is a ``-``
# that itself follows such a character; a fraction or an exponent never does. A hit inside
# a string only costs the second pass.
_NOT_STANDALONE = np.zeros(256, dtype=bool)
_NOT_STANDALONE[[ord(c) for c in ".eE+-0123456789"]] = True
_WIDE_DIGITS = 20
_SCAN_STEP = 1 << 16
_INT_RANGE = (-(1 << 63), (1 << 64) - 1)


class _WideInteger(Exception):
    pass


@dataclass(frozen=True)
class Envelope:
    """One parsed request: the verb, its args, and the caller's request id if it sent one."""

    verb: str
    args: dict[str, Any]
    request_id: str | None


def new_request_id() -> str:
    return uuid.uuid4().hex


def is_request_id(value: Any) -> bool:
    """1..128 printable ASCII characters (space through tilde)."""
    return (
        isinstance(value, str)
        and 1 <= len(value) <= MAX_REQUEST_ID_CHARS
        and all(" " <= ch <= "~" for ch in value)
    )


def decode_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; anything else is a malformed envelope."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise MalformedEnvelope("the body is not UTF-8 JSON") from None
    if not isinstance(value, dict):
        raise MalformedEnvelope("the body must be a JSON object")
    if _may_hold_wide_integer(body):
        _refuse_wide_integers(body)
    return value


def _may_hold_wide_integer(body: bytes) -> bool:
    """Whether the body holds a standalone run of 20 digits. Read 64 KiB at a time as a
    numpy view (overlapping by a run's length), so a large body is never copied whole: a
    freed multi-megabyte buffer raises glibc's mmap threshold and stays in the worker's
    heap. Vectorised because a byte search for the run degenerates on an embedding's
    digits (~60 µs for a 768-float body)."""
    overlap = _WIDE_DIGITS + 2
    for start in range(0, len(body), _SCAN_STEP):
        lo = max(0, start - overlap)
        part = np.frombuffer(
            body, dtype=np.uint8, count=min(len(body), start + _SCAN_STEP) - lo, offset=lo
        )
        # uint8 wraps, so this is every non-digit; a run before the first one is the tail
        # of a run the previous part saw whole (and the body is an object: it opens with
        # ``{``, not a digit)
        breaks = np.flatnonzero((part - 48) > 9)
        ends = np.append(breaks, len(part))
        runs = np.flatnonzero(np.diff(ends) > _WIDE_DIGITS)
        for at in ends[runs].tolist():
            if _standalone(part, at):
                return True
    return False


def _standalone(part: npt.NDArray[np.uint8], at: int) -> bool:
    """Whether the run after ``part[at]`` (a non-digit) is a number of its own."""
    if not _NOT_STANDALONE[part[at]]:
        return True
    return bool(part[at] == ord("-") and (at == 0 or not _NOT_STANDALONE[part[at - 1]]))


def _refuse_wide_integers(body: bytes) -> None:
    """Refuse rather than alter an integer that does not fit 64 bits (orjson would make it
    a float)."""

    def parse_int(text: str) -> int:
        value = int(text)
        if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise _WideInteger
        return value

    try:
        json.loads(body, parse_int=parse_int)
    except _WideInteger:
        raise MalformedEnvelope("the body holds an integer beyond 64 bits") from None
    except ValueError:  # orjson accepted it; this second pass only looks for wide integers
        return


def request_id_of(obj: dict[str, Any]) -> str | None:
    """The caller's request id when it is a valid one, so even a refusal can echo it."""
    value = obj.get("request_id")
    return value if is_request_id(value) else None


def parse_envelope(body: bytes) -> Envelope:
    obj = decode_object(body)
    return envelope_from(obj)


def envelope_from(obj: dict[str, Any]) -> Envelope:
    unknown = set(obj) - ENVELOPE_KEYS
    if unknown:
        raise MalformedEnvelope(
            f"the envelope holds {len(unknown)} unknown top-level key(s); "
            f"allowed: {', '.join(sorted(ENVELOPE_KEYS))}"
        )
    if "wire" not in obj or not isinstance(obj["wire"], str):
        raise MalformedEnvelope("wire must be the string " + WIRE_VERSION)
    if obj["wire"] != WIRE_VERSION:
        raise UnsupportedVersion(f"this server speaks wire {WIRE_VERSION} only")
    verb = obj.get("verb")
    if not isinstance(verb, str) or not verb:
        raise MalformedEnvelope("verb must be a non-empty string")
    args = obj.get("args")
    if not isinstance(args, dict):
        raise MalformedEnvelope("args must be an object")
    request_id = obj.get("request_id")
    if request_id is not None and not is_request_id(request_id):
        raise MalformedEnvelope(
            f"request_id must be 1..{MAX_REQUEST_ID_CHARS} printable ASCII characters"
        )
    return Envelope(verb, args, request_id)


def success_body(result: Any, request_id: str) -> bytes:
    return orjson.dumps(
        {"ok": True, "result": result, "request_id": request_id},
        option=orjson.OPT_SERIALIZE_NUMPY,
    )


def error_body(error: BifrostError, plane: str | None, request_id: str) -> bytes:
    body: dict[str, Any] = {
        "code": error.wire_code(plane),
        "message": error.message,
        "retryable": error.retryable,
    }
    if error.details is not None:
        body["details"] = error.details
    return orjson.dumps({"ok": False, "error": body, "request_id": request_id})
