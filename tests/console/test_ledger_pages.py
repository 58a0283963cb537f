"""Every page renders beside a jti ledger: the one a server writes beside the memory file
(``data/memory.jti.db``) or into the plane's PostgreSQL database on its first mutating
call. The overview lists each ledger with its entries (expired among them), or why it
cannot be read; no page answers 500 whether a ledger is there or not, whole or damaged,
with both planes or one."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest
from playwright.sync_api import Page
from starlette.testclient import TestClient

from ratatoskr.console.app import create_console_app
from ratatoskr.console.auth import Secret
from ratatoskr.ops.locations import open_ledger, open_memory
from ratatoskr.ops.stores import Paths, Stores
from ratatoskr.postgres.jti import PgJtiLedger
from ratatoskr.sqlite.jti import ledger_beside
from tests.backends import postgres_schema
from tests.console.conftest import CTX, DIM, ConsoleProcess, Files, console_on

CSRF = "X-Ratatoskr-CSRF"


def write_ledger(location: str) -> None:
    """What a server's mutating calls leave: two used tokens, one of them expired."""
    ledger = open_ledger(location)
    try:
        assert ledger.claim("jti-live", time.time() + 3600)
        assert ledger.claim("jti-old", time.time() - 60)
    finally:
        ledger.close()


def ledger_line(text: str) -> str:
    found = re.search(r"<h2>Token ledgers</h2>\s*<ul[^>]*>(.*?)</ul>", text, re.S)
    assert found is not None, "the overview lists no token ledger"
    return re.sub(r"<[^>]+>", "", found.group(1))


def every_page(stores: Stores, *, planes: tuple[str, ...]) -> dict[str, str]:
    """Each GET page and each dry-run POST through the console app: every one 200 (a plane
    the console was not started on answers 404, as without a ledger). The pages' text."""
    secret = Secret.fresh(1)
    app = create_console_app(stores, secret, operator="x")
    shown: dict[str, str] = {}
    with TestClient(
        app, cookies={secret.cookie: secret.value}, raise_server_exceptions=False
    ) as client:
        gets = ["/", "/check", "/erase", "/erase?tenant=acme&end_user=u"]
        gets += [f"/tree/{p}" for p in ("memory", "affect")]
        gets += [f"/tree/{p}?at=tenant%3Dacme" for p in ("memory", "affect")]
        for url in gets:
            answer = client.get(url)
            absent = url.startswith("/tree/") and url.split("/")[2].split("?")[0] not in planes
            assert answer.status_code == (404 if absent else 200), (url, answer.text)
            shown[url] = answer.text
        plane = planes[0]
        posts: list[tuple[str, dict[str, str]]] = [
            (f"/open/{plane}", {"id": "c-0" if plane == "memory" else "s-0"}),
            ("/forget/preview", {"plane": plane, "mode": "node", "at": "tenant=acme"}),
            ("/erase/preview", {"tenant": "acme", "end_user": "u"}),
        ]
        for url, form in posts:
            answer = client.post(url, data=form, headers={CSRF: secret.csrf})
            assert answer.status_code == 200, (url, answer.text)
            shown[url] = answer.text
    return shown


def sqlite_memory(root: Path) -> Files:
    files = Files.under(root)
    memory = open_memory(str(files.memory), embedding_dim=DIM)
    chunks = [
        {"id": f"c-{i}", "embedding": [0.5] * DIM, "scope": {"tenant": "acme", "end_user": "u"}}
        for i in range(3)
    ]
    memory.upsert_many(chunks, idempotency_key="ledger-pages", ctx=CTX)
    memory.close()
    return files


@pytest.fixture
def both(files: Files) -> Iterator[Stores]:
    stores = Stores(Paths(str(files.memory), str(files.affect)))
    yield stores
    stores.close()


def test_every_page_renders_without_a_ledger(both: Stores) -> None:
    shown = every_page(both, planes=("memory", "affect"))
    assert "Token ledgers" not in shown["/"] and "chunk records" in shown["/"]


def test_every_page_renders_beside_a_ledger_and_the_overview_shows_its_entries(
    files: Files, both: Stores
) -> None:
    write_ledger(str(files.memory))
    shown = every_page(both, planes=("memory", "affect"))
    assert "chunk records" in shown["/"] and "state records" in shown["/"]
    line = ledger_line(shown["/"])
    assert "memory.jti.db" in line and "2 entries (1 expired)" in line
    assert "jti ledger: ok" in shown["/check"]


def test_every_page_renders_with_one_plane_and_its_ledger(tmp_path: Path) -> None:
    files = sqlite_memory(tmp_path)
    write_ledger(str(files.memory))
    with Stores(Paths(str(files.memory), str(files.affect))) as stores:
        shown = every_page(stores, planes=("memory",))
    assert "No database at" in shown["/"]
    assert "2 entries (1 expired)" in ledger_line(shown["/"])


DAMAGES: dict[str, Callable[[Path], None]] = {
    # not a SQLite file at all
    "garbage": lambda ledger: _write(ledger, b"not a ledger " * 400),
    # a SQLite file without the ledger's table
    "no table": lambda ledger: _sql(ledger, "DROP TABLE jti_ledger"),
}


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _sql(path: Path, statement: str) -> None:
    conn = apsw.Connection(str(path))
    try:
        conn.execute(statement)
    finally:
        conn.close()


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_every_page_renders_beside_a_damaged_ledger_and_the_overview_says_why(
    files: Files, both: Stores, damage: str
) -> None:
    write_ledger(str(files.memory))
    ledger = Path(ledger_beside(str(files.memory)))
    for suffix in ("-wal", "-shm"):
        Path(f"{ledger}{suffix}").unlink(missing_ok=True)
    DAMAGES[damage](ledger)
    shown = every_page(both, planes=("memory", "affect"))
    line = ledger_line(shown["/"])
    assert "memory.jti.db: " in line and "entries (" not in line
    assert "not a" in line  # "not a SQLite database" / "not a jti ledger"
    assert "jti ledger: 1 problem(s)" in shown["/check"]


def test_a_ledger_whose_entries_cannot_be_counted_is_shown_with_the_reason(
    files: Files, both: Stores
) -> None:
    """A ledger that opens but whose pages are damaged: the overview still renders and
    says the ledger cannot be read, rather than leaving it out."""
    write_ledger(str(files.memory))
    path = Path(ledger_beside(str(files.memory)))
    conn = apsw.Connection(str(path))
    with conn:  # many pages, so the damaged ones are past the schema's
        rows = [(f"jti-{n:05d}-" + "x" * 60, time.time() + 3600) for n in range(3000)]
        conn.executemany("INSERT INTO jti_ledger VALUES (?, ?)", rows)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    for page in range(3, len(data) // page_size - 1):
        start = page * page_size
        data[start : start + page_size] = b"\xa5" * page_size
    path.write_bytes(bytes(data))
    shown = every_page(both, planes=("memory", "affect"))
    line = ledger_line(shown["/"])
    assert "memory.jti.db: cannot be read" in line and "entries (" not in line, line


@pytest.fixture
def pg_memory() -> str:
    url = postgres_schema("console_ledger")
    memory = open_memory(url, embedding_dim=DIM)
    chunks = [
        {"id": f"c-{i}", "embedding": [0.5] * DIM, "scope": {"tenant": "acme", "end_user": "u"}}
        for i in range(3)
    ]
    memory.upsert_many(chunks, idempotency_key="ledger-pg", ctx=CTX)
    memory.close()
    return url


def test_every_page_renders_on_postgresql_beside_its_ledger_table(pg_memory: str) -> None:
    write_ledger(pg_memory)
    empty = postgres_schema("console_ledger_none")  # no affect plane there
    with Stores(Paths(pg_memory, empty)) as stores:
        shown = every_page(stores, planes=("memory",))
    assert "chunk records" in shown["/"]
    assert "2 entries (1 expired)" in ledger_line(shown["/"])


def test_every_page_renders_on_postgresql_when_its_ledger_table_is_gone(pg_memory: str) -> None:
    write_ledger(pg_memory)
    ledger = open_ledger(pg_memory)
    assert isinstance(ledger, PgJtiLedger)
    try:
        ledger.db.once(lambda conn: conn.execute("DROP TABLE ratatoskr_jti"))
    finally:
        ledger.close()
    empty = postgres_schema("console_ledger_gone")
    with Stores(Paths(pg_memory, empty)) as stores:
        shown = every_page(stores, planes=("memory",))
    assert "chunk records" in shown["/"]
    line = ledger_line(shown["/"])
    assert "cannot be read" in line and "ratatoskr_jti" in line and "entries (" not in line


@pytest.fixture
def served(tmp_path: Path, files: Files) -> Iterator[ConsoleProcess]:
    """``ratatoskr admin ui`` on a data directory a server wrote its ledger into."""
    write_ledger(str(files.memory))
    assert Path(ledger_beside(str(files.memory))).exists()
    yield from console_on(tmp_path, files)


def test_the_landing_page_shows_the_ledger_a_server_left(
    served: ConsoleProcess, page: Page
) -> None:
    landing = page.goto(served.url)
    assert landing is not None and landing.status == 200
    assert page.get_by_role("heading", name="Overview").is_visible()
    ledgers = page.locator("h2:text('Token ledgers') + ul li").all_inner_texts()
    assert len(ledgers) == 1 and ledgers[0].endswith("memory.jti.db: 2 entries (1 expired)")
    assert "UndefinedError" not in served.stdout()
