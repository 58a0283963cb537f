"""Which files the admin commands work on, and opening them as the server does.

Paths come from flags, else the server's environment variables, else ``./data``. The memory
file records its own embedding dimension, so an operator rarely passes ``--dim``; a command
never creates a plane file it was only asked to read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import apsw

from ratatoskr.affect.store import RatatoskrAffectStore, open_affect_store
from ratatoskr.core.filters import AFFECT, MEMORY, PLANES
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from ratatoskr.ops.filters import check_plane
from ratatoskr.sqlite.database import SchemaError
from ratatoskr.sqlite.jti import ledger_beside

MEMORY_DB_ENV = "RATATOSKR_MEMORY_DB"
AFFECT_DB_ENV = "RATATOSKR_AFFECT_DB"
DIM_ENV = "RATATOSKR_MEMORY_EMBEDDING_DIM"
DEFAULT_PATHS = {
    MEMORY: os.path.join("data", "memory.db"),
    AFFECT: os.path.join("data", "affect.db"),
}

PlaneStore = RatatoskrMemoryStore | RatatoskrAffectStore


@dataclass(frozen=True)
class Paths:
    """The two plane files, the jti ledger if named, and the dimension if forced."""

    memory: str
    affect: str
    jti: str | None = None
    dim: int | None = None

    @classmethod
    def resolve(
        cls,
        env: Mapping[str, str],
        *,
        memory: str | None = None,
        affect: str | None = None,
        jti: str | None = None,
        dim: int | None = None,
    ) -> Paths:
        if dim is None and env.get(DIM_ENV):
            try:
                dim = int(env[DIM_ENV])
            except ValueError:
                raise ValueError(f"{DIM_ENV} must be a positive integer") from None
        if dim is not None and dim < 1:
            raise ValueError("the embedding dimension must be a positive integer")
        return cls(
            memory or env.get(MEMORY_DB_ENV) or DEFAULT_PATHS[MEMORY],
            affect or env.get(AFFECT_DB_ENV) or DEFAULT_PATHS[AFFECT],
            jti,
            dim,
        )

    def of(self, plane: str) -> str:
        return self.memory if check_plane(plane) == MEMORY else self.affect

    def jti_ledgers(self) -> list[str]:
        """The named ledger, else the ledger beside each plane file (``ledger_beside``)."""
        if self.jti is not None:
            return [self.jti]
        return [ledger_beside(self.of(p)) for p in PLANES]


def stored_dim(path: str) -> int:
    """The embedding dimension the memory file was created with (read-only peek)."""
    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        raise ValueError("the memory database cannot be opened") from None
    try:
        rows = conn.execute("SELECT value FROM ratatoskr_meta WHERE key = 'embedding_dim'")
        found = rows.fetchall()
    except apsw.Error:
        found = []
    finally:
        conn.close()
    if not found:
        raise SchemaError("the file is not a memory database (no embedding_dim in ratatoskr_meta)")
    return int(found[0][0])


class Stores:
    """The plane stores one command works on, opened on first use and closed together."""

    def __init__(self, paths: Paths, *, clock: Callable[[], float] = time.time) -> None:
        self.paths = paths
        self.clock = clock
        self._open: dict[str, Any] = {}

    def exists(self, plane: str) -> bool:
        return os.path.isfile(self.paths.of(plane))

    def present(self) -> list[str]:
        """The planes whose file exists, in plane order."""
        return [p for p in PLANES if self.exists(p)]

    def memory(self, *, create: bool = False) -> RatatoskrMemoryStore:
        store = self.get(MEMORY, create=create)
        assert isinstance(store, RatatoskrMemoryStore)
        return store

    def affect(self, *, create: bool = False) -> RatatoskrAffectStore:
        store = self.get(AFFECT, create=create)
        assert isinstance(store, RatatoskrAffectStore)
        return store

    def get(self, plane: str, *, create: bool = False) -> PlaneStore:
        """The store of ``plane``; a missing file is an error unless ``create``."""
        if plane in self._open:
            store: PlaneStore = self._open[plane]
            return store
        path = self.paths.of(plane)
        exists = os.path.isfile(path)
        if not exists and not create:
            raise ValueError(f"no {plane} database at {path} (see --{plane}-db)")
        if plane == MEMORY:
            dim = self.paths.dim
            if exists:
                dim = stored_dim(path) if dim is None else dim
            if dim is None:
                raise ValueError(f"a new memory database needs --dim or {DIM_ENV}")
            store = open_memory_store(path, embedding_dim=dim, clock=self.clock)
        else:
            store = open_affect_store(path, clock=self.clock)
        self._open[plane] = store
        return store

    def close(self) -> None:
        for store in self._open.values():
            store.close()
        self._open.clear()

    def __enter__(self) -> Stores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
