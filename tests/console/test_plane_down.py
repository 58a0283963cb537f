"""A plane that is down (its file not a SQLite file, or gone from under a running console)
answers 503 with the reason on every page that needs it, the other plane still renders,
and check still checks the other plane and lists the one down as a problem."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from playwright.sync_api import Page

from ratatoskr.memory.store import open_memory_store
from tests.console.conftest import CHUNKS, DIM, ConsoleProcess, Files, console_on

CSRF = "X-Ratatoskr-CSRF"
# (path, form) of every POST that needs the affect plane
POSTS: list[tuple[str, dict[str, str | float | bool]]] = [
    ("/open/affect", {"id": "s-bob-0"}),
    ("/forget/preview", {"plane": "affect", "mode": "node", "at": "tenant=acme"}),
    (
        "/forget",
        {"plane": "affect", "mode": "node", "at": "tenant=acme", "confirm": "acme", "expect": 1},
    ),
    ("/erase/preview", {"tenant": "acme", "end_user": "alice"}),
    ("/erase", {"tenant": "acme", "end_user": "alice", "confirm": "alice", "expect": 1}),
]


@pytest.fixture
def garbage(tmp_path: Path, files: Files) -> Iterator[ConsoleProcess]:
    """The affect file overwritten with bytes that are no SQLite file, before the start."""
    for suffix in ("-wal", "-shm"):
        Path(f"{files.affect}{suffix}").unlink(missing_ok=True)
    files.affect.write_bytes(os.urandom(64) * 1000)
    yield from console_on(tmp_path, files)


def chunks_left(files: Files) -> int:
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    try:
        return len(memory.get_many([c for c, _, _ in CHUNKS]))
    finally:
        memory.close()


def answers_down(page: Page, console: ConsoleProcess, files: Files, reason: str) -> None:
    """Every page needing the affect plane answers 503 with ``reason``; memory renders, and
    check reports affect's problem beside memory's result."""
    page.goto(console.url)
    overview = page.content()
    assert "health: <strong>down</strong>" in overview and reason in overview
    assert "chunk records" in overview
    memory = page.goto(f"{console.base}/tree/memory?at=tenant%3Dacme")
    assert memory is not None and memory.status == 200
    tree = page.goto(f"{console.base}/tree/affect")
    assert tree is not None and tree.status == 503
    assert reason in page.content() and "the affect plane is down" in page.content()
    csrf = str(page.locator('meta[name="csrf-token"]').get_attribute("content"))
    for path, form in POSTS:
        answer = page.request.post(console.base + path, form=form, headers={CSRF: csrf})
        assert (answer.status, path) == (503, path), answer.text()
        assert reason in answer.text()
    assert chunks_left(files) == len(CHUNKS), "an erase began on the memory plane"
    check = page.goto(f"{console.base}/check")
    assert check is not None and check.status == 200
    assert page.locator("#check-memory").inner_text() == "memory: ok"
    assert page.locator("#check-affect").inner_text() == "affect: 1 problem(s)"
    assert reason in page.locator("section", has=page.locator("#check-affect")).inner_text()


def test_a_plane_file_that_is_no_sqlite_file_is_down(
    page: Page, garbage: ConsoleProcess, files: Files
) -> None:
    answers_down(page, garbage, files, "not a SQLite database")


def test_a_plane_file_removed_under_a_running_console_is_down(
    page: Page, console: ConsoleProcess, files: Files
) -> None:
    page.goto(console.url)
    shown = page.goto(f"{console.base}/tree/affect")
    assert shown is not None and shown.status == 200
    moved = files.affect.parent.parent / "moved"
    moved.mkdir()
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{files.affect}{suffix}")
        if source.exists():
            source.rename(moved / source.name)
    answers_down(page, console, files, "no affect database at")


def test_an_erase_that_fails_on_the_second_plane_shows_and_audits_what_the_first_removed(
    page: Page, console: ConsoleProcess, files: Files
) -> None:
    """The affect plane refuses its deletes after both planes took the empty write erase
    asks first (here a foreign trigger): the memory plane's removal is shown, audited and
    said to be incomplete, with how to finish."""
    page.goto(console.url)
    csrf = str(page.locator('meta[name="csrf-token"]').get_attribute("content"))
    subject: dict[str, str | float | bool] = {"tenant": "acme", "end_user": "alice"}
    preview = page.request.post(console.base + "/erase/preview", form=subject, headers={CSRF: csrf})
    expect = re.search(r'name="expect" value="(\d+)"', preview.text())
    assert expect is not None
    conn = apsw.Connection(str(files.affect))
    conn.execute(
        "CREATE TRIGGER refuse BEFORE DELETE ON affect_states BEGIN "
        "SELECT RAISE(ABORT, 'refused by a trigger'); END"
    )
    conn.close()
    form = {**subject, "confirm": "alice", "expect": expect.group(1)}
    answer = page.request.post(console.base + "/erase", form=form, headers={CSRF: csrf})
    assert answer.status == 503
    assert "erase incomplete: memory erased, the affect plane not" in answer.text()
    assert "run the same erase again" in answer.text()
    alice = [c for c, scope, _ in CHUNKS if scope.get("end_user") == "alice"]
    assert chunks_left(files) == len(CHUNKS) - len(alice)
    audited = console.audit("console.erase")
    assert audited and audited[-1]["counts"]["memory.chunk"] == len(alice)
