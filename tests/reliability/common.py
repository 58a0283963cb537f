"""Shared pieces of the fault tests: a server of the test's own, records, answers, probes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.server.harness import Server, call, vec


@contextmanager
def running(root: Path, env: Mapping[str, str] | None = None) -> Iterator[Server]:
    """A ``ratatoskr serve`` (2 workers) over ``root/data``, killed whatever happens."""
    server = Server(root, env=env)
    try:
        yield server.start()
    finally:
        server.kill()


def chunk(chunk_id: str, distillate: str = "x", **fields: Any) -> dict[str, Any]:
    return {
        "id": chunk_id,
        "embedding": vec(1, len(chunk_id) % 7 + 1),
        "scope": {"tenant": "acme"},
        "distillate": distillate,
        **fields,
    }


def state(state_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": state_id, "scope": {"tenant": "acme"}, "mood": "calm", **fields}


def upsert(url: str, records: list[dict[str, Any]], key: str) -> httpx.Response:
    return call(url, "memory", "upsert_many", {"records": records, "idempotency_key": key})


def put(url: str, records: list[dict[str, Any]], key: str) -> httpx.Response:
    return call(url, "affect", "put_many", {"records": records, "idempotency_key": key})


def revisions(url: str, plane: str, ids: list[str]) -> dict[str, int]:
    """Id to revision of every record found, asked in pages of 1000 ids."""
    found: dict[str, int] = {}
    for start in range(0, len(ids), 1000):
        response = call(url, plane, "get_many", {"ids": ids[start : start + 1000]})
        assert response.status_code == 200, response.text
        found.update({r["id"]: int(r["revision"]) for r in response.json()["result"]})
    return found


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert body["ok"] is False, body
    error: dict[str, Any] = body["error"]
    return error


def ready(url: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(url + "/readyz", timeout=10)
    return response.status_code, response.json()


def no_traceback_or_content(server: Server, *markers: str) -> None:
    """The log holds no traceback, and none of the record content ``markers``."""
    text = server.output()
    assert "Traceback" not in text
    for marker in markers:
        assert marker not in text
