"""``rules.plain_chunk``, the one-pass check of a common record: it accepts a record
only as ``check_chunk`` (field by field) would, with the same result, and leaves every other
to it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.core.errors import InvalidArguments, InvalidFilter
from ratatoskr.memory import rules
from tests.memory.helpers import DIM, vec

CHECKED = (np.asarray(vec(0.5), dtype=np.float32), None)

# Values a record may hold beside its id, scope and vector: plain JSON, the odd ones a Python
# caller can send (non-finite floats, tuples, sets, subclasses, huge integers, non-string
# keys), nested a little.
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.sampled_from([("a", 1), {1, 2}, b"x", math.pi]),
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2)), inner, max_size=3),
    ),
    max_leaves=6,
)
axes = st.sampled_from(["tenant", "group", "end_user", "agent_self", "planet"])
scopes = st.one_of(
    st.dictionaries(axes, st.one_of(st.text(max_size=3), st.integers(0, 2)), max_size=3),
    st.just("tenant-a"),
)


@st.composite
def records(draw: st.DrawFn) -> Any:
    record: dict[Any, Any] = {}
    id_key = draw(st.sampled_from(["id", "id", "chunk_id", "memory_id", None]))
    if id_key is not None:
        record[id_key] = draw(
            st.one_of(st.text(min_size=0, max_size=5), st.just("\ud800"), st.integers(0, 3))
        )
    record[draw(st.sampled_from(["embedding", "vector"]))] = vec(0.5)
    if draw(st.booleans()):
        record["scope"] = draw(scopes)
    origin = draw(st.sampled_from([None, "conversation", "injected_context", 7]))
    if origin is not None:
        record["origin"] = origin
    if draw(st.booleans()):
        record["injection_source"] = draw(st.sampled_from([None, "tool", "web"]))
    for name, value in draw(st.dictionaries(st.sampled_from(["d", "meta", 3]), values)).items():
        record[name] = value
    return draw(st.sampled_from([record, [record], "record"]))


@given(records())
def test_plain_chunk_accepts_only_what_check_chunk_accepts_and_agrees(record: Any) -> None:
    fast = rules.plain_chunk(record, CHECKED)
    try:
        slow = rules.check_chunk(record, 0, DIM, CHECKED)
    except (InvalidArguments, InvalidFilter):  # refused by the full check: by both
        assert fast is None
        return
    if fast is None:
        return  # left to check_chunk, which is allowed
    assert (fast.chunk_id, fast.vector_key, fast.scope, fast.origin, fast.rest_json) == (
        slow.chunk_id,
        slow.vector_key,
        slow.scope,
        slow.origin,
        slow.rest_json,
    )
    assert fast.record is slow.record and fast.vector is slow.vector and fast.exact is None


def test_a_common_record_takes_the_one_pass_path() -> None:
    record = {
        "id": "c1",
        "embedding": vec(0.5),
        "scope": {"tenant": "t", "end_user": "u"},
        "distillate": "likes tea",
        "origin": "conversation",
        "metadata": {"tags": ["a", 1, 2.5, None], "deep": {"x": True}},
        "weight": 0.25,
    }
    chunk = rules.plain_chunk(record, CHECKED)
    assert chunk is not None
    assert chunk.rest_json == rules.check_chunk(record, 0, DIM, CHECKED).rest_json
