"""The C accelerator of a scoped search's candidate cut (``_rank.c``), when the install built
it.

``setup.py`` marks it optional: without a C compiler ``memory_ranking`` cuts with numpy
(the same candidates' rule, the same exact answers, slower for small and scattered scopes).
The test suite requires it (``tests/memory/test_rank_accel.py``), so CI fails when the build does.
"""

from __future__ import annotations

from types import ModuleType

RANK_ACCELERATED: ModuleType | None
try:
    from ratatoskr.memory.search import _rank as RANK_ACCELERATED
except ImportError:  # pragma: no cover - only where no compiler was found at install
    RANK_ACCELERATED = None
