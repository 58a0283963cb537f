"""Fixtures: the real memory app over a real SQLite file, driven over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from ratatoskr.sqlite.jti import JtiLedger
from tests.apps import memory_app
from tests.wire.helpers import DIM, KEY


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RatatoskrMemoryStore]:
    s = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    yield s
    s.close()


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[JtiLedger]:
    guard = JtiLedger(str(tmp_path / "m.jti.db"))
    yield guard
    guard.close()


@pytest.fixture
def client(store: RatatoskrMemoryStore, ledger: JtiLedger) -> Iterator[TestClient]:
    app = memory_app(store, KEY, ledger=ledger)
    with TestClient(app) as c:
        yield c
