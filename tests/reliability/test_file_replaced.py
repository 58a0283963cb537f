"""The memory file is replaced, then truncated, under a running server.

Tests run as root, where removing permissions does not stop a read, so the file is swapped
for another one (the original moved aside) and then truncated. Meanwhile the memory plane is
``down``, ``/readyz`` is 503, memory calls answer ``memory.unavailable`` 503 and the affect
plane serves on. Recovery: once the original file is back at its path (the same inode moved
back, or its bytes written back), the plane is ``ok`` again with every record, no restart.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.reliability.common import (
    chunk,
    error_of,
    no_traceback_or_content,
    put,
    ready,
    revisions,
    running,
    state,
    upsert,
)
from tests.server.harness import ok, poll

MARKER = "replaced-file-marker-91c2"


def _memory_status(url: str, wanted: str) -> dict[str, object] | None:
    """The /readyz body once every probe of a few (either worker) shows memory ``wanted``."""
    for _ in range(4):
        _, body = ready(url)
        if body["planes"]["memory"]["status"] != wanted:
            return None
    return dict(body)


def _down_and_refusing(url: str, n: int) -> None:
    body = poll(lambda: _memory_status(url, "down"), 10, "memory to be down")
    assert body["ready"] is False
    assert httpx.get(url + "/readyz").status_code == 503
    planes = body["planes"]
    assert isinstance(planes, dict)
    assert planes["memory"]["reason"] and planes["affect"]["status"] == "ok"
    for attempt in range(4):  # whichever worker answers
        response = upsert(url, [chunk(f"lost-{n}-{attempt}", MARKER)], f"lost-{n}-{attempt}")
        assert response.status_code == 503, response.text
        assert error_of(response)["code"] == "memory.unavailable"
        assert error_of(response)["retryable"] is True
    ok(put(url, [state(f"during-{n}")], f"during-{n}"))
    assert httpx.get(url + "/healthz").status_code == 200


def test_a_replaced_or_truncated_file_is_down_until_the_original_is_back(
    tmp_path: Path,
) -> None:
    with running(tmp_path) as server:
        url = server.url
        path = tmp_path / "data" / "memory.db"
        ids = [f"kept-{i}" for i in range(20)]
        ok(upsert(url, [chunk(cid, MARKER) for cid in ids], "kept"))

        # replaced: the original moved aside (same inode), another file in its place
        aside = tmp_path / "data" / "memory.db.aside"
        os.rename(path, aside)
        path.write_bytes(b"not the database " * 512)
        _down_and_refusing(url, 1)
        os.replace(aside, path)
        poll(lambda: _memory_status(url, "ok"), 10, "memory to be ok after the move back")
        assert revisions(url, "memory", ids) == {cid: 1 for cid in ids}

        # truncated in place: the bytes written back into the same file restore it
        original = path.read_bytes()
        with open(path, "r+b") as handle:
            handle.truncate(0)
        _down_and_refusing(url, 2)
        with open(path, "r+b") as handle:
            handle.write(original)
        poll(lambda: _memory_status(url, "ok"), 10, "memory to be ok after the bytes are back")
        assert revisions(url, "memory", ids) == {cid: 1 for cid in ids}
        ok(upsert(url, [chunk("after")], "after"))

        lost = [f"lost-{n}-{a}" for n in (1, 2) for a in range(4)]
        assert revisions(url, "memory", lost) == {}
        no_traceback_or_content(server, MARKER)
