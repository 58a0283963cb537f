"""The C accelerator that packs a batch's vectors (``_pack.c``), when the install built it.

``setup.py`` marks it optional: without a C compiler the package installs anyway and
``memory_rules.check_vectors`` converts in Python, with the same results, ~10 ms slower per
batch of 500 x 768. The test suite requires it (``tests/test_vector_pack.py``), so CI
fails when the build does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Packer = Callable[[list[Any], int], "bytes | None"]

ACCELERATED: Packer | None
try:
    from ratatoskr.provider._pack import pack_float_lists as ACCELERATED
except ImportError:  # pragma: no cover - only where no compiler was found at install
    ACCELERATED = None
