"""Every stored value is drawn so it names itself: ``" bob"`` is not drawn as ``bob``, a
lone blank and the empty origin are visible, and a RIGHT-TO-LEFT OVERRIDE is written as an
escape inside an isolated box instead of reversing the text (``evil`` drawn as ``live``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from tests.console.conftest import CTX, DIM, ConsoleProcess, Files, console_on

RLO = "שלום\u202eevil"
# end_user -> how the page writes it
USERS = {" bob": '" bob"', "bob": "bob", " ": '" "', RLO: '"שלום\\u202eevil"'}


@pytest.fixture
def odd(tmp_path: Path) -> Iterator[ConsoleProcess]:
    files = Files.under(tmp_path)
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    chunks = [
        {
            "id": f"c-{n}",
            "embedding": [0.5] * DIM,
            "scope": {"tenant": "nasty", "end_user": user},
            "origin": "" if n == 0 else "chat",
        }
        for n, user in enumerate(USERS)
    ]
    memory.upsert_many(chunks, idempotency_key="odd", ctx=CTX)
    memory.close()
    open_affect_store(str(files.affect)).close()
    yield from console_on(tmp_path, files)


def isolated(page: Page) -> None:
    """Every value and id on the page is a ``<bdi>`` whose blanks are drawn."""
    boxes = page.locator(".value, .id bdi, bdi.id")
    assert boxes.count() > 0
    for style in boxes.evaluate_all(
        "els => els.map(e => [e.tagName, getComputedStyle(e).unicodeBidi,"
        " getComputedStyle(e).whiteSpace])"
    ):
        assert style == ["BDI", "isolate", "pre-wrap"], style


def test_blank_empty_and_bidi_values_are_drawn_as_themselves(
    page: Page, odd: ConsoleProcess
) -> None:
    page.goto(odd.url)
    page.goto(f"{odd.base}/tree/memory?at=tenant%3Dnasty&by=end_user")
    labels = page.locator(".tree li li > a .value").all_inner_texts()
    assert sorted(labels) == sorted(USERS.values())
    assert "\u202e" not in page.locator(".tree").inner_text()
    isolated(page)

    page.goto(f"{odd.base}/tree/memory?at=tenant%3Dnasty&at=end_user%3D%20bob")
    expect(page.locator("#node-title")).to_contain_text('tenant=nasty end_user=" bob"')
    expect(page.locator(".crumbs")).to_contain_text('end_user=" bob"')
    row = page.locator("table.records tbody tr")
    expect(row.locator("td").nth(3)).to_have_text('" bob"')
    isolated(page)
    page.get_by_role("button", name="Forget this node…").click()
    expect(page.locator("#confirm-title")).to_contain_text('end_user=" bob"')
    expect(page.locator("kbd.phrase")).to_have_text('" bob"')

    page.goto(f"{odd.base}/tree/memory?by=origin")
    empty = page.locator('.tree a:has([data-count="origin="])')
    expect(empty.locator(".value")).to_have_text('""')
    expect(empty).to_have_accessible_name('"" 1 records')
    isolated(page)
