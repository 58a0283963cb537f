"""What a vector may be: exactly the store's dimension of finite numbers, not all zero,
within float32's range; and a query's, which is scaled first when float32 could not hold
its direction. Shared by every store, checked before any storage is touched."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ratatoskr.core.errors import InvalidArguments
from ratatoskr.memory.packed import PackedVector
from ratatoskr.memory.search.cosine import F32
from ratatoskr.memory.vector_pack import ACCELERATED, ALL_ZERO, BAD_VALUE

# The smallest float64 that rounds to infinity in float32: halfway between FLT_MAX and 2**128.
F32_ROUNDS_TO_INF = 2.0**128 - 2.0**103
# a query whose largest value is below this is scaled in float64 before float32 (2**-100:
# float32 keeps its full precision down to 2**-126, so the direction keeps float32's digits)
QUERY_FLOOR = 2.0**-100


def check_vector(value: Any, dim: int, field: str) -> tuple[F32, npt.NDArray[np.float64]]:
    """Exactly ``dim`` finite numbers (booleans excluded), not all zero, within float32 range.

    Returns the vector as float32 (what is ranked) and as float64 (what was sent)."""
    exact = _exact(value, dim, field)
    return _narrow(exact, field), exact


def _exact(value: Any, dim: int, field: str) -> npt.NDArray[np.float64]:
    """Exactly ``dim`` numbers (booleans excluded), as float64."""
    if not isinstance(value, list) or len(value) != dim:
        raise InvalidArguments(f"{field} must be a list of {dim} numbers")
    if not set(map(type, value)) <= {float, int}:  # bool is its own type, so it fails here
        raise InvalidArguments(f"{field} must hold only numbers")
    try:
        return np.asarray(value, dtype=np.float64)
    except OverflowError:
        raise InvalidArguments(f"{field} holds a number beyond float32 range") from None


def _narrow(exact: npt.NDArray[np.float64], field: str) -> F32:
    """``exact`` as float32, refused when a value is not finite there or all become zero.
    Range is checked on the float64 values (cheaper than a cast under ``np.errstate``)."""
    peak = float(np.abs(exact).max())
    if not peak < F32_ROUNDS_TO_INF:  # also catches nan and inf
        raise InvalidArguments(f"{field} holds a non-finite number or one beyond float32 range")
    vector = exact.astype(np.float32)
    if not vector.any():
        raise InvalidArguments(f"{field} is all zero (cosine is undefined)")
    return vector


def check_query(vector: Any, dim: int) -> F32:
    """The search vector as float32, checked as ``check_vector`` checks it. A list of exact
    floats (what a JSON body holds) is packed and checked by the C accelerator in ~1 µs,
    where the type check and numpy's conversion of a 768-number list take ~40 µs, a tenth
    of a small search; anything else, a fault (named there), or no accelerator goes through
    ``check_vector``. A vector ``body.split_search`` read is packed and checked already.
    A query too small for float32 to hold its direction is scaled first (``_scaled_query``)."""
    if isinstance(vector, PackedVector):
        if vector.batch.plain(dim):
            query = vector.batch.row(0)
            if _holds_direction(query):
                return query
        vector = vector.values()
    if ACCELERATED is not None:
        packed = ACCELERATED.narrow_float_lists([vector], dim, F32_ROUNDS_TO_INF)
        if packed is not None and not packed[2][0] & (BAD_VALUE | ALL_ZERO):
            query = np.frombuffer(packed[1], dtype=np.float32)
            if _holds_direction(query):
                return query
    return _scaled_query(vector, dim)


def _holds_direction(query: F32) -> bool:
    """Whether float32 keeps the query's direction: its largest value is far above the
    subnormal range, where float32 keeps fewer and fewer digits (at 1e-44, one)."""
    return float(np.abs(query).max()) >= QUERY_FLOOR


def _scaled_query(vector: Any, dim: int) -> F32:
    """The query divided by its largest value in float64, then float32: a cosine does not
    depend on a vector's length, so a finite, non-zero query of 1e-50s ranks as the same
    direction at unit scale does (float32 alone would round it to zero)."""
    exact = _exact(vector, dim, "vector")
    peak = float(np.abs(exact).max())
    if not peak < F32_ROUNDS_TO_INF:  # also catches nan and inf
        raise InvalidArguments("vector holds a non-finite number or one beyond float32 range")
    if peak == 0.0:
        raise InvalidArguments("vector is all zero (cosine is undefined)")
    if peak >= QUERY_FLOOR:
        return _narrow(exact, "vector")
    return _narrow(exact / peak, "vector")
