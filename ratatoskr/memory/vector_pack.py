"""The flags the vector accelerator (``_pack.c``) reports per vector, and the accelerator
itself when it is loaded (``accelerators.py``)."""

from __future__ import annotations

from types import ModuleType

from ratatoskr.memory.accelerators import PACK

INEXACT = 1  # float32 does not hold every value of the vector exactly
BAD_VALUE = 2  # a value is not finite, or rounds to infinity in float32
ALL_ZERO = 4  # every value is zero in float32

ACCELERATED: ModuleType | None = PACK
