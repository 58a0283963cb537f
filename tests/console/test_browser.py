"""The console in Chromium, on real store files: explore, narrow, list, open a record,
forget with confirmation, erase a subject; every count checked against the store, and no
content on any page until a record is opened.

``RATATOSKR_CONSOLE_SCREENSHOTS=docs/console`` saves the main views there (what
docs/operations.md shows); otherwise they go to the test's tmp_path.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from playwright.sync_api import Locator, Page, expect

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops import listing
from tests.console.conftest import (
    CHUNKS,
    DIM,
    EVENTS,
    MARKER,
    OPERATOR,
    STATES,
    ConsoleProcess,
    Files,
    marker,
)

SHOTS_ENV = "RATATOSKR_CONSOLE_SCREENSHOTS"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get(SHOTS_ENV) or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def stored(files: Files) -> dict[str, list[dict[str, Any]]]:
    """What the files hold now, read back by id through the stores."""
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    affect = open_affect_store(str(files.affect))
    try:
        chunks = memory.get_many([c[0] for c in CHUNKS])
        hits = listing.get_records(affect, [s[0] for s in STATES] + [e[0] for e in EVENTS])
    finally:
        memory.close()
        affect.close()
    return {
        "chunk": chunks,
        "state": [h["record"] for h in hits if h["kind"] == "state"],
        "event": [h["record"] for h in hits if h["kind"] == "event"],
    }


def brute(records: list[dict[str, Any]], facet: str, **scope: str) -> tuple[dict[str, int], int]:
    """Bucket counts and missing of ``facet`` over the records whose scope holds ``scope``."""
    counts: Counter[str] = Counter()
    missing = 0
    for r in records:
        if any(r["scope"].get(k) != v for k, v in scope.items()):
            continue
        value = r.get("origin") if facet == "origin" else r["scope"].get(facet)
        if value is None:
            missing += 1
        else:
            counts[value] += 1
    return dict(counts), missing


def number(text: str) -> int:
    return int(text.split()[0].replace(",", ""))


def count(page: Page, key: str) -> int:
    return number(page.locator(f'[data-count="{key}"]').first.inner_text())


def buckets(page: Page, facet: str) -> dict[str, int]:
    out = {}
    for span in page.locator(f'.tree [data-count^="{facet}="]').all():
        out[str(span.get_attribute("data-count")).split("=", 1)[1]] = number(span.inner_text())
    return out


def tree_link(page: Page, value: str) -> Locator:
    return page.locator(f'.tree a:has(.value:text-is("{value}"))')


def follow(link: Locator) -> None:
    """Click a link and wait for the page it leads to (reads after it must see that page)."""
    with link.page.expect_navigation():
        link.click()


def record_ids(page: Page) -> list[str]:
    return page.locator("table.records td.id").all_inner_texts()


def no_content(page: Page) -> None:
    html = page.content()
    assert MARKER not in html, "content on a page before any record was opened"


def test_explore_narrow_list_open_forget_erase(
    console: ConsoleProcess, files: Files, page: Page, shots: Path
) -> None:
    now = stored(files)
    page.goto(console.url)
    assert page.url == console.base + "/", "the secret must leave the address bar"
    no_content(page)
    memory_card = page.locator("section.card", has=page.locator("h2", has_text="memory"))
    expect(memory_card).to_contain_text("health: ok")
    expect(memory_card.locator("tr", has_text="chunk records")).to_contain_text(str(len(CHUNKS)))
    affect_card = page.locator("section.card", has=page.locator("h2", has_text="affect"))
    expect(affect_card.locator("tr", has_text="state records")).to_contain_text(str(len(STATES)))
    expect(affect_card.locator("tr", has_text="event records")).to_contain_text(str(len(EVENTS)))
    page.screenshot(path=shots / "overview.png")

    # explore: the plane's root, by tenant
    follow(page.get_by_role("navigation", name="Sections").get_by_role("link", name="Memory"))
    assert count(page, "root") == len(now["chunk"])
    assert buckets(page, "tenant") == brute(now["chunk"], "tenant")[0]
    expect(page.locator(".tree .summary").last).to_have_text(
        f"total {len(CHUNKS)} · missing 0 · more buckets 0 · exact counts (truncated: no)"
    )
    no_content(page)

    # narrow: tenant=acme, whose children skip group (no values) and go by end_user
    follow(tree_link(page, "acme"))
    expected, missing = brute(now["chunk"], "end_user", tenant="acme")
    assert buckets(page, "end_user") == expected
    assert number(page.locator('[data-missing="end_user"]').inner_text()) == missing == 2
    expect(page.locator(".group-by .chosen")).to_have_text("end_user")
    acme_total = sum(expected.values()) + missing
    assert count(page, "node") == acme_total
    no_content(page)

    # list, paged by cursor: every record of the node once, then the end
    page.goto(page.url + "&size=5")
    walked: list[str] = []
    while True:
        walked += record_ids(page)
        no_content(page)
        following = page.get_by_role("link", name="Next page")
        if following.count() == 0:
            expect(page.locator(".pager")).to_contain_text("end of listing")
            break
        follow(following)
    acme_ids = sorted(r["id"] for r in now["chunk"] if r["scope"]["tenant"] == "acme")
    assert sorted(walked) == acme_ids and len(walked) == len(set(walked))

    # narrow again: end_user=alice, by agent_self, then by origin
    follow(page.get_by_role("link", name="First page"))
    follow(tree_link(page, "alice"))
    assert buckets(page, "agent_self") == brute(now["chunk"], "agent_self", end_user="alice")[0]
    follow(page.locator(".group-by").get_by_role("link", name="origin"))
    assert buckets(page, "origin") == brute(now["chunk"], "origin", end_user="alice")[0]
    alice = sorted(r["id"] for r in now["chunk"] if r["scope"].get("end_user") == "alice")
    assert sorted(record_ids(page)) == alice
    no_content(page)
    page.screenshot(path=shots / "tree.png")

    # open one record: its content appears there only, and one audit line says who and which
    page.get_by_role("button", name="open chunk c-alice-0").click()
    view = page.locator("#record-view")
    expect(view).to_contain_text(marker("c-alice-0"))
    assert page.content().count(MARKER) == 1
    expect(page.locator("#record-title")).to_be_focused()
    page.screenshot(path=shots / "record.png")
    opened = console.audit("console.record_opened")
    assert [(o["record_id"], o["actor"], o["plane"]) for o in opened] == [
        ("c-alice-0", OPERATOR, "memory")
    ]
    assert opened[0]["timestamp"] and MARKER not in orjson.dumps(opened).decode()
    page.keyboard.press("Escape")
    expect(view).to_be_hidden()
    no_content(page)

    # forget the node: dry-run count first, a wrong phrase removes nothing
    page.get_by_role("button", name="Forget this node…").click()
    result = page.locator("#action-result")
    expect(result.locator('[data-count="memory.chunk"]')).to_have_text(str(len(alice)))
    confirm = page.get_by_label(re.compile("Type the node's value"))
    expect(confirm).to_be_focused()
    page.screenshot(path=shots / "forget-confirm.png")
    confirm.fill("alic")
    result.get_by_role("button", name=f"Forget {len(alice)} record(s)").click()
    expect(result.get_by_role("alert")).to_contain_text("nothing removed")
    assert len([r for r in stored(files)["chunk"] if r["scope"].get("end_user") == "alice"]) == 6
    page.get_by_label(re.compile("Type the node's value")).fill("alice")
    result.get_by_role("button", name=f"Forget {len(alice)} record(s)").click()
    expect(result.locator('[data-removed="memory.chunk"]')).to_have_text(str(len(alice)))
    now = stored(files)
    assert not [r for r in now["chunk"] if r["scope"].get("end_user") == "alice"]
    assert len([s for s in now["state"] if s["scope"]["end_user"] == "alice"]) == 2  # one plane
    follow(result.get_by_role("link", name="Show the updated counts"))
    assert count(page, "node") == acme_total - len(alice)
    assert buckets(page, "end_user") == brute(now["chunk"], "end_user", tenant="acme")[0]

    # forget a selection of ids: confirmed by typing how many
    follow(
        page.get_by_role("navigation", name="memory tree").get_by_role("link", name="memory").first
    )
    follow(tree_link(page, "beta"))
    for cid in ("c-carol-0", "c-carol-1"):
        page.get_by_label(f"select chunk {cid}").check()
    page.get_by_role("button", name="Forget selected…").click()
    expect(result.locator('[data-count="memory.chunk"]')).to_have_text("2")
    page.get_by_label(re.compile("Type the number of selected records")).fill("2")
    result.get_by_role("button", name="Forget 2 record(s)").click()
    expect(result.locator('[data-removed="memory.chunk"]')).to_have_text("2")
    left = {r["id"] for r in stored(files)["chunk"]}
    assert "c-carol-0" not in left and "c-carol-1" not in left and "c-carol-2" in left
    ticked_on = page.url
    follow(result.get_by_role("link", name="Show the updated counts"))  # back to that node
    assert page.url == ticked_on
    assert "c-carol-2" in record_ids(page) and "c-carol-0" not in record_ids(page)

    # erase a subject across both planes
    follow(
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Erase a subject")
    )
    page.get_by_label("end_user").fill("bob")
    page.get_by_role("button", name="Count what would be erased").click()
    now = stored(files)
    bob = {k: [r for r in v if r["scope"].get("end_user") == "bob"] for k, v in now.items()}
    expect(result.locator('[data-count="memory.chunk"]')).to_have_text(str(len(bob["chunk"])))
    expect(result.locator('[data-count="affect.state"]')).to_have_text(str(len(bob["state"])))
    expect(result.locator('[data-count="affect.event"]')).to_have_text(str(len(bob["event"])))
    assert stored(files) == now  # a dry run
    page.get_by_label(re.compile("Type the subject's value")).fill("bob")
    result.get_by_role("button", name=re.compile(r"Erase \d+ record")).click()
    for plane, kind in (("memory", "chunk"), ("affect", "state"), ("affect", "event")):
        expect(result.locator(f'[data-removed="{plane}.{kind}"]')).to_have_text(str(len(bob[kind])))
    page.screenshot(path=shots / "erase-result.png", full_page=True)
    after = stored(files)
    assert all(r["scope"].get("end_user") != "bob" for v in after.values() for r in v)
    assert {k: len(v) for k, v in after.items()} == {k: len(now[k]) - len(bob[k]) for k in now}

    # the overview agrees with the store
    follow(page.get_by_role("navigation", name="Sections").get_by_role("link", name="Overview"))
    expect(memory_card.locator("tr", has_text="chunk records")).to_contain_text(
        str(len(after["chunk"]))
    )
    no_content(page)
    removals = console.audit("console.forget") + console.audit("console.erase")
    assert [line["event"] for line in removals] == ["console.forget"] * 2 + ["console.erase"]
    assert all(line["actor"] == OPERATOR for line in removals)
    logged = orjson.dumps(removals).decode()
    assert "bob" not in logged and "alice" not in logged and MARKER not in logged
    assert removals[-1]["counts"]["memory.chunk"] == len(bob["chunk"])
