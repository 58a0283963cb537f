"""The console from the keyboard alone, labelled for screen readers, and laid out for a
laptop screen; the affect tree drills by scope axes and by kind."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.console.conftest import EVENTS, STATES, ConsoleProcess, Files
from tests.console.test_browser import brute, buckets, follow, no_content, stored, tree_link

# every visible control must have a name a screen reader can say
UNNAMED = """() => [...document.querySelectorAll('a, button, input, select, textarea')]
  .filter(el => el.type !== 'hidden' && el.getClientRects().length > 0)
  .filter(el => {
    const named = el.getAttribute('aria-label') || (el.labels && el.labels.length)
      || el.textContent.trim();
    return !named;
  })
  .map(el => el.outerHTML)"""
TABLES_WITHOUT_CAPTION = (
    "() => [...document.querySelectorAll('table')].filter(t => !t.caption).length"
)
OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


def accessible(page: Page) -> None:
    assert page.evaluate(UNNAMED) == []
    assert page.evaluate(TABLES_WITHOUT_CAPTION) == 0
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.locator("h1").count() == 1
    assert page.evaluate(OVERFLOW) <= 0, "the page scrolls sideways"


def test_the_console_works_from_the_keyboard(
    console: ConsoleProcess, files: Files, page: Page
) -> None:
    page.goto(console.url)
    accessible(page)
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()

    nav = page.get_by_role("navigation", name="Sections")
    nav.get_by_role("link", name="Memory").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/tree/memory$"))
    for value in ("acme", "bob"):
        tree_link(page, value).focus()
        with page.expect_navigation():
            page.keyboard.press("Enter")
    expect(page.locator('.tree a[aria-current="page"]')).to_contain_text("bob")
    accessible(page)

    # open a record and close it again without a mouse
    page.get_by_role("button", name="open chunk c-bob-0").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#record-title")).to_be_focused()
    accessible(page)
    page.keyboard.press("Escape")
    expect(page.locator("#record-view")).to_be_hidden()
    expect(page.locator("main")).to_be_focused()
    no_content(page)

    # forget the node: the confirmation field takes the focus, Enter submits it
    page.get_by_role("button", name="Forget this node…").focus()
    page.keyboard.press("Enter")
    confirm = page.get_by_label(re.compile("Type the node's value"))
    expect(confirm).to_be_focused()
    accessible(page)
    page.keyboard.type("bob")
    page.keyboard.press("Enter")
    expect(page.locator("#removed-title")).to_be_focused()
    expect(page.locator('[data-removed="memory.chunk"]')).to_have_text("4")
    assert not [r for r in stored(files)["chunk"] if r["id"].startswith("c-bob-")]

    for path in ("/", "/erase", "/check", "/tree/affect"):
        page.goto(console.base + path)
        accessible(page)
    expect(
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Check")
    ).to_be_visible()
    page.goto(console.base + "/check")
    expect(page.get_by_role("status")).to_have_text("check passed")
    expect(page.get_by_role("heading", name="memory: ok")).to_be_visible()
    page.set_viewport_size({"width": 1024, "height": 700})
    page.goto(console.base + "/tree/memory?at=tenant%3Dacme&at=end_user%3Dalice&by=origin")
    accessible(page)


def test_the_affect_tree_drills_by_scope_and_kind(
    console: ConsoleProcess, files: Files, page: Page
) -> None:
    records = [{**r, "kind": "state"} for r in stored(files)["state"]]
    records += [{**r, "kind": "event"} for r in stored(files)["event"]]
    page.goto(console.url.replace("/?", "/tree/affect?"))
    assert buckets(page, "tenant") == brute(records, "tenant")[0]
    follow(tree_link(page, "acme"))
    assert buckets(page, "end_user") == brute(records, "end_user", tenant="acme")[0]
    follow(tree_link(page, "bob"))
    follow(page.locator(".group-by").get_by_role("link", name="kind"))
    bob = [r for r in records if r["scope"].get("end_user") == "bob"]
    assert (
        buckets(page, "kind")
        == {"event": 4, "state": 3}
        == {k: sum(1 for r in bob if r["kind"] == k) for k in ("event", "state")}
    )
    follow(tree_link(page, "event"))
    expect(page.locator("table.records tbody tr")).to_have_count(4)
    assert page.locator("table.records thead").inner_text().split()[1:3] == ["kind", "id"]
    no_content(page)
    assert len(STATES) + len(EVENTS) == len(records)


def test_buckets_cut_by_the_limit_are_counted_and_reachable(
    console: ConsoleProcess, files: Files, page: Page
) -> None:
    chunks = stored(files)["chunk"]
    page.goto(console.url.replace("/?", "/tree/memory?limit=1&"))
    assert buckets(page, "tenant") == {"acme": 12}
    summary = page.locator(".tree .summary").last
    expect(summary).to_contain_text("total 17 · missing 0 · more buckets 1")
    follow(summary.get_by_role("link", name="show up to 5"))
    assert buckets(page, "tenant") == brute(chunks, "tenant")[0]
    # a node whose value the limit cut from its siblings is still drawn, with its count
    page.goto(console.base + "/tree/memory?at=tenant%3Dbeta&limit=1")
    assert buckets(page, "tenant") == {"acme": 12, "beta": 5}
    expect(page.locator('.tree a[aria-current="page"]')).to_contain_text("beta")
