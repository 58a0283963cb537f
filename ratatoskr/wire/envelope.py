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

from ratatoskr.core.errors import BifrostError, MalformedEnvelope, UnsupportedVersion

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
    numpy view (overlapping by a run and the two characters before it), so a large body is
    never copied whole: a freed multi-megabyte buffer raises glibc's mmap threshold and
    stays in the worker's heap. Vectorised because a byte search for the run degenerates on
    an embedding's digits (~60 µs for a 768-float body)."""
    overlap = _WIDE_DIGITS + 2
    for start in range(0, len(body), _SCAN_STEP):
        lo = max(0, start - overlap)
        part = np.frombuffer(
            body, dtype=np.uint8, count=min(len(body), start + _SCAN_STEP) - lo, offset=lo
        )
        # a run starting in a part's first two bytes lies whole in the part before (the
        # body opens with ``{``, so the first part's runs start at 1 or later)
        if _standalone_run(part, first=2 if lo else 1):
            return True
    return False


def _standalone_run(part: npt.NDArray[np.uint8], first: int) -> bool:
    """Whether a run of ``_WIDE_DIGITS`` digits starts at some ``i >= first`` of ``part``
    as a number of its own: after a character that cannot be part of a number, or after a
    minus sign that is. A float's digits after its point or exponent never count.

    The runs are found without listing every non-digit (an embedding's text is a fifth
    non-digits): the digit mask ANDed with itself shifted by 1, 2, 4, ... marks each
    position that opens 20 digits in a row; only those that follow a non-digit (the run's
    first digit; ~20 per 64 KiB of embeddings, whose fractions often reach 20 digits) are
    looked at."""
    digits = (part - 48) <= 9  # uint8 wraps, so this marks every digit
    windows = _windows(digits, _WIDE_DIGITS)
    if len(windows) <= first:
        return False
    starts = np.flatnonzero(windows[first:] & ~digits[first - 1 : len(windows) - 1]) + first
    if len(starts) == 0:
        return False
    before = part[starts - 1]
    alone = ~_NOT_STANDALONE[before]
    minus = before == ord("-")
    if minus.any():
        earlier = starts - 2
        number_before = _NOT_STANDALONE[part[np.maximum(earlier, 0)]] & (earlier >= 0)
        alone |= minus & ~number_before
    return bool(alone.any())


def _windows(mask: npt.NDArray[np.bool_], length: int) -> npt.NDArray[np.bool_]:
    """``out[i]`` is whether ``mask[i : i + length]`` is all True (``len(mask) - length +
    1`` entries, none when the mask is shorter): ANDs with itself shifted by doubling
    steps, a handful of passes."""
    if len(mask) < length:
        return np.zeros(0, dtype=bool)
    run = 1
    while run * 2 <= length:
        mask = mask[:-run] & mask[run:]
        run *= 2
    if run < length:
        mask = mask[: len(mask) - (length - run)] & mask[length - run :]
    return mask


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
