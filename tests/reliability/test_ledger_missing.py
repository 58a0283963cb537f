"""The jti ledger moved away under a running server: every mutating call of both planes is
refused (503, saying it is the ledger), so readiness, the health verb and the health gauge
say both planes are ``down`` because of it, until the ledger is back."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from tests.reliability.common import chunk, error_of, put, ready, running, state, upsert
from tests.server.harness import call, ok, poll

LEDGER = "jti ledger"


def _both(url: str, status: int, wanted: str) -> dict[str, Any] | None:
    """The /readyz body once every probe of a few (either worker) says both planes are
    ``wanted`` with HTTP ``status``."""
    for _ in range(6):
        code, body = ready(url)
        planes = body["planes"]
        if code != status or {p["status"] for p in planes.values()} != {wanted}:
            return None
    return body


def test_a_missing_ledger_makes_both_planes_down_and_says_so(tmp_path: Path) -> None:
    with running(tmp_path) as server:
        url = server.url
        ledger = tmp_path / "data" / "memory.jti.db"
        aside = tmp_path / "data" / "memory.jti.db.away"
        ok(upsert(url, [chunk("before")], "before"))

        os.rename(ledger, aside)
        body = poll(lambda: _both(url, 503, "down"), 20, "both planes to be down")
        assert body["ready"] is False
        for plane in ("memory", "affect"):
            assert LEDGER in body["planes"][plane]["reason"], body
        for attempt in range(4):  # whichever worker answers
            for plane, response in (
                ("memory", upsert(url, [chunk(f"no-{attempt}")], f"no-{attempt}")),
                ("affect", put(url, [state(f"no-{attempt}")], f"no-{attempt}")),
            ):
                assert response.status_code == 503, response.text
                error = error_of(response)
                assert error["code"] == f"{plane}.unavailable"
                assert LEDGER in error["message"], error
            for plane in ("memory", "affect"):
                health = ok(call(url, plane, "health", {}))
                assert health["status"] == "down" and LEDGER in health["reason"], health
            scraped = httpx.get(url + "/metrics", timeout=10).text
            assert 'ratatoskr_plane_health{plane="memory"} 0.0' in scraped
            assert 'ratatoskr_plane_health{plane="affect"} 0.0' in scraped
        assert httpx.get(url + "/healthz").status_code == 200
        assert not ledger.exists(), "the ledger was created anew"

        os.rename(aside, ledger)
        poll(lambda: _both(url, 200, "ok"), 20, "both planes to be ok again")
        for plane in ("memory", "affect"):
            assert ok(call(url, plane, "health", {}))["status"] == "ok"
        ok(upsert(url, [chunk("after")], "after"))
        ok(put(url, [state("after")], "after"))
        assert "Traceback" not in server.output()
