"""A real ``ratatoskr serve`` (gunicorn, 2 workers) for the client tests on each storage
backend (``tests/backends.py``), and a client of it (an ``AsyncClient`` test makes its own
inside ``asyncio.run``).

One server for the package: each test writes under a tenant of its own (``tenant``), as
an actor of the same name (idempotency keys are per actor), with ids of its own, so tests
never see each other's records. 401s are not held (no tarpit), bodies are cut at
256 KiB (so ``PayloadTooLarge`` needs no 8 MiB body) and a body must arrive within 1 s.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ratatoskr.client import Client
from tests.backends import selected, serve_env
from tests.server.harness import KEY, Server

MAX_BODY = 256 * 1024
SERVER_ENV = {
    "RATATOSKR_AUTH_TARPIT_MS": "0",
    "RATATOSKR_MAX_BODY_BYTES": str(MAX_BODY),
    "RATATOSKR_BODY_TIMEOUT": "1",
}
_tenants = itertools.count()
NO_ACCELERATORS = "RATATOSKR_NO_ACCELERATORS"


def passed_on() -> dict[str, str]:
    """The switch a run without the C accelerators sets, passed on to its servers (the
    harness gives them no other ``RATATOSKR_*`` setting of the test's environment), so
    their bodies are decoded by orjson alone too."""
    return {NO_ACCELERATORS: os.environ[NO_ACCELERATORS]} if NO_ACCELERATORS in os.environ else {}


@pytest.fixture(scope="package", params=selected())
def backend_name(request: pytest.FixtureRequest) -> str:
    """The backend the package's server (and the stores it is compared with) run on."""
    name: str = request.param
    return name


@pytest.fixture(scope="package")
def server(backend_name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root: Path = tmp_path_factory.mktemp("client-server")
    served = Server(root, env={**SERVER_ENV, **serve_env(backend_name), **passed_on()})
    try:
        yield served.start()
        assert served.terminate() == 0
    finally:
        served.kill()


@pytest.fixture
def tenant() -> str:
    return f"tenant-{next(_tenants)}"


@pytest.fixture
def client(server: Server, tenant: str) -> Iterator[Client]:
    with Client(server.url, key=KEY, scope={"tenant": tenant}, actor=tenant) as made:
        yield made
