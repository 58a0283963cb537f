"""A removal runs once per confirmation: a double click on the confirm button (or Enter
pressed twice) while the request is in flight sends one request, and the result shows the
counts really removed, not a repeat's zeros."""

from __future__ import annotations

from playwright.sync_api import Page

from tests.console.conftest import CHUNKS, ConsoleProcess, Files
from tests.console.test_browser import stored


def test_a_double_click_on_forget_removes_once_and_shows_the_counts(
    console: ConsoleProcess, files: Files, page: Page
) -> None:
    acme = sum(1 for _, scope, _ in CHUNKS if scope["tenant"] == "acme")
    page.goto(console.url)
    page.goto(f"{console.base}/tree/memory?at=tenant%3Dacme")
    page.get_by_role("button", name="Forget this node…").click()
    page.fill("#confirm-phrase", "acme")
    page.locator("#action-result button.danger").dblclick()
    page.locator("#action-result .removed").wait_for()
    page.wait_for_timeout(500)  # a second answer, were one sent, would land by now
    assert page.locator('[data-removed="memory.chunk"]').inner_text() == str(acme)
    assert [line["counts"] for line in console.audit("console.forget")] == [{"memory.chunk": acme}]
    assert all(c["scope"]["tenant"] != "acme" for c in stored(files)["chunk"])
