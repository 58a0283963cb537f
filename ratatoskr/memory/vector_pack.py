"""The C accelerator that packs and checks vectors (``_pack.c``), when the install built it.

``setup.py`` marks it optional: without a C compiler the package installs anyway and
``memory_rules`` converts and checks in Python and numpy, with the same results, ~10 ms
slower per batch of 500 x 768. The test suite requires it (``tests/memory/test_vector_pack.py``),
so CI fails when the build does.
"""

from __future__ import annotations

from types import ModuleType

INEXACT = 1  # float32 does not hold every value of the vector exactly
BAD_VALUE = 2  # a value is not finite, or rounds to infinity in float32
ALL_ZERO = 4  # every value is zero in float32

ACCELERATED: ModuleType | None
try:
    from ratatoskr.memory import _pack as ACCELERATED
except ImportError:  # pragma: no cover - only where no compiler was found at install
    ACCELERATED = None
