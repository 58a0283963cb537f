""" "Forget selected…" removes only the ticked records still at the node they were ticked
on: one a writer moved to another subject since the page was drawn (or an id sent by hand
from outside the node) is left out, counted, and kept."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from ratatoskr.memory.store import open_memory_store
from tests.console.conftest import CTX, DIM, ConsoleProcess, Files
from tests.console.test_browser import stored


def test_a_ticked_record_moved_to_another_subject_is_not_forgotten(
    console: ConsoleProcess, files: Files, page: Page
) -> None:
    page.goto(console.url)
    page.goto(f"{console.base}/tree/memory?at=tenant%3Dacme&at=end_user%3Dalice")
    for cid in ("c-alice-2", "c-alice-3"):
        page.get_by_label(f"select chunk {cid}").check()
    writer = open_memory_store(str(files.memory), embedding_dim=DIM)
    moved = {
        "id": "c-alice-2",
        "embedding": [0.5] * DIM,
        "scope": {"tenant": "beta", "end_user": "zed"},
    }
    writer.upsert_many([moved], idempotency_key="move-alice-2", ctx=CTX)
    writer.close()

    page.get_by_role("button", name="Forget selected…").click()
    result = page.locator("#action-result")
    expect(result.locator('[data-count="memory.chunk"]')).to_have_text("1")
    expect(result.get_by_role("status")).to_contain_text("1 of the ticked records are no longer")
    page.get_by_label(re.compile("Type the number of selected records")).fill("2")
    result.get_by_role("button", name="Forget 1 record(s)").click()
    expect(result.locator('[data-removed="memory.chunk"]')).to_have_text("1")
    left = {r["id"]: r["scope"] for r in stored(files)["chunk"]}
    assert "c-alice-3" not in left
    assert left["c-alice-2"] == {"tenant": "beta", "end_user": "zed"}


def test_an_id_from_outside_the_node_is_left_out(console: ConsoleProcess, page: Page) -> None:
    page.goto(console.url)
    csrf = str(page.locator('meta[name="csrf-token"]').get_attribute("content"))
    form = "plane=memory&mode=ids&at=tenant%3Dacme&at=end_user%3Dalice&id=chunk%3Ac-carol-0"
    answer = page.request.post(
        f"{console.base}/forget/preview",
        data=form,
        headers={"X-Ratatoskr-CSRF": csrf, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status == 200
    assert 'data-count="memory.chunk">0<' in answer.text()
    assert "Nothing to remove" in answer.text() and "1 of the ticked records" in answer.text()
