"""Blank and empty values are values: a node whose end_user is one blank, or whose origin is
the empty string, is forgotten (or erased) as itself, confirmed by a phrase that can be
typed, and never widened to the subject around it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops import listing
from tests.console.conftest import CTX, DIM, ConsoleProcess, Files, console_on

# (id, scope, origin)
CHUNKS: list[tuple[str, dict[str, str], str]] = [
    ("b-blank", {"tenant": "blanky", "end_user": " "}, "chat"),
    ("b-keep", {"tenant": "blanky", "end_user": "keepme"}, "chat"),
    ("b-none", {"tenant": "blanky"}, "chat"),
    ("o-empty", {"tenant": "orig"}, ""),
    ("o-doc", {"tenant": "orig"}, "doc"),
]
STATES = [("s-blank", {"tenant": "blanky", "end_user": " "}), ("s-keep", {"tenant": "blanky"})]
EVERYTHING = {c for c, _, _ in CHUNKS} | {s for s, _ in STATES}


@pytest.fixture
def blank_files(tmp_path: Path) -> Files:
    files = Files.under(tmp_path)
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    chunks = [
        {"id": cid, "embedding": [0.5] * DIM, "scope": scope, "origin": origin}
        for cid, scope, origin in CHUNKS
    ]
    memory.upsert_many(chunks, idempotency_key="blank-chunks", ctx=CTX)
    memory.close()
    affect = open_affect_store(str(files.affect))
    affect.put_many(
        [{"id": sid, "scope": scope} for sid, scope in STATES], idempotency_key="blank", ctx=CTX
    )
    affect.close()
    return files


@pytest.fixture
def blanks(tmp_path: Path, blank_files: Files) -> Iterator[ConsoleProcess]:
    yield from console_on(tmp_path, blank_files)


def left(files: Files) -> set[str]:
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    affect = open_affect_store(str(files.affect))
    try:
        chunks: list[dict[str, Any]] = memory.get_many([c for c, _, _ in CHUNKS])
        hits = listing.get_records(affect, [s for s, _ in STATES])
    finally:
        memory.close()
        affect.close()
    return {c["id"] for c in chunks} | {h["record"]["id"] for h in hits}


def confirm(page: Page, phrase: str, button: str) -> None:
    """Type ``phrase`` as the page asks for it and press the removal button."""
    result = page.locator("#action-result")
    expect(result.locator("kbd.phrase")).to_have_text(phrase)
    result.locator("#confirm-phrase").fill(phrase)
    result.get_by_role("button", name=button).click()
    result.locator(".removed").wait_for()


@pytest.mark.parametrize(
    ("node", "phrase", "gone"),
    [
        ("at=tenant%3Dblanky&at=end_user%3D%20", '" "', "b-blank"),
        ("at=tenant%3Dorig&at=origin%3D", '""', "o-empty"),
    ],
)
def test_a_node_whose_value_is_blank_or_empty_can_be_forgotten(
    page: Page, blanks: ConsoleProcess, blank_files: Files, node: str, phrase: str, gone: str
) -> None:
    page.goto(blanks.url)
    page.goto(f"{blanks.base}/tree/memory?{node}")
    assert page.locator("table.records td.id").all_inner_texts() == [gone]
    page.get_by_role("button", name="Forget this node…").click()
    confirm(page, phrase, "Forget 1 record(s)")
    expect(page.locator('[data-removed="memory.chunk"]')).to_have_text("1")
    assert left(blank_files) == EVERYTHING - {gone}


def count_erase(page: Page) -> None:
    page.get_by_role("button", name="Count what would be erased").click()
    page.locator("#action-result [data-count]").first.wait_for()


def test_erasing_from_a_node_whose_value_is_blank_erases_that_subject_only(
    page: Page, blanks: ConsoleProcess, blank_files: Files
) -> None:
    page.goto(blanks.url)
    page.goto(f"{blanks.base}/tree/memory?at=tenant%3Dblanky&at=end_user%3D%20")
    with page.expect_navigation():
        page.get_by_role("link", name="Erase this subject from both planes…").click()
    assert page.locator("#subject-end_user").input_value() == " "
    count_erase(page)
    expect(page.locator('[data-count="memory.chunk"]')).to_have_text("1")
    expect(page.locator('[data-count="affect.state"]')).to_have_text("1")
    confirm(page, '" "', "Erase 2 record(s)")
    assert left(blank_files) == EVERYTHING - {"b-blank", "s-blank"}


def test_a_subject_of_one_blank_value_alone_can_be_erased(
    page: Page, blanks: ConsoleProcess, blank_files: Files
) -> None:
    """As ``admin erase --scope "end_user= "``: a blank is a value, only an empty field is
    no axis."""
    page.goto(blanks.url)
    page.goto(f"{blanks.base}/erase")
    page.get_by_label("end_user").fill(" ")
    count_erase(page)
    expect(page.locator('[data-count="memory.chunk"]')).to_have_text("1")
    confirm(page, '" "', "Erase 2 record(s)")
    assert left(blank_files) == EVERYTHING - {"b-blank", "s-blank"}
