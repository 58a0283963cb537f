"""The envelope's scan for integers beyond 64 bits (which orjson would silently turn into
floats) finds exactly the standalone runs of 20 or more digits, or 19 or more after a sign,
wherever they fall against the 64 KiB steps it reads the body in; the exact check then
refuses exactly the integers outside [-2**63, 2**64 - 1], wherever they are in the body,
and never digits inside a string."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.core.errors import MalformedEnvelope
from ratatoskr.wire.envelope import (
    _SCAN_STEP,
    WIDE_INTEGER,
    _holds_wide_integer,
    _wide_integer_candidates,
    decode_object,
)

NUMBER_CHARS = b".eE+-0123456789"


def _may_hold_wide_integer(body: bytes) -> bool:
    """Whether the cheap scan finds a candidate run at all."""
    return next(_wide_integer_candidates(body), None) is not None


def reference(body: bytes) -> bool:
    """A run of 20+ digits, or 19+ after a sign, that is a number of its own: not part of
    a float (after a point, an exponent or its sign) and not the tail of a longer run."""
    for match in re.finditer(rb"\d{19,}", body):
        at = match.start()
        before = body[at - 1 : at]
        if len(match.group()) >= 20 and before not in (b"", *[bytes([c]) for c in NUMBER_CHARS]):
            return True
        if before == b"-" and (at < 2 or body[at - 2] not in NUMBER_CHARS):
            return True
    return False


pieces = st.one_of(
    st.sampled_from([b",", b":", b"[", b"]", b" ", b'"', b".", b"e", b"E", b"+", b"-", b"x"]),
    st.integers(min_value=1, max_value=25).map(lambda n: b"7" * n),
    st.integers(min_value=15, max_value=24).map(lambda n: b"1" + b"0" * (n - 1)),
)


@given(
    st.lists(pieces, max_size=30),
    st.integers(min_value=0, max_value=2),
    st.integers(min_value=-40, max_value=40),
)
def test_the_scan_finds_what_the_plain_search_finds(
    content: list[bytes], step: int, shift: int
) -> None:
    # the content lands across a step boundary (or at the very start)
    pad = max(0, step * _SCAN_STEP + shift - 1)
    body = b"{" + b" " * pad + b"".join(content) + b"}"
    assert _may_hold_wide_integer(body) == reference(body)


def test_an_embedding_body_has_no_wide_integer_but_a_wide_note_does() -> None:
    floats = b",".join(b"0.0%d" % (10**16 + i) for i in range(20000))
    assert not _may_hold_wide_integer(b'{"embedding":[' + floats + b"]}")
    wide = b'{"embedding":[' + floats + b'],"note":18446744073709551616}'
    assert _may_hold_wide_integer(wide)
    assert _may_hold_wide_integer(b'{"note":-123456789012345678901}')
    assert not _may_hold_wide_integer(b'{"note":1.123456789012345678901}')
    assert not _may_hold_wide_integer(b'{"note":1e-123456789012345678901}')
    assert _may_hold_wide_integer(b'{"note":-9223372036854775809}')
    assert not _may_hold_wide_integer(b'{"note":-922337203685477580}')
    assert not _may_hold_wide_integer(b'{"note":9223372036854775809}')
    assert not _may_hold_wide_integer(b'{"note":1e-9223372036854775809}')


INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1
edges = st.sampled_from([INT_MIN, INT_MIN - 1, INT_MAX, INT_MAX + 1, -(10**19), 10**19])
integers = st.one_of(
    edges,
    st.integers(min_value=INT_MIN - 10**21, max_value=INT_MAX + 10**21),
    st.integers(min_value=-(10**30), max_value=10**30),
)
digit_text = st.text(alphabet='0123456789-+.eE" \\x', max_size=45)
values = st.recursive(
    st.one_of(integers, st.floats(allow_nan=False, allow_infinity=False), digit_text),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(digit_text, inner, max_size=4)
    ),
    max_leaves=12,
)


def wide_in(value: Any) -> bool:
    if isinstance(value, bool | float | str):
        return False
    if isinstance(value, int):
        return not INT_MIN <= value <= INT_MAX
    items = value.values() if isinstance(value, dict) else value
    return any(wide_in(item) for item in items)


@given(values, st.sampled_from([0, _SCAN_STEP - 30]))
def test_the_exact_check_refuses_exactly_the_integers_beyond_64_bits(value: Any, pad: int) -> None:
    # spacing puts the numbers across the scan's step; strings hold digit runs and quotes
    body = b'{"pad":"' + b" " * pad + b'","v":' + json.dumps(value).encode() + b"}"
    assert _holds_wide_integer(body) == wide_in(value)
    if wide_in(value):
        with pytest.raises(MalformedEnvelope) as refused:
            decode_object(body)
        assert refused.value.message == WIDE_INTEGER
    else:
        assert decode_object(body) == orjson.loads(body)


@pytest.mark.parametrize(
    "literal",
    [
        b"-9223372036854775809",
        b"-9999999999999999999",
        b"-18446744073709551616",
        b"18446744073709551616",
        b"-1" + b"0" * 400,  # beyond float64 too: still named as the integer it is
        b"1" + b"0" * 5000,  # more digits than int() converts
    ],
)
def test_an_integer_beyond_64_bits_is_refused_on_either_side(literal: bytes) -> None:
    for body in (
        b'{"x":' + literal + b"}",
        b'{"r":[{"id":"a","embedding":[0.5,' + literal + b'],"n":1}]}',
        b'{"expected_revisions":{"a":' + literal + b"}}",
    ):
        with pytest.raises(MalformedEnvelope) as refused:
            decode_object(body)
        assert refused.value.message == WIDE_INTEGER


@pytest.mark.parametrize(
    "body",
    [
        b'{"x":-9223372036854775808,"y":18446744073709551615,"z":-1000000000000000000}',
        b'{"x":"-9223372036854775809","y":"18446744073709551616"}',
        b'{"x":"say \\"-9223372036854775809\\" twice: \\\\","y":-12}',
        b'{"x":-9223372036854775809.0,"y":18446744073709551616e0,"z":1e-99999999999999999999}',
    ],
)
def test_an_integer_within_64_bits_or_digits_in_a_string_pass(body: bytes) -> None:
    assert decode_object(body) == orjson.loads(body)


def test_a_deep_body_with_a_false_alarm_is_not_an_internal_error() -> None:
    """The exact check reads no structure: nesting orjson accepts (up to 1024 levels)
    never makes it fail, with or without a wide integer in the body."""
    deep = b"[" * 1020 + b"]" * 1020
    assert decode_object(b'{"a":' + deep + b',"s":"12345678901234567890"}')["s"]
    with pytest.raises(MalformedEnvelope) as refused:
        decode_object(b'{"a":' + deep + b',"n":-9223372036854775809}')
    assert refused.value.message == WIDE_INTEGER
