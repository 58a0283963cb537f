"""Fixtures: a real ``ratatoskr serve`` (gunicorn, 2 workers) over files in tmp_path, or
over a fresh PostgreSQL schema for the backend-parametrized ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import selected
from tests.backends import serve_env as backend_env
from tests.server.harness import Server


@pytest.fixture(scope="module", params=selected())
def shared_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """One server per backend for the tests that only call it (module scope: boots once)."""
    server = Server(tmp_path_factory.mktemp("server"), env=backend_env(request.param))
    try:
        yield server.start()
        assert server.terminate() == 0
    finally:
        server.kill()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server of its own over files, for a test that breaks, stops or counts it."""
    server = Server(tmp_path)
    try:
        yield server.start()
    finally:
        server.kill()


@pytest.fixture(params=selected())
def any_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """A server of its own on each backend."""
    server = Server(tmp_path, env=backend_env(request.param))
    try:
        yield server.start()
    finally:
        server.kill()
