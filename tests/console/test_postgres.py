"""The console on PostgreSQL URLs (``--memory-db postgresql://...``): every page renders
from what the PostgreSQL stores report, and no page, error or message names a URL with its
password."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from starlette.testclient import TestClient

from ratatoskr.cli import main
from ratatoskr.console.app import create_console_app
from ratatoskr.console.auth import Secret
from ratatoskr.ops import listing
from ratatoskr.ops.locations import open_affect, open_memory
from ratatoskr.ops.stores import Paths, Stores
from tests.backends import postgres_schema
from tests.console.conftest import (
    CHUNKS,
    CTX,
    DIM,
    EVENTS,
    MARKER,
    STATES,
    ConsoleProcess,
    Files,
    marker,
    write_records,
)

PASSWORD = "Pw-QZXV-console"


def _with_password(url: str) -> str:
    # the test cluster trusts local connections: the password is only carried, never checked
    assert url.startswith("postgresql://postgres@")
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{PASSWORD}@", 1)


@pytest.fixture
def memory_url() -> str:
    url = _with_password(postgres_schema("console"))
    memory = open_memory(url, embedding_dim=DIM)
    chunks = [
        {"id": f"c-{i}", "embedding": [0.5] * DIM, "scope": {"tenant": "acme", "end_user": "u"}}
        for i in range(3)
    ]
    memory.upsert_many(chunks, idempotency_key="console-pg", ctx=CTX)
    memory.close()
    return url


def test_the_pages_render_on_postgresql_without_the_password(memory_url: str) -> None:
    empty = _with_password(postgres_schema("console_empty"))  # no affect plane in it
    secret = Secret.fresh(1)
    stores = Stores(Paths(memory_url, empty))
    app = create_console_app(stores, secret, operator="x")
    try:
        with TestClient(app, cookies={secret.cookie: secret.value}) as client:
            overview = client.get("/")
            assert overview.status_code == 200, overview.text
            assert "chunk records" in overview.text and "No database at" in overview.text
            tree = client.get("/tree/memory", params={"at": "tenant=acme"})
            assert tree.status_code == 200 and "c-2" in tree.text
            assert client.get("/check").status_code == 200
            absent = client.get("/tree/affect")
            assert absent.status_code == 404 and "no affect database" in absent.text
            for answer in (overview, tree, absent):
                assert PASSWORD not in answer.text
                assert "postgres:***@" in answer.text or answer is tree
    finally:
        stores.close()


def test_a_start_on_no_database_does_not_print_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    empty = _with_password(postgres_schema("console_none"))
    assert main(["admin", "ui", "--port", "0", "--memory-db", empty, "--affect-db", empty]) == 2
    out, err = capsys.readouterr()
    assert "no memory or affect plane in the database at" in err and "postgres:***@" in err
    assert PASSWORD not in out + err


def test_a_plane_that_cannot_be_reached_is_shown_down(files: Files) -> None:
    """The overview still draws, the unreachable plane down with the reason; its pages
    answer 503 (retry later), not a refusal of the operator's input."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    nowhere = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/nowhere"
    secret = Secret.fresh(1)
    stores = Stores(Paths(str(files.memory), nowhere))
    app = create_console_app(stores, secret, operator="x")
    try:
        with TestClient(app, cookies={secret.cookie: secret.value}) as client:
            overview = client.get("/")
            assert overview.status_code == 200, overview.text
            assert "health: <strong>ok</strong>" in overview.text
            assert "health: <strong>down</strong> — store unavailable" in overview.text
            assert client.get("/tree/memory").status_code == 200
            absent = client.get("/tree/affect")
            assert absent.status_code == 503 and "Store unavailable" in absent.text
            for answer in (overview, absent):
                assert PASSWORD not in answer.text and "postgres:***@" in answer.text
    finally:
        stores.close()


def test_the_console_starts_when_a_database_cannot_be_reached(
    tmp_path: Path, memory_url: str, page: Page
) -> None:
    """The memory plane on a real PostgreSQL, the affect plane on a server that is not
    there: the console starts, shows affect down with the reason and memory whole, and
    affect's pages answer 503."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    nowhere = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/nowhere"
    files = Files.under(tmp_path)
    args = ("--memory-db", memory_url, "--affect-db", nowhere)
    console = ConsoleProcess(tmp_path, files, args)
    try:
        assert "warning: the affect plane is down" in console.stderr_path.read_text()
        page.goto(console.url)
        overview = page.content()
        assert "health: <strong>ok</strong>" in overview and "chunk records" in overview
        assert "health: <strong>down</strong> — store unavailable" in overview
        memory = page.goto(f"{console.base}/tree/memory?at=tenant%3Dacme")
        assert memory is not None and memory.status == 200
        assert page.locator("table.records td.id").all_inner_texts() == ["c-0", "c-1", "c-2"]
        affect = page.goto(f"{console.base}/tree/affect")
        assert affect is not None and affect.status == 503
        assert "cannot be reached" in page.content() and PASSWORD not in page.content()
        assert PASSWORD not in console.stdout() + console.stderr_path.read_text()
    finally:
        assert console.stop() == 0, console.stderr_path.read_text()


def _held(memory_url: str, affect_url: str) -> dict[str, list[str]]:
    """The ids each kind holds now, read back through the PostgreSQL stores."""
    memory = open_memory(memory_url, embedding_dim=DIM)
    affect = open_affect(affect_url)
    try:
        chunks = [c["id"] for c in memory.get_many([c[0] for c in CHUNKS])]
        hits = listing.get_records(affect, [s[0] for s in STATES] + [e[0] for e in EVENTS])
    finally:
        memory.close()
        affect.close()
    return {
        "chunk": sorted(chunks),
        "state": sorted(h["id"] for h in hits if h["kind"] == "state"),
        "event": sorted(h["id"] for h in hits if h["kind"] == "event"),
    }


def _confirm(page: Page, phrase: str) -> None:
    result = page.locator("#action-result")
    result.locator("#confirm-phrase").fill(phrase)
    result.locator("button.danger").click()


def test_open_forget_and_erase_on_postgresql(tmp_path: Path, page: Page) -> None:
    """Both planes on PostgreSQL, in Chromium: a record opens with its content and one
    audit line, a node's forget removes its chunks alone, and an erase removes the subject
    from both planes; each count is read back from the PostgreSQL stores."""
    memory_url = _with_password(postgres_schema("console_acts_memory"))
    affect_url = _with_password(postgres_schema("console_acts_affect"))
    write_records(open_memory(memory_url, embedding_dim=DIM), open_affect(affect_url))
    before = _held(memory_url, affect_url)
    args = ("--memory-db", memory_url, "--affect-db", affect_url)
    console = ConsoleProcess(tmp_path, Files.under(tmp_path), args)
    try:
        page.goto(console.url)
        assert MARKER not in page.content()
        page.goto(f"{console.base}/tree/memory?at=tenant%3Dacme&at=end_user%3Dalice")
        page.get_by_role("button", name="open chunk c-alice-0").click()
        expect(page.locator("#record-view")).to_contain_text(marker("c-alice-0"))
        opened = console.audit("console.record_opened")
        assert [(o["record_id"], o["plane"]) for o in opened] == [("c-alice-0", "memory")]
        page.keyboard.press("Escape")

        page.goto(f"{console.base}/tree/memory?at=tenant%3Dacme&at=end_user%3Dbob")
        page.get_by_role("button", name="Forget this node…").click()
        result = page.locator("#action-result")
        expect(result.locator('[data-count="memory.chunk"]')).to_have_text("4")
        _confirm(page, "bob")
        expect(result.locator('[data-removed="memory.chunk"]')).to_have_text("4")
        after_forget = _held(memory_url, affect_url)
        assert after_forget["chunk"] == [c for c in before["chunk"] if not c.startswith("c-bob")]
        assert after_forget["state"] == before["state"]  # a memory node: one plane

        page.goto(f"{console.base}/erase?tenant=acme&end_user=alice")
        page.get_by_role("button", name="Count what would be erased").click()
        alice = {k: [i for i in v if "-alice-" in i] for k, v in after_forget.items()}
        for plane, kind in (("memory", "chunk"), ("affect", "state"), ("affect", "event")):
            count = result.locator(f'[data-count="{plane}.{kind}"]')
            expect(count).to_have_text(str(len(alice[kind])))
        assert _held(memory_url, affect_url) == after_forget  # a dry run
        _confirm(page, "alice")
        for plane, kind in (("memory", "chunk"), ("affect", "state"), ("affect", "event")):
            removed = result.locator(f'[data-removed="{plane}.{kind}"]')
            expect(removed).to_have_text(str(len(alice[kind])))
        after = _held(memory_url, affect_url)
        assert after == {k: [i for i in v if i not in alice[k]] for k, v in after_forget.items()}
        assert all(alice.values())  # each kind had some of the subject's records
        logged = console.stdout() + console.stderr_path.read_text()
        assert PASSWORD not in logged and MARKER not in logged
    finally:
        assert console.stop() == 0, console.stderr_path.read_text()
