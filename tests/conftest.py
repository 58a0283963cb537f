"""Shared fixtures: real SQLite files with sqlite-vec loaded, and the hypothesis profiles."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.backends import BACKENDS, Backend, selected, stop_postgres

settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
    print_blob=True,
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def db_path(tmp_path: Path) -> Iterator[str]:
    yield str(tmp_path / "memory.db")


@pytest.fixture(params=selected())
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each store suite that takes this runs once per storage backend."""
    return BACKENDS[request.param]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    stop_postgres()  # the session's PostgreSQL, if a test started it
