"""A dry run's and a removal's heading say what is (or was) removed, as its table counts
it: ticked records left out (moved to another subject, or from outside the node) are not
counted in it, and an erase names the planes it reached."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from playwright.sync_api import Page, expect
from starlette.testclient import TestClient

from ratatoskr.console.app import create_console_app
from ratatoskr.console.auth import Secret
from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops.stores import Paths, Stores
from tests.console.conftest import CTX, DIM, ConsoleProcess, Files

CSRF = "X-Ratatoskr-CSRF"
ALICE = "at=tenant%3Dacme&at=end_user%3Dalice"


def heading(html: str) -> str:
    found = re.search(r"<h2 id=\"(?:confirm|removed)-title\"[^>]*>(.*?)</h2>", html, re.S)
    assert found is not None, html
    return " ".join(re.sub(r"<[^>]+>", "", found.group(1)).split())


def test_a_selection_with_a_record_moved_away_is_headed_by_what_is_removed(
    console: ConsoleProcess, files: Files, page: Page
) -> None:
    page.goto(console.url)
    page.goto(f"{console.base}/tree/memory?{ALICE}")
    for cid in ("c-alice-2", "c-alice-3"):
        page.get_by_label(f"select chunk {cid}").check()
    writer = open_memory_store(str(files.memory), embedding_dim=DIM)
    moved = {"id": "c-alice-2", "embedding": [0.5] * DIM, "scope": {"tenant": "beta"}}
    writer.upsert_many([moved], idempotency_key="move-alice-2", ctx=CTX)
    writer.close()

    page.get_by_role("button", name="Forget selected…").click()
    result = page.locator("#action-result")
    expect(result.locator("#confirm-title")).to_have_text("Forget 1 of 2 selected memory record(s)")
    page.get_by_label(re.compile("Type the number of selected records")).fill("2")
    result.get_by_role("button", name="Forget 1 record(s)").click()
    expect(result.locator("#removed-title")).to_have_text(
        "Removed: 1 of 2 selected memory record(s)"
    )
    expect(result.locator('[data-removed="memory.chunk"]')).to_have_text("1")


def test_a_selection_removed_whole_is_headed_by_its_count(
    console: ConsoleProcess, page: Page
) -> None:
    page.goto(console.url)
    page.goto(f"{console.base}/tree/memory?{ALICE}")
    for cid in ("c-alice-2", "c-alice-3"):
        page.get_by_label(f"select chunk {cid}").check()
    page.get_by_role("button", name="Forget selected…").click()
    result = page.locator("#action-result")
    expect(result.locator("#confirm-title")).to_have_text("Forget 2 selected memory record(s)")
    page.get_by_label(re.compile("Type the number of selected records")).fill("2")
    result.get_by_role("button", name="Forget 2 record(s)").click()
    expect(result.locator("#removed-title")).to_have_text("Removed: 2 selected memory record(s)")


@pytest.fixture
def client(files: Files) -> Iterator[tuple[TestClient, dict[str, str]]]:
    secret = Secret.fresh(1)
    stores = Stores(Paths(str(files.memory), str(files.affect)))
    app = create_console_app(stores, secret, operator="x")
    try:
        with TestClient(app, cookies={secret.cookie: secret.value}) as test_client:
            yield test_client, {CSRF: secret.csrf}
    finally:
        stores.close()


def test_an_id_sent_from_outside_the_node_is_not_counted_in_the_heading(
    client: tuple[TestClient, dict[str, str]],
) -> None:
    """The tester's request: one ticked id of another tenant beside one at the node."""
    http, headers = client
    form = {
        "plane": "memory",
        "mode": "ids",
        "at": "tenant=acme",
        "id": ["chunk:c-beta-bob-0", "chunk:c-acme-0"],
    }
    preview = http.post("/forget/preview", data=form, headers=headers)
    assert preview.status_code == 200
    assert heading(preview.text) == "Forget 1 of 2 selected memory record(s)"
    done = http.post("/forget", data={**form, "expect": "1", "confirm": "2"}, headers=headers)
    assert done.status_code == 200, done.text
    assert heading(done.text) == "Removed: 1 of 2 selected memory record(s)"
    assert 'data-removed="memory.chunk">1<' in done.text


def test_an_erase_on_the_one_plane_there_names_that_plane(tmp_path: Path, files: Files) -> None:
    """A console started without an affect file erases from memory alone, and says so."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{files.affect}{suffix}").unlink(missing_ok=True)
    secret = Secret.fresh(1)
    stores = Stores(Paths(str(files.memory), str(files.affect)))
    app = create_console_app(stores, secret, operator="x")
    headers = {CSRF: secret.csrf}
    subject = {"tenant": "acme", "end_user": "bob"}
    try:
        with TestClient(app, cookies={secret.cookie: secret.value}) as http:
            preview = http.post("/erase/preview", data=subject, headers=headers)
            assert preview.status_code == 200
            assert (
                heading(preview.text)
                == "Erase subject tenant=acme end_user=bob from the memory plane"
            )
            form = {**subject, "confirm": "bob", "expect": "4"}
            done = http.post("/erase", data=form, headers=headers)
            assert done.status_code == 200, done.text
            assert (
                heading(done.text)
                == "Removed: subject tenant=acme end_user=bob from the memory plane"
            )
    finally:
        stores.close()


def test_an_erase_on_both_planes_says_both(
    client: tuple[TestClient, dict[str, str]],
) -> None:
    http, headers = client
    subject = {"tenant": "acme", "end_user": "bob"}
    preview = http.post("/erase/preview", data=subject, headers=headers)
    assert heading(preview.text) == "Erase subject tenant=acme end_user=bob from both planes"
    found = re.search(r'name="expect" value="(\d+)"', preview.text)
    assert found is not None
    done = http.post(
        "/erase", data={**subject, "confirm": "bob", "expect": found.group(1)}, headers=headers
    )
    assert heading(done.text) == "Removed: subject tenant=acme end_user=bob from both planes"


def test_an_incomplete_erase_is_headed_by_the_plane_it_erased(
    client: tuple[TestClient, dict[str, str]], files: Files
) -> None:
    http, headers = client
    subject = {"tenant": "acme", "end_user": "bob"}
    preview = http.post("/erase/preview", data=subject, headers=headers)
    found = re.search(r'name="expect" value="(\d+)"', preview.text)
    assert found is not None
    conn = apsw.Connection(str(files.affect))
    conn.execute(
        "CREATE TRIGGER refuse BEFORE DELETE ON affect_states BEGIN "
        "SELECT RAISE(ABORT, 'refused by a trigger'); END"
    )
    conn.close()
    done = http.post(
        "/erase", data={**subject, "confirm": "bob", "expect": found.group(1)}, headers=headers
    )
    assert done.status_code == 503
    assert heading(done.text) == "Removed: subject tenant=acme end_user=bob from the memory plane"
    assert "erase incomplete: memory erased, the affect plane not" in done.text
