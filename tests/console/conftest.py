"""Real plane files holding marked content, a real ``ratatoskr admin ui`` process on them,
and Debian's Chromium driven by Playwright (never a browser Playwright downloads)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from ratatoskr.affect.store import open_affect_store
from ratatoskr.core.context import CallContext
from ratatoskr.memory.store import open_memory_store
from tests.server.harness import clean_env, poll

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DIM = 8
OPERATOR = "test-operator"
CTX = CallContext(actor="worldtree")
# every stored content field carries this, so a page or a log line holding content is caught
MARKER = "QZXV-CONTENT-MARKER"
URL_LINE = re.compile(r"(http://127\.0\.0\.1:(\d+))/\?token=([A-Za-z0-9_-]+)")

# (id, scope, origin): memory chunks; bob lives in two tenants, acme has chunks with no user
CHUNKS: list[tuple[str, dict[str, str], str | None]] = [
    *[
        (
            f"c-alice-{i}",
            {"tenant": "acme", "end_user": "alice", **({"agent_self": "a1"} if i < 3 else {})},
            "chat" if i % 2 else "doc",
        )
        for i in range(6)
    ],
    *[(f"c-bob-{i}", {"tenant": "acme", "end_user": "bob"}, "chat") for i in range(4)],
    *[(f"c-acme-{i}", {"tenant": "acme"}, None) for i in range(2)],
    *[(f"c-carol-{i}", {"tenant": "beta", "end_user": "carol"}, "doc") for i in range(3)],
    *[(f"c-beta-bob-{i}", {"tenant": "beta", "end_user": "bob"}, "doc") for i in range(2)],
]
STATES: list[tuple[str, dict[str, str]]] = [
    *[(f"s-alice-{i}", {"tenant": "acme", "end_user": "alice"}) for i in range(2)],
    *[(f"s-bob-{i}", {"tenant": "acme", "end_user": "bob"}) for i in range(3)],
    ("s-carol-0", {"tenant": "beta", "end_user": "carol"}),
]
EVENTS: list[tuple[str, dict[str, str]]] = [
    *[(f"e-bob-{i}", {"tenant": "acme", "end_user": "bob"}) for i in range(4)],
    ("e-alice-0", {"tenant": "acme", "end_user": "alice"}),
]


def marker(record_id: str) -> str:
    return f"{MARKER}-{record_id}"


@dataclass
class Files:
    memory: Path
    affect: Path

    @classmethod
    def under(cls, root: Path) -> Files:
        """The two files in ``root/data`` (created), where the admin commands look."""
        (root / "data").mkdir()
        return cls(root / "data" / "memory.db", root / "data" / "affect.db")


def fill(root: Path) -> Files:
    """Write the records through the stores' own calls, content marked, into ``root/data``
    (where the admin commands look by default)."""
    files = Files.under(root)
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    affect = open_affect_store(str(files.affect))
    write_records(memory, affect)
    return files


def write_records(memory: Any, affect: Any) -> None:
    """``CHUNKS``, ``STATES`` and ``EVENTS`` through the stores' own calls (any backend),
    content marked; both stores are closed after."""
    chunks: list[dict[str, Any]] = []
    for n, (cid, scope, origin) in enumerate(CHUNKS):
        record: dict[str, Any] = {
            "id": cid,
            "embedding": [0.1 + ((n + k) % 7) / 10 for k in range(DIM)],
            "scope": scope,
            "distillate": marker(cid),
        }
        if origin is not None:
            record["origin"] = origin
        chunks.append(record)
    memory.upsert_many(chunks, idempotency_key="console-chunks", ctx=CTX)
    memory.close()
    states = [{"id": i, "scope": s, "note": marker(i)} for i, s in STATES]
    events = [
        {"id": i, "at": f"2025-01-01T00:0{n}:00Z", "scope": s, "note": marker(i)}
        for n, (i, s) in enumerate(EVENTS)
    ]
    affect.put_many(states, idempotency_key="console-states", ctx=CTX)
    affect.append_events(events, idempotency_key="console-events", ctx=CTX)
    affect.close()


class ConsoleProcess:
    """``python -m ratatoskr admin ui --port 0`` in the files' directory (so on its default
    ``./data`` paths, unless ``args`` names others), its stdout and stderr in files."""

    def __init__(self, root: Path, files: Files, args: tuple[str, ...] = ()) -> None:
        self.stdout_path = root / "console.stdout"
        self.stderr_path = root / "console.stderr"
        env = clean_env({})
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ratatoskr",
                    "admin",
                    "ui",
                    "--port",
                    "0",
                    "--operator",
                    OPERATOR,
                    *args,
                ],
                stdout=out,
                stderr=err,
                env=env,
                cwd=files.memory.parent.parent,
            )
        found = poll(self._url_line, 30, "the console's URL line")
        self.base, self.port, self.secret = found.group(1), int(found.group(2)), found.group(3)
        self.url = f"{self.base}/?token={self.secret}"
        self.cookie = f"ratatoskr_console_{self.port}"

    def _url_line(self) -> re.Match[str] | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"the console exited: {self.stderr_path.read_text()}")
        return URL_LINE.search(self.stdout_path.read_text())

    def stdout(self) -> str:
        return self.stdout_path.read_text()

    def log_lines(self) -> list[dict[str, Any]]:
        """The JSON lines after the URL banner."""
        out = []
        for line in self.stdout().splitlines():
            if line.startswith("{"):
                out.append(orjson.loads(line))
        return out

    def audit(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.log_lines() if line.get("event") == event]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        return int(self.proc.returncode)


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return fill(tmp_path)


def console_on(root: Path, files: Files, args: tuple[str, ...] = ()) -> Iterator[ConsoleProcess]:
    """A console process on ``files`` (or the planes ``args`` names) for a fixture to yield
    from; it must stop cleanly."""
    process = ConsoleProcess(root, files, args)
    yield process
    assert process.stop() == 0, process.stderr_path.read_text()


@pytest.fixture
def console(tmp_path: Path, files: Files) -> Iterator[ConsoleProcess]:
    yield from console_on(tmp_path, files)


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    assert os.path.exists(CHROMIUM), "Debian's chromium is missing: .ci/run installs it"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh context (no cookie) at a laptop's viewport."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    # waits for a page to reach a state, bounded for a loaded 2-core CI machine (where the
    # console, Chromium and the test share the cores); a state reached returns at once
    context.set_default_timeout(30_000)
    expect.set_options(timeout=30_000)
    opened = context.new_page()
    yield opened
    context.close()
