"""Scope values are taken exactly as stored: a subject whose value has surrounding blanks
(`` bob``, a different subject from ``bob``) is counted, confirmed and erased as itself,
from its node in the tree, and never as the subject its value looks like."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops import listing
from tests.console.conftest import CTX, DIM, ConsoleProcess, Files, console_on

SPACED = " bob"
# (id, end_user): two subjects that a page shows alike
CHUNKS = [("c-spaced-0", SPACED), ("c-bob-0", "bob"), ("c-bob-1", "bob")]
STATES = [("s-spaced-0", SPACED), ("s-bob-0", "bob")]


@pytest.fixture
def spaced_files(tmp_path: Path) -> Files:
    files = Files.under(tmp_path)
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    chunks = [
        {"id": cid, "embedding": [0.5] * DIM, "scope": {"tenant": "ws", "end_user": user}}
        for cid, user in CHUNKS
    ]
    memory.upsert_many(chunks, idempotency_key="spaced-chunks", ctx=CTX)
    memory.close()
    affect = open_affect_store(str(files.affect))
    states = [{"id": sid, "scope": {"tenant": "ws", "end_user": user}} for sid, user in STATES]
    affect.put_many(states, idempotency_key="spaced-states", ctx=CTX)
    affect.close()
    return files


@pytest.fixture
def spaced(tmp_path: Path, spaced_files: Files) -> Iterator[ConsoleProcess]:
    yield from console_on(tmp_path, spaced_files)


def _left(files: Files) -> set[str]:
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    affect = open_affect_store(str(files.affect))
    try:
        chunks: list[dict[str, Any]] = memory.get_many([c for c, _ in CHUNKS])
        hits = listing.get_records(affect, [s for s, _ in STATES])
    finally:
        memory.close()
        affect.close()
    return {c["id"] for c in chunks} | {h["record"]["id"] for h in hits}


def _node(page: Page, spaced: ConsoleProcess) -> None:
    page.goto(spaced.url)
    page.goto(f"{spaced.base}/tree/memory?at=tenant%3Dws&at=end_user%3D%20bob")
    assert page.locator("table.records td.id").all_inner_texts() == ["c-spaced-0"]


def test_erasing_a_subject_from_its_node_erases_that_subject(
    page: Page, spaced: ConsoleProcess, spaced_files: Files
) -> None:
    _node(page, spaced)
    with page.expect_navigation():
        page.get_by_role("link", name="Erase this subject from both planes…").click()
    assert page.locator("#subject-end_user").input_value() == SPACED
    page.get_by_role("button", name="Count what would be erased").click()
    counts = page.locator("#action-result [data-count]")
    counts.first.wait_for()
    assert page.locator('[data-count="memory.chunk"]').inner_text() == "1"
    assert page.locator('[data-count="affect.state"]').inner_text() == "1"
    page.fill("#confirm-phrase", '" bob"')
    page.locator("#action-result button.danger").click()
    page.locator("#action-result .removed").wait_for()
    assert page.locator('[data-removed="memory.chunk"]').inner_text() == "1"
    assert _left(spaced_files) == {"c-bob-0", "c-bob-1", "s-bob-0"}


def test_forgetting_a_node_whose_value_has_blanks_can_be_confirmed(
    page: Page, spaced: ConsoleProcess, spaced_files: Files
) -> None:
    _node(page, spaced)
    page.get_by_role("button", name="Forget this node…").click()
    page.locator("#confirm-phrase").wait_for()
    page.fill("#confirm-phrase", '" bob"')
    page.locator("#action-result button.danger").click()
    page.locator("#action-result .removed").wait_for()
    assert page.locator('[data-removed="memory.chunk"]').inner_text() == "1"
    assert _left(spaced_files) == {"c-bob-0", "c-bob-1", "s-spaced-0", "s-bob-0"}
