from typing_extensions import Buffer

SETTLED_MAX: int

def scoped_candidates(
    matrix: Buffer,
    inv_norms: Buffer,
    rows: Buffer,
    query: Buffer,
    top_k: int,
    want: int,
    epsilon: float,
) -> bytes: ...
def exact_cosine(matrix: Buffer, rows: Buffer, query: Buffer, norms: Buffer) -> bytes: ...
def row_norms(matrix: Buffer, dim: int) -> bytes: ...
def rows_to_lists(matrix: Buffer, rows: Buffer, dim: int) -> list[list[float]]: ...
def settled_top(
    matrix: Buffer, rows: Buffer, query: Buffer, norms: Buffer, top_k: int
) -> tuple[list[int], list[float]] | None: ...
