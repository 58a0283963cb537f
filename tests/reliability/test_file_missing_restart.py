"""A worker replaced while the memory file is missing (an operator restoring it) must not
create a fresh, empty database at the path: it cannot open its stores, so it is not ready
and refuses memory calls with ``memory.unavailable`` 503 until the original file is back,
then serves it again with every record, without a restart of the server."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx

from tests.reliability.common import chunk, error_of, ready, revisions, running, upsert
from tests.server.harness import ok, poll

MARKER = "missing-file-marker-5e1d"


def _all_down(url: str) -> dict[str, object] | None:
    """The /readyz body once every probe of a few (either worker) says memory is down."""
    for _ in range(6):
        status, body = ready(url)
        if status != 503 or body["planes"]["memory"]["status"] != "down":
            return None
    return dict(body)


def _all_ok(url: str) -> bool | None:
    for _ in range(6):
        status, body = ready(url)
        if status != 200 or body["planes"]["memory"]["status"] != "ok":
            return None
    return True


def test_a_worker_replaced_while_the_file_is_missing_creates_no_file_and_is_down(
    tmp_path: Path,
) -> None:
    with running(tmp_path) as server:
        url = server.url
        data = tmp_path / "data"
        path = data / "memory.db"
        ids = [f"kept-{i}" for i in range(10)]
        ok(upsert(url, [chunk(cid, MARKER) for cid in ids], "kept"))

        aside = data / "memory.db.away"
        os.rename(path, aside)
        for sidecar in ("-wal", "-shm"):  # a restore moves the whole set away
            if (data / f"memory.db{sidecar}").exists():
                os.rename(data / f"memory.db{sidecar}", data / f"memory.db.away{sidecar}")
        poll(lambda: _all_down(url), 20, "memory to be down while the file is away")

        old = server.worker_pids()
        for pid in old:
            os.kill(pid, signal.SIGKILL)

        def replaced() -> list[int] | None:
            pids = server.worker_pids()
            started = server.output().count("Application startup complete")
            fresh = len(pids) == 2 and not set(pids) & set(old)
            return pids if fresh and started >= 4 else None

        poll(replaced, 60, "gunicorn to replace both workers")
        body = poll(lambda: _all_down(url), 30, "the new workers to report memory down")
        assert not path.exists(), "a replaced worker created a new memory file"
        planes = body["planes"]
        assert isinstance(planes, dict)
        assert "missing" in str(planes["memory"]["reason"])
        for attempt in range(4):  # whichever worker answers
            response = upsert(url, [chunk(f"lost-{attempt}", MARKER)], f"lost-{attempt}")
            assert response.status_code == 503, response.text
            assert error_of(response)["code"] == "memory.unavailable"
        assert httpx.get(url + "/healthz").status_code == 200
        assert not path.exists(), "a call created a new memory file"

        for sidecar in ("-wal", "-shm"):
            if (data / f"memory.db.away{sidecar}").exists():
                os.rename(data / f"memory.db.away{sidecar}", data / f"memory.db{sidecar}")
        os.rename(aside, path)
        poll(lambda: _all_ok(url), 60, "memory to serve again once the file is back")
        assert revisions(url, "memory", ids) == {cid: 1 for cid in ids}
        ok(upsert(url, [chunk("after")], "after"))
        assert revisions(url, "memory", [f"lost-{a}" for a in range(4)]) == {}
        assert "Traceback" not in server.output()
