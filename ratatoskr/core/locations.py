"""Where the planes live: the settings that name each plane's database and its defaults,
read alike by the server and by the operator tools."""

from __future__ import annotations

MEMORY_DB_ENV = "RATATOSKR_MEMORY_DB"
AFFECT_DB_ENV = "RATATOSKR_AFFECT_DB"
DIM_ENV = "RATATOSKR_MEMORY_EMBEDDING_DIM"

DEFAULT_MEMORY_DB = "./data/memory.db"
DEFAULT_AFFECT_DB = "./data/affect.db"
