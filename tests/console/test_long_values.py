"""Long unbroken ids and values (sha256 ids, UUID scopes, URL origins, and the longest value
and id a writer may store) wrap inside their box: at a laptop's 1280 px no page scrolls
sideways and no tree label runs out of the tree."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Page

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from tests.console.conftest import CTX, DIM, ConsoleProcess, Files, console_on

WIDTH = 1280
TENANT = str(uuid.UUID(int=1))
LONG_VALUE = "v" * 256  # the longest scope value the wire takes
LONG_ID = "i" * 300


def _origin(n: int) -> str:
    return f"https://docs.example.com/knowledge-base/articles/{n:010d}"  # 60 characters


@pytest.fixture
def wide(tmp_path: Path) -> Iterator[ConsoleProcess]:
    files = Files.under(tmp_path)
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    chunks = [
        {
            "id": hashlib.sha256(str(n).encode()).hexdigest(),
            "embedding": [0.5] * DIM,
            "scope": {
                "tenant": TENANT,
                "group": str(uuid.UUID(int=100 + n % 2)),
                "end_user": str(uuid.UUID(int=200 + n)),
                "agent_self": str(uuid.UUID(int=300 + n)),
            },
            "origin": _origin(n),
        }
        for n in range(6)
    ]
    chunks.append(
        {
            "id": LONG_ID,
            "embedding": [0.5] * DIM,
            "scope": {"tenant": TENANT, "end_user": LONG_VALUE},
            "origin": _origin(0) + "x" * 200,
        }
    )
    memory.upsert_many(chunks, idempotency_key="wide", ctx=CTX)
    memory.close()
    open_affect_store(str(files.affect)).close()
    yield from console_on(tmp_path, files)


def fits(page: Page, where: str) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{where}: the page is {width} px wide"
    outside = page.evaluate(
        """() => {
            const tree = document.querySelector('.tree');
            if (!tree) return [];
            const edge = tree.getBoundingClientRect().right;
            return [...tree.querySelectorAll('a')]
                .filter(a => a.getBoundingClientRect().right > edge + 0.5)
                .map(a => a.textContent.slice(0, 40));
        }"""
    )
    assert outside == [], f"{where}: tree labels run out of the tree"


def test_long_ids_and_values_do_not_widen_the_page(page: Page, wide: ConsoleProcess) -> None:
    page.goto(wide.url)
    fits(page, "overview")
    at_tenant = f"at=tenant%3D{TENANT}"
    at_long = f"{at_tenant}&at=end_user%3D{LONG_VALUE}"
    for query in ("", "?by=origin", f"?{at_tenant}&by=end_user", f"?{at_tenant}&by=origin"):
        page.goto(f"{wide.base}/tree/memory{query}")
        fits(page, query or "root")
    page.goto(f"{wide.base}/tree/memory?{at_long}")
    fits(page, "the long value's node")
    page.get_by_role("button", name=f"open chunk {LONG_ID}").click()
    page.locator("#record-title").wait_for()
    fits(page, "an opened record")
    page.get_by_role("button", name="Forget this node…").click()
    page.locator("#confirm-phrase").wait_for()
    fits(page, "a forget's confirmation")
    page.goto(f"{wide.base}/erase?tenant={TENANT}&end_user={quote(LONG_VALUE)}")
    page.get_by_role("button", name="Count what would be erased").click()
    page.locator("#confirm-phrase").wait_for()
    fits(page, "an erase's confirmation")
