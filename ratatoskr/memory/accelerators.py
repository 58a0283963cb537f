"""The optional C accelerators, loaded once: ``_pack`` (vectors checked and packed to
float32), ``_body`` (a request body's vectors read straight into float32) and ``_rank`` (a
scoped search's candidate cut and exact scores).

``setup.py`` marks them optional: without a C compiler the package installs anyway and the
store runs its pure-Python and numpy paths, with the same results, slower. Setting
``RATATOSKR_NO_ACCELERATORS=1`` makes a process run those paths even where the build
succeeded, which is how the test suite checks them on a machine that has a compiler.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

DISABLED_ENV = "RATATOSKR_NO_ACCELERATORS"


def disabled() -> bool:
    """Whether the environment asks for the pure-Python and numpy paths."""
    return os.environ.get(DISABLED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _load(name: str) -> ModuleType | None:
    if disabled():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - only where no compiler was found at install
        return None


PACK: ModuleType | None = _load("ratatoskr.memory._pack")
BODY: ModuleType | None = _load("ratatoskr.memory._body")
RANK: ModuleType | None = _load("ratatoskr.memory.search._rank")
