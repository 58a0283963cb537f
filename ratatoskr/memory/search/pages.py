"""A mirror's matrix in pages the kernel faults in ahead of the writes.

A page of fresh anonymous memory is normally faulted in by the first write to it. On the
virtual machines measured here that costs ten times what asking the kernel to fault in a
whole range costs (``MADV_POPULATE_WRITE``, Linux 5.14): 3.5 s of CPU against 0.55 s for
the 1.5 GB of a million rows at dimension 384, written by a load or a regroup, and taken
from the searches on the other threads. So a large matrix is mapped anonymously on its
own, and the rows about to be written are populated first, a block between two of the
builder's pauses. Where the kernel does not know the advice, the pages fault in as they
are written, as before.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable

import numpy as np

from ratatoskr.memory.search.cosine import F32

MADV_POPULATE_WRITE = 23  # <linux/mman.h>; the mmap module names it only from Python 3.12
MAPPED_BYTES = 1 << 20  # a matrix this large gets its own mapping
POPULATE_BYTES = 64 << 20  # faulted in between two pauses (~15 ms here)


def zeroed_matrix(rows: int, dim: int) -> F32:
    """A zeroed ``rows`` x ``dim`` float32 matrix; a large one in its own mapping (which
    ``populate`` can fault in), freed with the array."""
    size = rows * dim * 4
    if size == 0 or size < MAPPED_BYTES:
        return np.zeros((rows, dim), dtype=np.float32)
    mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(mapping, dtype=np.float32).reshape(rows, dim)


def populate(matrix: F32, rows: int, pause: Callable[[], None] = lambda: None) -> bool:
    """Fault in the pages of the first ``rows`` rows of ``matrix`` (made by
    ``zeroed_matrix``), ``POPULATE_BYTES`` between two pauses. False when nothing was done:
    a small matrix, or a kernel without the advice."""
    mapping = _mapping(matrix)
    if mapping is None:
        return False
    end = min(len(mapping), rows * matrix.shape[1] * 4)
    for start in range(0, end, POPULATE_BYTES):
        try:
            mapping.madvise(MADV_POPULATE_WRITE, start, min(POPULATE_BYTES, end - start))
        except OSError:  # EINVAL before Linux 5.14: the writes fault the pages in
            return False
        pause()
    return True


def _mapping(matrix: F32) -> mmap.mmap | None:
    """The mapping ``zeroed_matrix`` made for ``matrix`` (under the array numpy made of it
    and a memoryview), if any."""
    base = matrix.base
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None
