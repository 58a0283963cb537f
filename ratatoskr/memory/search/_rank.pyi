from typing import Any

import numpy.typing as npt
from typing_extensions import Buffer

# numpy's stubs make an ndarray a Buffer only from Python 3.12 on: say both
Array = Buffer | npt.NDArray[Any]

SETTLED_MAX: int

def scoped_candidates(
    matrix: Array,
    inv_norms: Array,
    rows: Array,
    query: Array,
    top_k: int,
    want: int,
    epsilon: float,
) -> bytes: ...
def exact_cosine(matrix: Array, rows: Array, query: Array, norms: Array) -> bytes: ...
def row_norms(matrix: Array, dim: int) -> bytes: ...
def rows_to_lists(matrix: Array, rows: Array, dim: int) -> list[list[float]]: ...
def settled_top(
    matrix: Array, rows: Array, query: Array, norms: Array, top_k: int
) -> tuple[list[int], list[float]] | None: ...
