"""The operations walk-through (docs/operations.md) runs as printed: its data script makes the
files, and the counts it shows come out of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_walkthrough_data_gives_the_counts_the_docs_show(
    tmp_path: Path, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RATATOSKR_MEMORY_DB", "RATATOSKR_AFFECT_DB", "RATATOSKR_MEMORY_EMBEDDING_DIM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    script = ROOT / "docs" / "walkthrough" / "make_data.py"
    subprocess.run([sys.executable, str(script)], check=True, timeout=60)
    assert admin("import", "memory", "chunks.jsonl", "--dim", "8", "--batch", "100").code == 0
    assert admin("import", "affect", "events.jsonl", "--kind", "event").code == 0
    assert admin("import", "affect", "states.jsonl", "--kind", "state").code == 0
    doc = (ROOT / "docs" / "operations.md").read_text()
    by_user = admin("explore", "memory", "--facet", "end_user", "--narrow", "tenant=acme").out
    for user, count in (("alice", 68), ("bob", 62), ("carol", 62)):
        assert f" {user}  " in by_user and f"{count}   --narrow end_user={user}" in by_user
        assert f"{count}   --narrow end_user={user}" in doc
    erased = admin("erase", "--scope", "tenant=acme", "--scope", "end_user=bob", "--yes", "--json")
    planes = erased.json()["planes"]
    assert (planes["memory"]["chunk"], planes["affect"]["event"], planes["affect"]["state"]) == (
        62,
        19,
        1,
    )
