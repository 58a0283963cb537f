"""Import is batched and resumable: a bad line stops it with the line's number (never its
content), and a rerun after the fix replays what was stored and continues."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.ops.conftest import DIM, Files, chunks


def write_lines(path: Path, records: list[Any]) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def test_memory_import_resumes_without_duplicating(files: Files, admin: Any) -> None:
    records: list[Any] = chunks(25)
    secret = "do-not-print-this-9b1e"
    bad = dict(records[12], embedding=[1.0, 2.0], distillate=secret)
    path = files.dir / "chunks.jsonl"
    write_lines(path, [*records[:12], bad, *records[13:]])
    first = admin("import", "memory", str(path), "--batch", "5")
    assert first.code == 1
    assert "line 13" in first.err and "embedding" in first.err
    assert secret not in first.err + first.out
    assert "10 record(s) in 2 batch(es)" in first.err
    assert admin("stats", "--json").json()["planes"]["memory"]["records"] == {"chunk": 10}

    write_lines(path, records)
    second = admin("import", "memory", str(path), "--batch", "5", "--json")
    assert second.code == 0, second.err
    report = second.json()
    assert report["records"] == 25 and report["batches"] == 5
    assert report["replayed_batches"] == 2 and report["written"] == 15
    listed = admin("list", "memory", "--limit", "500", "--json").json()["records"]
    assert len(listed) == 25
    assert {r["revision"] for r in listed} == {1}  # replayed, not written again
    third = admin("import", "memory", str(path), "--batch", "5", "--json").json()
    assert third["replayed_batches"] == 5 and third["written"] == 0


def test_affect_event_import_and_bad_json(files: Files, admin: Any) -> None:
    path = files.dir / "events.jsonl"
    lines = [
        orjson.dumps({"id": f"e{i}", "at": "2025-03-01T10:00:00Z", "scope": {"tenant": "t"}})
        for i in range(6)
    ]
    lines.insert(4, b'{"id": "broken", "secret-content"')
    path.write_bytes(b"\n".join(lines) + b"\n\n")
    ran = admin("import", "affect", str(path), "--kind", "event", "--batch", "2")
    assert ran.code == 1
    assert "line 5: not a JSON object" in ran.err and "secret-content" not in ran.err
    del lines[4]
    path.write_bytes(b"\n".join(lines) + b"\n")
    ok = admin("import", "affect", str(path), "--kind", "event", "--batch", "2", "--json").json()
    assert ok["records"] == 6 and ok["written"] == 2 and ok["replayed_batches"] == 2
    assert admin("explore", "affect", "--facet", "kind", "--json").json()["total"] == 6


def test_an_affect_import_must_name_the_kind(files: Files, admin: Any) -> None:
    """A file of events imported without ``--kind`` was stored, whole, as states."""
    path = files.dir / "events.jsonl"
    line = {"id": "e0", "at": "2025-03-01T10:00:00Z", "scope": {"tenant": "t"}}
    path.write_bytes(orjson.dumps(line) + b"\n")
    ran = admin("import", "affect", str(path))
    assert ran.code == 2
    assert "the affect plane holds states and events" in ran.err
    assert "--kind state or --kind event" in ran.err
    assert admin("explore", "affect", "--facet", "kind", "--json").json()["total"] == 0
    assert admin("import", "affect", str(path), "--kind", "event").code == 0
    buckets = admin("explore", "affect", "--facet", "kind", "--json").json()["buckets"]
    assert [(b["value"], b["count"]) for b in buckets] == [("event", 1)]


def test_import_into_a_new_file_needs_a_dimension(
    tmp_path: Path, admin: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("RATATOSKR_MEMORY_DB", str(tmp_path / "new" / "new.db"))
    path = tmp_path / "c.jsonl"
    write_lines(path, chunks(3))
    ran = admin("import", "memory", str(path))
    assert ran.code == 2 and "--dim" in ran.err
    assert not (tmp_path / "new").exists()  # refused: not even the directory is made
    assert admin("import", "memory", str(path), "--dim", str(DIM)).code == 0
    assert admin("stats", "--json").json()["planes"]["memory"]["records"] == {"chunk": 3}


def test_an_import_on_a_fresh_checkout_makes_its_data_directory(
    tmp_path: Path, admin: Any, monkeypatch: Any
) -> None:
    """The default ``./data`` does not exist before the first ``make run``: import makes it,
    as serve does."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    monkeypatch.chdir(fresh)
    for name in ("RATATOSKR_MEMORY_DB", "RATATOSKR_AFFECT_DB", "RATATOSKR_MEMORY_EMBEDDING_DIM"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "c.jsonl"
    write_lines(path, chunks(3))
    ran = admin("import", "memory", str(path), "--dim", str(DIM))
    assert ran.code == 0, ran.err
    assert (fresh / "data" / "memory.db").is_file()
    assert admin("stats", "--json").json()["planes"]["memory"]["records"] == {"chunk": 3}


@pytest.mark.parametrize(
    "wrong",
    [
        ["memory", "MISSING", "--dim", str(DIM)],
        ["memory", "DIRECTORY", "--dim", str(DIM)],
        ["affect", "LINES", "--kind", "chunk"],
        ["memory", "LINES", "--kind", "state", "--dim", str(DIM)],
        ["affect", "LINES", "--batch", "0"],
        ["memory", "LINES", "--batch", "1001", "--dim", str(DIM)],
        ["memory", "LINES", "--dim", "0"],
        ["memory", "LINES", "--dim", "8193"],
    ],
    ids=[
        "missing-file",
        "directory",
        "kind",
        "kind-memory",
        "batch-0",
        "batch-1001",
        "dim-0",
        "dim-8193",
    ],
)
def test_a_refused_import_creates_no_database(
    tmp_path: Path, admin: Any, monkeypatch: Any, wrong: list[str]
) -> None:
    """Validate before touching storage: a missing file, a kind the plane does not hold, a
    batch or a dimension out of range is refused (exit 2) before the plane's database is
    created, so a typo leaves no empty (or half-made) database behind."""
    monkeypatch.setenv("RATATOSKR_MEMORY_DB", str(tmp_path / "memory.db"))
    monkeypatch.setenv("RATATOSKR_AFFECT_DB", str(tmp_path / "affect.db"))
    monkeypatch.delenv("RATATOSKR_MEMORY_EMBEDDING_DIM", raising=False)
    lines = tmp_path / "lines.jsonl"
    write_lines(lines, chunks(2))
    inputs = {"LINES": str(lines), "MISSING": str(tmp_path / "none.jsonl"), "DIRECTORY": "/"}
    ran = admin("import", *[inputs.get(a, a) for a in wrong])
    assert ran.code == 2, ran.out + ran.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lines.jsonl"]
    if wrong[1] in ("MISSING", "DIRECTORY"):  # named, with what is wrong with it
        assert inputs[wrong[1]] in ran.err and "Errno" not in ran.err


@pytest.mark.parametrize("batch", ["2", "5", "1000"])
def test_an_id_twice_in_one_file_is_refused_alike_whatever_the_batch(
    files: Files, admin: Any, batch: str
) -> None:
    records: list[Any] = chunks(8)
    again = dict(records[1], distillate="the later one")
    path = files.dir / "dup.jsonl"
    write_lines(path, [*records[:6], again, *records[6:]])
    ran = admin("import", "memory", str(path), "--batch", batch, "--json")
    assert ran.code == 1
    assert "line 7: the same id as line 2" in ran.err and "c0001" not in ran.err
    report = ran.json()
    assert report["ok"] is False and report["line"] == 7
    stored = admin("stats", "--json").json()["planes"]["memory"]["records"].get("chunk", 0)
    assert report["stored"] == stored == (6 // int(batch)) * int(batch)
    revisions = {
        r["id"]: r["revision"] for r in admin("list", "memory", "--json").json()["records"]
    }
    assert revisions.get("c0001") in (None, 1)  # never overwritten by its later line
