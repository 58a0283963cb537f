"""The request envelope and the two response bodies of wire v0.6.

Parsing is strict: a caller that sends a key this version does not define gets told, rather
than having it silently ignored (a typo in ``request_id`` would otherwise lose tracing).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from ratatoskr.core.errors import BifrostError, MalformedEnvelope, UnsupportedVersion

WIRE_VERSION = "0.6"
ENVELOPE_KEYS = frozenset({"wire", "verb", "args", "request_id"})
MAX_REQUEST_ID_CHARS = 128
# orjson reads an integer outside [-2**63, 2**64 - 1] as a float, silently altering it. Such
# a literal has at least 20 digits, or 19 after a minus sign, so only a body holding such a
# run is checked exactly. The run must stand as a number of its own: a float's fraction
# often has 20 digits (an embedding sent as float32 values printed in full). A run stands
# alone when the character before it is none of ``.eE+-`` and no digit, or is a ``-`` that
# itself follows such a character (a sign); a fraction or an exponent never does. A hit
# inside a string only costs the exact check, which skips strings.
_NOT_STANDALONE = np.zeros(256, dtype=bool)
_NOT_STANDALONE[[ord(c) for c in ".eE+-0123456789"]] = True
_WIDE_DIGITS = 20  # the fewest digits of an integer beyond 2**64 - 1
_NEGATIVE_WIDE_DIGITS = 19  # the fewest after a sign of one below -2**63
_SCAN_STEP = 1 << 16
_INT_MAX = (1 << 64) - 1
_NEGATIVE_INT_MAX = 1 << 63  # the largest magnitude after a minus sign
# a JSON string (the body is valid JSON when it is looked for): its opening quote is the
# pattern's literal prefix, so the regex engine skips to the next quote at memchr speed
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_DIGIT_RUN = re.compile(rb"[0-9]+")
# orjson's limit on nested arrays and objects (the envelope's own object counts as one)
MAX_JSON_DEPTH = 1024

NOT_JSON = "the body is not UTF-8 JSON"
WIDE_INTEGER = "the body holds an integer beyond 64 bits"
BEYOND_FLOAT64 = "the body holds a number beyond the range of a 64-bit float"
TOO_DEEP = f"the body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels"
LONE_SURROGATE = (
    "the body holds a lone surrogate escape (\\ud800..\\udfff without its pair), "
    "which UTF-8 cannot carry"
)


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
    """The body as a JSON object; anything else is a malformed envelope, with a message
    naming which limit valid JSON ran into (never quoting the body)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise MalformedEnvelope(_why_refused(body, error)) from None
    if not isinstance(value, dict):
        raise MalformedEnvelope("the body must be a JSON object")
    if _holds_wide_integer(body):
        raise MalformedEnvelope(WIDE_INTEGER)
    return value


def _why_refused(body: bytes, error: orjson.JSONDecodeError) -> str:
    """Why orjson refused the body: JSON it cannot read faithfully (a number beyond
    float64, nesting past its depth limit, a lone surrogate escape) or not JSON at all.
    Told apart by orjson's own message; an unknown one is "not UTF-8 JSON", as before."""
    reason = error.msg
    if "infinity" in reason:
        # an integer literal of 309 digits or more is beyond float64 too: name it as the
        # integer it is when it is the culprit
        return WIDE_INTEGER if _holds_wide_integer(body) else BEYOND_FLOAT64
    if "depth limit" in reason:
        return TOO_DEEP
    if "surrogate in string" in reason:  # not "str is not valid UTF-8: surrogates ..."
        return LONE_SURROGATE
    return NOT_JSON


def _holds_wide_integer(body: bytes) -> bool:
    """Whether the body (valid JSON) holds an integer literal outside [-2**63, 2**64 - 1]:
    the scan's candidate runs, each outside every string and not the start of a float,
    read exactly. Strings are only looked for once there is a candidate."""
    strings: Iterator[re.Match[bytes]] | None = None
    string_start = string_end = -1
    for at in _wide_integer_candidates(body):
        if strings is None:
            strings = _STRING.finditer(body)
        while string_end <= at:
            found = next(strings, None)
            if found is None:
                string_start = string_end = len(body) + 1
                break
            string_start, string_end = found.span()
        if string_start <= at < string_end:
            continue
        run = _DIGIT_RUN.match(body, at)
        if run is None:  # the scan only yields the start of a digit run
            continue
        stop = run.end()
        if body[stop : stop + 1] in (b".", b"e", b"E"):
            continue  # a float's integer part: orjson reads it as the float it is
        negative = body[at - 1 : at] == b"-"
        limit = _NEGATIVE_INT_MAX if negative else _INT_MAX
        digits = stop - at
        # the digit count first: int() of 4,300 digits or more raises
        if digits > len(str(limit)) or int(run.group()) > limit:
            return True
    return False


def _wide_integer_candidates(body: bytes) -> Iterator[int]:
    """The positions, ascending, of the standalone digit runs that
    may be integers beyond 64 bits: 20 digits or more, or 19 or more after a sign. Read
    64 KiB at a time as a numpy view (overlapping by a run and the two characters before
    it), so a large body is never copied whole: a freed multi-megabyte buffer raises
    glibc's mmap threshold and stays in the worker's heap. Vectorised because a byte search
    for the run degenerates on an embedding's digits (~60 µs for a 768-float body)."""
    overlap = _WIDE_DIGITS + 2
    last = 0
    for start in range(0, len(body), _SCAN_STEP):
        lo = max(0, start - overlap)
        part = np.frombuffer(
            body, dtype=np.uint8, count=min(len(body), start + _SCAN_STEP) - lo, offset=lo
        )
        # a run starting in a part's first two bytes lies whole in the part before (the
        # body opens with ``{``, so the first part's runs start at 1 or later)
        for at in _standalone_runs(part, first=2 if lo else 1):
            if lo + at > last:  # a run near a step is seen by both parts
                last = lo + int(at)
                yield last


def _standalone_runs(part: npt.NDArray[np.uint8], first: int) -> npt.NDArray[np.intp]:
    """Where, at some ``i >= first`` of ``part``, a run of digits starts that is a number
    of its own and long enough to be beyond 64 bits: ``_WIDE_DIGITS`` digits after a
    character that cannot be part of a number, or ``_NEGATIVE_WIDE_DIGITS`` after a minus
    sign that is not itself part of a number. A float's digits after its point or exponent
    never count. A run whose 20th digit lies past the part is left to the next part, which
    holds it whole.

    The runs are found without listing every non-digit (an embedding's text is a fifth
    non-digits): the digit mask ANDed with itself shifted by 1, 2, 4, ... marks each
    position that opens 19 digits in a row; only those that follow a non-digit (the run's
    first digit; ~20 per 64 KiB of embeddings, whose fractions often reach 20 digits) are
    looked at."""
    nothing = np.zeros(0, dtype=np.intp)
    digits = (part - 48) <= 9  # uint8 wraps, so this marks every digit
    windows = _windows(digits, _NEGATIVE_WIDE_DIGITS)
    if len(windows) <= first:
        return nothing
    starts = np.flatnonzero(windows[first:] & ~digits[first - 1 : len(windows) - 1]) + first
    if len(starts) == 0:
        return nothing
    before = part[starts - 1]
    minus = before == ord("-")
    alone = ~_NOT_STANDALONE[before]
    if not (alone | minus).any():  # an embedding's fractions: after a point, all of them
        return nothing
    if minus.any():
        earlier = starts - 2
        number_before = _NOT_STANDALONE[part[np.maximum(earlier, 0)]] & (earlier >= 0)
        minus &= ~number_before  # a sign, not an exponent's
    twentieth = np.minimum(starts + _NEGATIVE_WIDE_DIGITS, len(part) - 1)
    long_enough = digits[twentieth] & (starts + _NEGATIVE_WIDE_DIGITS < len(part))
    wide = (alone & long_enough) | minus
    found: npt.NDArray[np.intp] = starts[wide]
    return found


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
    request_id = obj.get("request_id")  # optional; present, even as null, it must be one
    if "request_id" in obj and not is_request_id(request_id):
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
