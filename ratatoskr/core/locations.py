"""Where the planes live: the settings that name each plane's database and its defaults,
read alike by the server and by the operator tools, and how an integer setting is read."""

from __future__ import annotations

from collections.abc import Mapping

MEMORY_DB_ENV = "RATATOSKR_MEMORY_DB"
AFFECT_DB_ENV = "RATATOSKR_AFFECT_DB"
DIM_ENV = "RATATOSKR_MEMORY_EMBEDDING_DIM"
MAX_DIM = 8192  # sqlite-vec's limit for a float vector column

DEFAULT_MEMORY_DB = "./data/memory.db"
DEFAULT_AFFECT_DB = "./data/affect.db"


def env_int(
    env: Mapping[str, str],
    name: str,
    default: int,
    low: int,
    high: int,
    error: type[ValueError] = ValueError,
) -> int:
    """An integer setting in ``low..high`` (``default`` when unset); ``error`` names it."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise error(f"{name} must be an integer between {low} and {high}") from None
    if not low <= value <= high:
        raise error(f"{name} must be an integer between {low} and {high}")
    return value
