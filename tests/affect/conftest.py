"""Fixtures of the affect suite: both stores over one injected clock, SQLite on real files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ratatoskr.affect.reference import ReferenceAffectStore
from ratatoskr.affect.store import RatatoskrAffectStore, open_affect_store
from tests.affect.helpers import FakeClock
from tests.backends import BACKENDS, Backend, selected_for_affect


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sqlite_store(tmp_path: Path, clock: FakeClock) -> Iterator[RatatoskrAffectStore]:
    store = open_affect_store(str(tmp_path / "affect.db"), clock=clock)
    yield store
    store.close()


@pytest.fixture(params=selected_for_affect())
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each affect suite that takes this runs once per backend with its own affect store."""
    return BACKENDS[request.param]


@pytest.fixture(params=[*selected_for_affect(), "reference"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[Any]:
    """Each rule test runs against every storage backend and the reference store alike."""
    if request.param == "reference":
        yield ReferenceAffectStore(clock=clock)
        return
    backend = BACKENDS[request.param]
    opened = backend.affect(backend.fresh(tmp_path, "affect"), clock=clock)
    yield opened
    opened.close()
