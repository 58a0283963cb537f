"""An erase where a plane has no database at its default location: the plane is left out
(as documented), and the output says so, so success on one plane never reads as the
subject gone from both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ratatoskr.memory.store import open_memory_store
from tests.ops.conftest import CTX, DIM, Files, chunks


@pytest.fixture
def memory_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory holding ./data/memory.db alone, no location set: the affect plane is
    somewhere else, or nowhere."""
    for name in ("RATATOSKR_MEMORY_DB", "RATATOSKR_AFFECT_DB", "RATATOSKR_MEMORY_EMBEDDING_DIM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    memory = open_memory_store("data/memory.db", embedding_dim=DIM)
    records = [{**c, "scope": {"tenant": "t", "end_user": "zed"}} for c in chunks(3)]
    memory.upsert_many(records, idempotency_key="z", ctx=CTX)
    memory.close()
    return tmp_path


@pytest.mark.parametrize("mode", ["--yes", "--dry-run"])
def test_erase_names_the_plane_it_did_not_examine(memory_only: Path, admin: Any, mode: str) -> None:
    ran = admin("erase", "--scope", "end_user=zed", mode)
    assert ran.code == 0, ran.err
    said = " ".join(ran.out.split())
    assert "not examined: the affect plane (no database at ./data/affect.db" in said
    assert "--affect-db or RATATOSKR_AFFECT_DB" in said
    report = admin("erase", "--scope", "end_user=zed", mode, "--json").json()
    assert report["not_examined"] == {"affect": "./data/affect.db"}
    assert list(report["planes"]) == ["memory"]


def test_erase_on_both_planes_examines_both(filled: Files, admin: Any) -> None:
    ran = admin("erase", "--scope", "end_user=u1", "--yes")
    assert ran.code == 0, ran.err
    assert "not examined" not in ran.out
    report = admin("erase", "--scope", "end_user=u1", "--dry-run", "--json").json()
    assert report["not_examined"] == {}
