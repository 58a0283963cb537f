"""The storage backends the store suites run against, each behind one small adapter.

A suite that takes ``memory_backend`` or ``affect_backend`` (fixtures in ``conftest.py``)
runs once per backend registered in ``BACKENDS``. Each backend knows how to make a fresh,
empty place for one plane's store, how to open a store there, and how to count every row a
plane keeps (so "a refused call touched nothing" is checked on the backend's own tables).
``RATATOSKR_TEST_BACKENDS=sqlite`` (a comma-separated list) narrows the run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from ratatoskr.sqlite.cursors import load_secret

Clock = Callable[[], float]


@dataclass(frozen=True)
class Backend:
    """One backend: ``fresh(tmp, plane)`` gives a location no store has used yet."""

    name: str
    fresh: Callable[[Path, str], str]
    open_memory: Callable[..., Any]
    open_affect: Callable[..., Any]
    footprint: Callable[[Any], dict[str, int]]
    cursor_secret: Callable[[Any], bytes]

    def memory(
        self,
        location: str,
        *,
        embedding_dim: int,
        clock: Clock = time.time,
        mirror_bytes: int | None = None,
    ) -> Any:
        return self.open_memory(
            location, embedding_dim=embedding_dim, clock=clock, mirror_bytes=mirror_bytes
        )

    def affect(self, location: str, *, clock: Clock = time.time) -> Any:
        return self.open_affect(location, clock=clock)


def _sqlite_fresh(tmp: Path, plane: str) -> str:
    return str(tmp / f"{plane}.db")


def _sqlite_footprint(store: Any) -> dict[str, int]:
    """Rows in every table of the store's file (vec0's shadow tables and the meta table,
    which no call writes, left out)."""
    with store.db.read() as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT GLOB 'sqlite_*' AND name NOT GLOB 'memory_vec_*' "
                "AND name != 'ratatoskr_meta'"
            ).fetchall()
        ]
        return {
            t: int(conn.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0]) for t in tables
        }


def _sqlite_cursor_secret(store: Any) -> bytes:
    """The key the affect store signs cursors with (the reference store is given the same,
    so both hand out the same cursors)."""
    return load_secret(store.db)


SQLITE = Backend(
    name="sqlite",
    fresh=_sqlite_fresh,
    open_memory=open_memory_store,
    open_affect=open_affect_store,
    footprint=_sqlite_footprint,
    cursor_secret=_sqlite_cursor_secret,
)

BACKENDS: dict[str, Backend] = {"sqlite": SQLITE}


def selected() -> list[str]:
    """The backends this run covers: every registered one unless the environment narrows it."""
    wanted = os.environ.get("RATATOSKR_TEST_BACKENDS")
    if not wanted:
        return list(BACKENDS)
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown test backend(s): {', '.join(unknown)}")
    return names
