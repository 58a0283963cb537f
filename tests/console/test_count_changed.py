"""A confirmation carries the dry run's total: when a writer changed what the node or
subject holds before the operator confirmed, nothing is removed and the new dry run is
shown to confirm again."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from tests.console.conftest import CTX, DIM, ConsoleProcess, Files

BOB = {"tenant": "acme", "end_user": "bob"}


def _bobs(files: Files) -> int:
    """acme's bob chunks, the one a writer adds included."""
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    try:
        return len(memory.get_many([f"c-bob-{i}" for i in range(4)] + ["c-bob-new"]))
    finally:
        memory.close()


def _add_chunk(files: Files) -> None:
    writer = open_memory_store(str(files.memory), embedding_dim=DIM)
    chunk = {"id": "c-bob-new", "embedding": [0.5] * DIM, "scope": BOB}
    writer.upsert_many([chunk], idempotency_key="bob-new", ctx=CTX)
    writer.close()


def _confirm(page: Page, phrase: str) -> None:
    result = page.locator("#action-result")
    result.locator("#confirm-phrase").fill(phrase)
    result.locator("button.danger").click()


def test_a_forget_refuses_when_the_count_changed_and_shows_the_new_one(
    console: ConsoleProcess, files: Files, page: Page
) -> None:
    page.goto(console.url)
    page.goto(f"{console.base}/tree/memory?at=tenant%3Dacme&at=end_user%3Dbob")
    page.get_by_role("button", name="Forget this node…").click()
    result = page.locator("#action-result")
    expect(result.locator('[data-count="memory.chunk"]')).to_have_text("4")
    _add_chunk(files)
    _confirm(page, "bob")
    changed = "the count changed since the dry run (4 then, 5 now)"
    expect(result.get_by_role("alert")).to_contain_text(changed)
    expect(result.locator('[data-count="memory.chunk"]')).to_have_text("5")
    assert _bobs(files) == 5
    _confirm(page, "bob")
    expect(result.locator('[data-removed="memory.chunk"]')).to_have_text("5")
    assert _bobs(files) == 0


def test_an_erase_refuses_when_the_count_changed(
    console: ConsoleProcess, files: Files, page: Page
) -> None:
    page.goto(console.url)
    page.goto(f"{console.base}/erase?tenant=acme&end_user=bob")
    page.get_by_role("button", name="Count what would be erased").click()
    result = page.locator("#action-result")
    expect(result.locator('[data-count="affect.state"]')).to_have_text("3")
    affect = open_affect_store(str(files.affect))
    affect.put_many([{"id": "s-bob-new", "scope": BOB}], idempotency_key="s-new", ctx=CTX)
    affect.close()
    _confirm(page, "bob")
    expect(result.get_by_role("alert")).to_contain_text("the count changed")
    expect(result.locator('[data-count="affect.state"]')).to_have_text("4")
    assert _bobs(files) == 4 and console.audit("console.erase") == []
