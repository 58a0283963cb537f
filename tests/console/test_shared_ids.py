"""An affect state and an event may share an id: ticking one of them in a node's records
removes that one, never its namesake of the other kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops import listing
from tests.console.conftest import CTX, DIM, ConsoleProcess, Files, console_on

SHARED = "twin-1"
SCOPE = {"tenant": "ws", "end_user": "bob"}


@pytest.fixture
def twin_files(tmp_path: Path) -> Files:
    files = Files.under(tmp_path)
    open_memory_store(str(files.memory), embedding_dim=DIM).close()
    affect = open_affect_store(str(files.affect))
    affect.put_many([{"id": SHARED, "scope": SCOPE}], idempotency_key="twin-s", ctx=CTX)
    event = {"id": SHARED, "at": "2025-01-01T00:00:00Z", "scope": SCOPE}
    affect.append_events([event], idempotency_key="twin-e", ctx=CTX)
    affect.close()
    return files


@pytest.fixture
def twins(tmp_path: Path, twin_files: Files) -> Iterator[ConsoleProcess]:
    yield from console_on(tmp_path, twin_files)


def _kinds_left(files: Files) -> list[str]:
    affect = open_affect_store(str(files.affect))
    try:
        return [hit["kind"] for hit in listing.get_records(affect, [SHARED])]
    finally:
        affect.close()


@pytest.mark.parametrize("ticked, kept", [("state", "event"), ("event", "state")])
def test_forgetting_a_ticked_record_keeps_its_namesake_of_the_other_kind(
    page: Page, twins: ConsoleProcess, twin_files: Files, ticked: str, kept: str
) -> None:
    page.goto(twins.url)
    page.goto(f"{twins.base}/tree/affect?at=tenant%3Dws")
    page.get_by_label(f"select {ticked} {SHARED}").check()
    page.get_by_role("button", name="Forget selected…").click()
    result = page.locator("#action-result")
    assert result.locator(f'[data-count="affect.{ticked}"]').inner_text() == "1"
    assert result.locator(f'[data-count="affect.{kept}"]').count() == 0
    page.fill("#confirm-phrase", "1")
    result.get_by_role("button", name="Forget 1 record(s)").click()
    result.locator(f'[data-removed="affect.{ticked}"]').wait_for()
    assert result.locator(f'[data-removed="affect.{ticked}"]').inner_text() == "1"
    assert _kinds_left(twin_files) == [kept]
    assert [line["counts"] for line in twins.audit("console.forget")] == [{f"affect.{ticked}": 1}]
