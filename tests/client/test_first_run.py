"""The README's first run, as a new user types it, against a real server: the Python
snippet stores and recalls a memory, and ``ratatoskr call`` (rebuilt on the client) reads it
back and refuses an unlisted verb without sending it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson

from tests.server.harness import KEY, Server, clean_env

README = Path(__file__).resolve().parents[2] / "README.md"


def first_run_snippet() -> str:
    section = README.read_text().split("## First run", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"\.venv/bin/python - <<'EOF'\n(.*?)\nEOF\n", section, re.DOTALL)
    assert found, "the README's first run has no Python snippet"
    return found.group(1)


def test_the_readme_first_run_stores_and_recalls(server: Server, tmp_path: Path) -> None:
    env = clean_env({"RATATOSKR_HEIMDALL_KEY": KEY, "RATATOSKR_URL": server.url})
    ran = subprocess.run(
        [sys.executable, "-"],
        input=first_run_snippet(),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "{'upserted': 1, 'replayed': False}",
        "c1 1.0 my first memory",
    ]
    call = [sys.executable, "-m", "ratatoskr", "call", "--url", server.url]
    call += ["--scope", "tenant=acme"]
    got = subprocess.run(
        [*call[:4], "memory", "get", *call[4:], "--args", '{"chunk_id": "c1"}'],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert got.returncode == 0, got.stderr
    answer = orjson.loads(got.stdout)
    assert answer["ok"] is True and answer["result"]["distillate"] == "my first memory"
    before = memory_calls(server)
    refused = subprocess.run(
        [*call[:4], "memory", "scan", *call[4:]], capture_output=True, env=env, timeout=60
    )
    assert refused.returncode == 1
    assert b"does not list memory.scan; nothing was sent" in refused.stderr
    assert memory_calls(server) == before  # only the handshake reached the server


def memory_calls(server: Server) -> int:
    return sum(
        1
        for line in server.log_lines()
        if line.get("event") == "bifrost.call" and line.get("plane") == "memory"
    )
