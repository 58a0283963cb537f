"""The C accelerator for a batch's vectors gives what the pure-Python path gives, on every
input: the same packed values, the same flags, and ``None`` (fall back and name the fault)
in the same cases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.memory import _pack as ACCELERATED
from ratatoskr.memory import accelerators, rules, vector_pack

DIM = 6


class FloatSub(float):
    pass


def test_the_accelerator_is_built_and_used_unless_switched_off() -> None:
    """``make test`` installs with a C compiler (this module's import of ``_pack`` fails
    otherwise): a build that silently fell back would cost every batch ~10 ms. The store
    uses it unless ``RATATOSKR_NO_ACCELERATORS`` asks for Python and numpy."""
    assert (vector_pack.ACCELERATED is None) == accelerators.disabled()


odd_values: list[Any] = [
    True,
    False,
    2**70,
    -(2**70),
    "1.0",
    None,
    [1.0],
    FloatSub(1.5),
    float("nan"),
    float("inf"),
    -float("inf"),
    1e39,
    3.4028235e38,
    np.float64(0.5),
    rules.F32_ROUNDS_TO_INF,
    float(np.nextafter(rules.F32_ROUNDS_TO_INF, 0)),
    1e-46,
]
values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.floats(width=32),
    st.sampled_from([0.0, -0.0, 1.0, 5e-324, 1e-45]),
    st.integers(min_value=-5, max_value=5),
    st.sampled_from(odd_values),
)
vector = st.one_of(
    st.lists(values, min_size=DIM, max_size=DIM),
    st.lists(st.floats(-2.0, 2.0), min_size=DIM, max_size=DIM),
    st.lists(st.floats(-2.0, 2.0), min_size=0, max_size=DIM + 1),
    st.tuples(*[st.floats(-2.0, 2.0)] * DIM).map(list).map(tuple),
    st.none(),
)
record = st.one_of(
    st.builds(lambda v: {"id": "a", "embedding": v}, vector),
    st.builds(lambda v: {"id": "a", "vector": v}, vector),
    st.builds(lambda v: {"id": "a", "embedding": v, "vector": [0.5] * DIM}, vector),
    st.just({"id": "no vector"}),
    st.just(["not", "a", "record"]),
)


def comparable(checked: rules.CheckedVectors | None) -> Any:
    if checked is None:
        return None
    narrow = checked.narrow.tobytes(), checked.narrow.shape
    return narrow, checked.exact, checked.keys, checked.wide, checked.all_floats


@given(st.lists(record, min_size=1, max_size=4))
def test_accelerated_and_pure_python_agree(records: list[Any]) -> None:
    fast = rules.check_vectors(records, DIM, ACCELERATED)
    slow = rules.check_vectors(records, DIM, None)
    assert comparable(fast) == comparable(slow)


@pytest.mark.parametrize("pack", [ACCELERATED, None], ids=["c", "python"])
def test_plain_floats_pack_exactly(pack: Any) -> None:
    records = [{"id": "a", "embedding": [0.1, -0.0, 1e-300, 2.5, -3.0e38, 0.7]}]
    checked = rules.check_vectors(records, DIM, pack)
    assert checked is not None and checked.all_floats
    assert np.frombuffer(checked.wide).tolist() == records[0]["embedding"]
    assert checked.exact[0] is not None  # 0.1 is not a float32: the float64 bytes are kept
    assert checked.narrow.dtype == np.float32


@pytest.mark.parametrize("pack", [ACCELERATED, None], ids=["c", "python"])
def test_integers_are_numbers_but_not_floats(pack: Any) -> None:
    checked = rules.check_vectors([{"id": "a", "vector": [1, 0, 0, 0, 0, 2]}], DIM, pack)
    assert checked is not None and not checked.all_floats
    assert checked.keys == ["vector"]


@pytest.mark.parametrize("pack", [ACCELERATED, None], ids=["c", "python"])
def test_the_float32_range_ends_where_rounding_reaches_infinity(pack: Any) -> None:
    below = float(np.nextafter(rules.F32_ROUNDS_TO_INF, 0))
    fits = rules.check_vectors([{"id": "a", "embedding": [below] + [0.5] * (DIM - 1)}], DIM, pack)
    assert fits is not None and float(fits.narrow[0][0]) == float(np.finfo(np.float32).max)
    edge = [{"id": "a", "embedding": [rules.F32_ROUNDS_TO_INF] + [0.5] * (DIM - 1)}]
    assert rules.check_vectors(edge, DIM, pack) is None
    tiny = rules.check_vectors([{"id": "a", "embedding": [1e-46] * DIM}], DIM, pack)
    assert tiny is None  # every value rounds to a float32 zero: cosine is undefined
