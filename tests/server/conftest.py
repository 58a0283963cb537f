"""Fixtures: a real ``ratatoskr serve`` (gunicorn, 2 workers) over files in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.harness import Server


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the tests that only call it (module scope: boots once)."""
    server = Server(tmp_path_factory.mktemp("server"))
    try:
        yield server.start()
        assert server.terminate() == 0
    finally:
        server.kill()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server of its own, for a test that breaks, stops or counts it."""
    server = Server(tmp_path)
    try:
        yield server.start()
    finally:
        server.kill()
