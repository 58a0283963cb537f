"""The operator half of the store interface (``core.admin.AdminStore``), per plane and per
backend: each test takes a ``Kit`` (a store, a second view of the same storage, a clock and
a writer through the plane's own verbs), so every backend registered in ``tests.backends``
runs these tests unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ratatoskr.affect import rules as affect_rules
from ratatoskr.core.context import CallContext
from ratatoskr.core.filters import AFFECT, MEMORY, PLANES
from ratatoskr.memory import rules as memory_rules
from tests.backends import BACKENDS, Backend, selected, selected_for_affect

DIM = 8
CTX = CallContext(actor="worldtree")


@dataclass
class Clock:
    now: float = 1_750_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Kit:
    """One plane's store over fresh storage, and what a test needs around it."""

    backend: Backend
    plane: str
    location: str
    clock: Clock
    store: Any
    _opened: list[Any] = field(default_factory=list)

    def open(self, location: str | None = None, backend: Backend | None = None) -> Any:
        """Another store on the same storage (another process's view), or at ``location``
        (of ``backend``, this kit's by default)."""
        where = location or self.location
        on = backend or self.backend
        if self.plane == MEMORY:
            store = on.memory(where, embedding_dim=DIM, clock=self.clock)
        else:
            store = on.affect(where, clock=self.clock)
        self._opened.append(store)
        return store

    def write(
        self, kind: str, records: list[dict[str, Any]], key: str, klass: str = "default"
    ) -> dict[str, Any]:
        """Records of ``kind`` written through the plane's verbs, as a caller would."""
        if kind == "chunk":
            call = memory_rules.parse_upsert(records, key, None, klass, DIM)
            return dict(self.store.upsert_parsed(call, CTX))
        if kind == "state":
            put = affect_rules.parse_put(records, key, None, klass)
            return dict(self.store.put_parsed(put, CTX))
        return dict(self.store.append_parsed(affect_rules.parse_append(records, key, klass), CTX))

    def record(self, kind: str, rid: str, scope: dict[str, str], **fields: Any) -> dict[str, Any]:
        """A record of ``kind`` with id ``rid`` in ``scope``."""
        record: dict[str, Any] = {"id": rid, "scope": scope, **fields}
        if kind == "chunk":
            record.setdefault("embedding", [1.0 + len(rid)] + [0.5] * (DIM - 1))
        if kind == "event":
            record.setdefault("at", "2025-01-01T00:00:00Z")
        return record

    def close(self) -> None:
        for store in self._opened:
            store.close()


def _kit(backend: Backend, plane: str, tmp: Path) -> Kit:
    clock = Clock()
    made = Kit(backend, plane, backend.fresh(tmp, plane), clock, None)
    made.store = made.open()
    return made


@pytest.fixture(
    params=[(b, p) for p in PLANES for b in (selected() if p == MEMORY else selected_for_affect())],
    ids=lambda bp: "-".join(bp),
)
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kit]:
    """Each plane's store, on each backend."""
    backend, plane = request.param
    made = _kit(BACKENDS[backend], plane, tmp_path)
    yield made
    made.close()


@pytest.fixture
def memory_kit(backend: Backend, tmp_path: Path) -> Iterator[Kit]:
    made = _kit(backend, MEMORY, tmp_path)
    yield made
    made.close()


@pytest.fixture
def affect_kit(backend: Backend, tmp_path: Path) -> Iterator[Kit]:
    made = _kit(backend, AFFECT, tmp_path)
    yield made
    made.close()


@pytest.fixture(params=PLANES)
def sqlite_kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kit]:
    """Each plane's SQLite store, for what only that backend promises."""
    made = _kit(BACKENDS["sqlite"], request.param, tmp_path)
    yield made
    made.close()
