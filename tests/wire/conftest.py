"""Fixtures: the real memory app over a real store of each backend, driven over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from ratatoskr.ops.locations import open_ledger
from tests.apps import memory_app
from tests.backends import Backend
from tests.wire.helpers import DIM, KEY


@pytest.fixture
def location(backend: Backend, tmp_path: Path) -> str:
    return backend.fresh(tmp_path, "memory")


@pytest.fixture
def store(backend: Backend, location: str) -> Iterator[Any]:
    s = backend.memory(location, embedding_dim=DIM)
    yield s
    s.close()


@pytest.fixture
def ledger(location: str) -> Iterator[Any]:
    """The jti ledger beside the store: the file next to it, or its database."""
    guard = open_ledger(location)
    yield guard
    guard.close()  # type: ignore[attr-defined]


@pytest.fixture
def client(store: Any, ledger: Any) -> Iterator[TestClient]:
    app = memory_app(store, KEY, ledger=ledger)
    with TestClient(app) as c:
        yield c
