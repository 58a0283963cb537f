"""A mirror's matrix in its own mapping, its rows faulted in before they are written."""

from __future__ import annotations

import resource

import numpy as np

from ratatoskr.memory.search.pages import populate, zeroed_matrix


def _faults() -> int:
    """Minor page faults of this thread so far."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def test_a_large_matrix_is_zeroed_writable_float32() -> None:
    matrix = zeroed_matrix(4096, 256)
    assert matrix.shape == (4096, 256) and matrix.dtype == np.float32
    assert matrix.flags.writeable and matrix.flags.c_contiguous and not matrix.any()
    matrix[17] = 2.5
    assert float(matrix.sum()) == 2.5 * 256


def test_populated_rows_are_written_without_faulting_their_pages() -> None:
    rows, dim = 16384, 256  # 16 MB: 4,096 pages
    fresh = zeroed_matrix(rows, dim)
    before = _faults()
    fresh[:] = 1.0
    faulted_by_writes = _faults() - before
    populated = zeroed_matrix(rows, dim)
    pauses: list[int] = []
    assert populate(populated, rows // 2, lambda: pauses.append(1))
    before = _faults()
    populated[: rows // 2] = 1.0
    faulted_after_populate = _faults() - before
    assert faulted_by_writes > 1000 and faulted_after_populate < 50
    assert pauses  # the builder's pause ran between the blocks
    populated[rows // 2 :] = 1.0  # the rest still faults in as written
    assert float(populated.sum()) == rows * dim


def test_a_small_matrix_is_plain_and_not_populated() -> None:
    matrix = zeroed_matrix(4, 8)
    assert not populate(matrix, 4) and not matrix.any()
    assert not populate(zeroed_matrix(0, 8), 0)
