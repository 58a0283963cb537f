"""The envelope's scan for integers beyond 64 bits (which orjson would silently turn into
floats) finds exactly the standalone runs of 20 or more digits, wherever they fall against
the 64 KiB steps it reads the body in."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.wire.envelope import _SCAN_STEP, _may_hold_wide_integer

NUMBER_CHARS = b".eE+-0123456789"


def reference(body: bytes) -> bool:
    """A run of 20+ digits that is a number of its own: not part of a float (after a
    point, an exponent or its sign) and not the tail of a longer run."""
    for match in re.finditer(rb"\d{20,}", body):
        at = match.start()
        before = body[at - 1 : at]
        if before not in (b"", *[bytes([c]) for c in NUMBER_CHARS]):
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
