"""stats, check (which must catch a missing and an orphaned vector row), backup while a
writer commits, prune, and the --help of every command."""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path
from typing import Any

import apsw
import pytest
import sqlite_vec

from ratatoskr.affect.store import open_affect_store
from ratatoskr.cli import main
from ratatoskr.memory.store import open_memory_store
from ratatoskr.server.app import check_stores
from ratatoskr.server.settings import Settings, SettingsError, load_settings
from ratatoskr.sqlite.database import SchemaError
from ratatoskr.sqlite.jti import JtiLedger
from tests.ops.conftest import CTX, DIM, Files, fill

COMMANDS = (
    "list",
    "explore",
    "get",
    "forget",
    "erase",
    "stats",
    "check",
    "backup",
    "prune",
    "import",
)


def raw(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    return conn


def add_inexact_chunk(files: Files) -> None:
    """A chunk whose vector float32 cannot hold exactly: the store keeps its float64 copy."""
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    memory.upsert_many(
        [{"id": "inexact", "embedding": [0.1] * DIM, "scope": {"tenant": "acme"}}],
        idempotency_key="inexact",
        ctx=CTX,
    )
    memory.close()


def test_stats_counts_records_and_caches(filled: Files, admin: Any) -> None:
    report = admin("stats", "--json").json()
    assert report["planes"]["memory"]["records"] == {"chunk": 120}
    assert report["planes"]["affect"]["records"] == {"event": 60, "state": 40}
    assert report["planes"]["memory"]["idempotency_entries"] == 3
    assert report["planes"]["memory"]["embedding_dim"] == DIM
    assert (
        report["planes"]["memory"]["schema_version"] == report["planes"]["memory"]["schema_latest"]
    )
    human = admin("stats")
    assert "chunk       120" in human.out and "state        40" in human.out


def test_stats_shows_the_durability_mode_in_force(
    filled: Files, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    JtiLedger(str(filled.dir / "memory.jti.db")).close()
    report = admin("stats", "--json").json()
    assert {p["synchronous"] for p in report["planes"].values()} == {"FULL"}
    assert [j["synchronous"] for j in report["jti"]] == ["FULL"]
    monkeypatch.setenv("RATATOSKR_SQLITE_SYNCHRONOUS", "NORMAL")
    report = admin("stats", "--json").json()
    assert report["planes"]["affect"]["synchronous"] == "NORMAL"
    assert "synchronous NORMAL" in admin("stats").out


def test_check_passes_a_healthy_store(filled: Files, admin: Any) -> None:
    ran = admin("check")
    assert ran.code == 0
    assert "check passed" in ran.out


def test_check_prints_each_plane_and_problem_on_one_line(tmp_path: Path, admin: Any) -> None:
    """A path (or a problem) longer than the console is wide is never cut into two lines:
    scripts read ``memory: ok (PATH)`` and each problem whole."""
    deep = tmp_path / ("a-directory-with-a-long-name-" * 4)
    deep.mkdir()
    memory, affect = deep / "memory.db", deep / "affect.db"
    open_memory_store(str(memory), embedding_dim=DIM).close()
    open_affect_store(str(affect)).close()
    fill(Files(deep, memory, affect), n_chunks=10, n_states=2, n_events=2)
    ran = admin("check", "--memory-db", str(memory), "--affect-db", str(affect))
    assert ran.code == 0, ran.out + ran.err
    assert f"memory: ok ({memory})\n" in ran.out and f"affect: ok ({affect})\n" in ran.out
    conn = raw(memory)
    conn.execute("DELETE FROM memory_vec WHERE chunk_id = 'c0001'")
    conn.close()
    ran = admin("check", "--memory-db", str(memory), "--affect-db", str(affect))
    assert ran.code == 1
    assert f"memory: 1 problem(s) in {memory}\n" in ran.out
    assert "  - 1 chunk(s) without a memory_vec row: c0001\n" in ran.out
    ledger = deep / "memory.jti.db"
    JtiLedger(str(ledger)).close()
    ran = admin("stats", "--memory-db", str(memory), "--affect-db", str(affect))
    assert ran.code == 0, ran.out + ran.err
    assert f"jti ledger {ledger}: 0 (0 expired)" in ran.out


def test_check_catches_a_missing_and_an_orphaned_vector_row(filled: Files, admin: Any) -> None:
    conn = raw(filled.memory)
    conn.execute("DELETE FROM memory_vec WHERE chunk_id = 'c0007'")
    conn.execute(
        "INSERT INTO memory_vec (chunk_id, embedding) VALUES ('ghost', ?)", (b"\0\0\x80?" * DIM,)
    )
    conn.close()
    ran = admin("check")
    assert ran.code == 1
    assert "1 chunk(s) without a memory_vec row: c0007" in ran.out
    assert "1 orphaned memory_vec row(s) without a chunk: ghost" in ran.out
    assert "check FAILED" in ran.out
    report = admin("check", "--json").json()
    assert report["ok"] is False and report["planes"]["affect"]["problems"] == []


def test_check_catches_vectors_and_records_a_read_would_trip_on(filled: Files, admin: Any) -> None:
    """Damage that passes SQLite's own integrity check: every write refused for a changed
    dimension, a float64 vector cut short, a record that is not JSON any more."""
    add_inexact_chunk(filled)
    conn = raw(filled.memory)
    conn.execute(
        "UPDATE memory_chunks SET vector_f64 = substr(vector_f64, 1, 8) WHERE chunk_id = 'inexact'"
    )
    conn.execute("UPDATE memory_chunks SET record_json = '{\"id\": ' WHERE chunk_id = 'c0003'")
    conn.close()
    conn = raw(filled.affect)
    conn.execute("UPDATE affect_events SET scope_json = 'tenant=acme' WHERE id = 'e0002'")
    conn.execute("UPDATE affect_states SET scope_json = '\"acme\"' WHERE id = 's0002'")
    conn.close()
    report = admin("check", "--json").json()
    assert report["ok"] is False
    assert report["planes"]["memory"]["problems"] == [
        "1 chunk(s) whose stored record is not a JSON object",
        "1 chunk(s) whose float64 vector has the wrong length",
    ]
    assert report["planes"]["affect"]["problems"] == [
        "1 event(s) whose stored scope is not a JSON object",
        "1 state(s) whose stored scope is not a JSON object",  # JSON, but not a scope
    ]

    conn = raw(filled.memory)
    conn.execute(f"UPDATE ratatoskr_meta SET value = '{DIM + 1}' WHERE key = 'embedding_dim'")
    conn.close()
    problems = admin("check", "--json").json()["planes"]["memory"]["problems"]
    assert f"the vector index holds dimension {DIM}, the file records {DIM + 1}" in problems
    assert any(f"whose vector is not of dimension {DIM + 1}" in p for p in problems)


def test_check_catches_a_dropped_table_or_index_and_erase_says_it_removed_nothing(
    filled: Files, admin: Any
) -> None:
    """A table or index dropped behind the store's back passes SQLite's integrity check;
    the first erase that needs it fails, and says so rather than "removed"."""
    conn = raw(filled.memory)
    conn.execute("DROP TABLE memory_changes")
    conn.close()
    conn = raw(filled.affect)
    conn.execute("DROP INDEX affect_events_at")
    conn.close()
    ran = admin("check")
    assert ran.code == 1
    assert "schema: table memory_changes is missing" in ran.out
    assert "schema: index affect_events_at is missing" in ran.out
    erased = admin("erase", "--scope", "tenant=acme", "--yes")
    assert erased.code == 2
    assert "removed." not in erased.out
    assert "incomplete: removed from the planes shown only; the memory plane not erased" in (
        erased.out.replace("\n", " ")
    )


def test_check_catches_vector_values_that_differ_or_are_not_finite(
    filled: Files, admin: Any
) -> None:
    """A vector edited behind the store's back: its index row no longer the stored vector
    (search and ``get`` disagree), a value that is not a number, a float64 copy that does
    not round to the float32 one."""
    add_inexact_chunk(filled)
    assert admin("check").code == 0
    half = struct.pack(f"{DIM}f", *[0.5] * DIM)
    conn = raw(filled.memory)
    conn.execute("UPDATE memory_vec SET embedding = ? WHERE chunk_id = 'c0005'", (half,))
    nan = struct.pack(f"{DIM}f", float("nan"), *[1.0] * (DIM - 1))
    conn.execute("UPDATE memory_chunks SET embedding = ? WHERE chunk_id = 'c0006'", (nan,))
    wide = struct.pack(f"{DIM}d", *[0.2] * DIM)
    conn.execute("UPDATE memory_chunks SET vector_f64 = ? WHERE chunk_id = 'inexact'", (wide,))
    conn.close()
    problems = admin("check", "--json").json()["planes"]["memory"]["problems"]
    assert "1 chunk(s) whose vector holds a value that is not finite: c0006" in problems
    # c0006's float64 copy and index row still hold its old values: they differ too
    assert (
        "2 chunk(s) whose float64 vector is not finite or does not round to it: c0006, inexact"
        in problems
    )
    assert "2 chunk(s) whose vector index row differs from the stored vector: c0005, c0006" in (
        problems
    )


def test_check_catches_a_bad_revision_and_a_newer_schema(filled: Files, admin: Any) -> None:
    conn = raw(filled.affect)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("UPDATE affect_states SET revision = 0 WHERE id = 's0001'")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    report = admin("check", "--json").json()
    assert report["ok"] is False
    assert any("newer" in p or "revision" in p for p in report["planes"]["affect"]["problems"])


def test_backup_to_a_file_is_refused_by_name(filled: Files, admin: Any, tmp_path: Path) -> None:
    target = tmp_path / "afile"
    target.write_text("not a directory")
    ran = admin("backup", "--to", str(target))
    assert ran.code == 2, ran.out + ran.err
    assert f"--to {target} is not a directory" in ran.err
    assert target.read_text() == "not a directory"


def test_backup_while_a_writer_commits(filled: Files, admin: Any, tmp_path: Path) -> None:
    stop = threading.Event()
    started = threading.Event()
    written: list[int] = []

    def writer() -> None:
        store = open_memory_store(str(filled.memory), embedding_dim=DIM)
        affect = open_affect_store(str(filled.affect))
        i = 0
        while not stop.is_set():
            store.upsert_many(
                [{"id": f"w{i}", "embedding": [1.0 + i] * DIM, "scope": {"tenant": "live"}}],
                idempotency_key=f"w{i}",
                ctx=CTX,
            )
            affect.put_many(
                [{"id": f"w{i}", "scope": {"tenant": "live"}}], idempotency_key=f"w{i}", ctx=CTX
            )
            i += 1
            written.append(i)
            started.set()
        store.close()
        affect.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert started.wait(30)
        dest = tmp_path / "backup"
        ran = admin("backup", "--to", str(dest), "--json")
    finally:
        stop.set()
        thread.join()
    assert ran.code == 0, ran.err
    assert ran.json()["check"]["ok"] is True
    copies = ["--memory-db", str(dest / "memory.db"), "--affect-db", str(dest / "affect.db")]
    assert admin("check", *copies).code == 0
    copied = admin("stats", *copies, "--json").json()["planes"]
    assert copied["memory"]["records"]["chunk"] >= 121
    assert admin("backup", "--to", str(dest)).code == 2  # never overwrites


def test_prune_drops_expired_entries(filled: Files, admin: Any) -> None:
    past = time.time() - 40 * 24 * 3600
    store = open_memory_store(str(filled.memory), embedding_dim=DIM, clock=lambda: past)
    store.upsert_many(
        [{"id": "old", "embedding": [1.0] * DIM}],
        idempotency_key="old",
        ctx=CTX,
        idempotency_class="ephemeral",
    )
    store.close()
    ledger = JtiLedger(str(filled.dir / "memory.jti.db"))
    ledger.claim("gone", past)
    ledger.claim("live", time.time() + 300)
    ledger.close()
    assert admin("stats", "--json").json()["planes"]["memory"]["idempotency_expired"] == 1
    report = admin("prune", "--json").json()
    assert report["idempotency"] == {"memory": 1, "affect": 0}
    assert report["jti"] == {str(filled.dir / "memory.jti.db"): 1}
    assert admin("stats", "--json").json()["jti"][0]["entries"] == 1


def server_settings(files: Files) -> Settings:
    """The settings ``serve`` would run with over these files."""
    return load_settings(
        {
            "RATATOSKR_MEMORY_DB": str(files.memory),
            "RATATOSKR_AFFECT_DB": str(files.affect),
            "RATATOSKR_MEMORY_EMBEDDING_DIM": str(DIM),
            "RATATOSKR_HEIMDALL_KEY": "k" * 32,
        },
        cwd=files.dir,
    )


def test_the_servers_one_ledger_is_beside_the_memory_file_and_stats_finds_it(
    files: Files, admin: Any
) -> None:
    # what serve runs before its workers start: it makes the ledger
    check_stores(server_settings(files))
    assert (files.dir / "memory.jti.db").is_file()
    assert not (files.dir / "affect.jti.db").exists()  # both planes share the one ledger
    report = admin("stats", "--json").json()
    assert [ledger["path"] for ledger in report["jti"]] == [str(files.dir / "memory.jti.db")]
    assert admin("prune", "--json").json()["jti"] == {str(files.dir / "memory.jti.db"): 0}
    assert not (files.dir / "affect.jti.db").exists()  # no admin command creates one


def test_missing_files_are_reported_not_created(
    tmp_path: Path, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATATOSKR_MEMORY_DB", str(tmp_path / "none.db"))
    monkeypatch.setenv("RATATOSKR_AFFECT_DB", str(tmp_path / "none2.db"))
    ran = admin("stats")
    assert ran.code == 2 and "no database found" in ran.err
    assert admin("list", "memory").code == 2
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ["erase", "--scope", "tenant=acme", "--yes"],
        ["backup", "--to", "BACKUP"],
        ["check"],
        ["stats"],
        ["prune"],
    ],
    ids=lambda c: c[0],
)
def test_a_misspelt_plane_file_is_an_error_not_a_plane_left_out(
    filled: Files, admin: Any, command: list[str]
) -> None:
    """One plane named by a path that does not exist: the command stops (exit 2) naming
    it, and touches neither plane, rather than working on the other one alone."""
    before = admin("stats", "--json").json()["planes"]["affect"]
    misspelt = str(filled.dir / "memroy.db")
    args = [str(filled.dir / "copy") if a == "BACKUP" else a for a in command]
    ran = admin(*args, "--memory-db", misspelt)
    assert ran.code == 2, ran.out + ran.err
    assert misspelt in ran.err and "--memory-db" in ran.err
    assert not (filled.dir / "copy").exists() and not (filled.dir / "memroy.db").exists()
    assert admin("stats", "--json").json()["planes"]["affect"] == before


@pytest.mark.parametrize(
    "command", [["stats"], ["prune"], ["backup", "--to", "BACKUP"]], ids=lambda c: c[0]
)
def test_a_misspelt_jti_ledger_is_an_error_not_a_ledger_left_out(
    filled: Files, admin: Any, command: list[str]
) -> None:
    """A ledger named with ``--jti-db`` that does not exist stops the command (exit 2)
    naming the flag: a typo must not leave the ledger unpruned, or a backup without it
    (whose server would take again every token used before), without a word."""
    misspelt = str(filled.dir / "memroy.jti.db")
    args = [str(filled.dir / "copy") if a == "BACKUP" else a for a in command]
    ran = admin(*args, "--jti-db", misspelt)
    assert ran.code == 2, ran.out + ran.err
    assert misspelt in ran.err and "--jti-db" in ran.err
    assert not (filled.dir / "memroy.jti.db").exists()
    assert not (filled.dir / "copy").exists()  # the backup made nothing


def test_an_existing_file_keeps_its_own_dimension_whatever_dim_says(
    filled: Files, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--dim`` (or the variable, left in the shell from another deployment) only
    creates a file: a healthy one of another dimension is not refused, nor failed by
    ``check``."""
    assert admin("list", "memory", "--dim", str(DIM * 2), "--json").json()["records"]
    monkeypatch.setenv("RATATOSKR_MEMORY_EMBEDDING_DIM", str(DIM * 2))
    ran = admin("check", "--json")
    assert ran.code == 0, ran.out + ran.err
    assert ran.json()["planes"]["memory"]["problems"] == []


@pytest.mark.parametrize("flag", ["--memory-db", "--affect-db", "--jti-db"])
def test_an_empty_location_flag_is_refused_not_taken_for_the_default(
    filled: Files, admin: Any, flag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--memory-db "$UNSET"`` in a script: the command stops (exit 2) naming the flag,
    rather than erasing in whatever ``./data`` the working directory holds."""
    monkeypatch.chdir(filled.dir)
    ran = admin("erase", "--scope", "tenant=acme", "--yes", flag, "")
    assert ran.code == 2, ran.out + ran.err
    assert f"{flag} is empty" in ran.err
    assert admin("stats", "--json").json()["planes"]["memory"]["records"] == {"chunk": 120}


@pytest.mark.parametrize(
    ("flag", "location"),
    [
        ("--memory-db", "postgress://ops:pw-9f3c1e@db.internal/ratatoskr"),
        ("--affect-db", "mysql://ops:pw-9f3c1e@db.internal/ratatoskr"),
        ("--jti-db", "sqlite://ops:pw-9f3c1e@ledger"),
    ],
    ids=["misspelt-scheme", "foreign-scheme", "jti"],
)
@pytest.mark.parametrize(
    "command",
    [
        ["list", "memory"],
        ["stats"],
        ["erase", "--scope", "tenant=acme", "--yes"],
        ["import", "memory", "LINES"],
    ],
    ids=lambda c: c[0],
)
def test_a_url_that_is_no_postgresql_url_is_refused_without_its_password(
    filled: Files, admin: Any, command: list[str], flag: str, location: str
) -> None:
    """A URL-like location of another scheme (or a misspelt ``postgresql``) is neither a
    file nor a database this build serves: the command stops (exit 2) naming the setting,
    not the URL with its password, and neither reads nor creates anything."""
    lines = filled.dir / "lines.jsonl"
    lines.write_bytes(b"")
    before = sorted(p.name for p in filled.dir.iterdir())
    args = [str(lines) if a == "LINES" else a for a in command]
    ran = admin(*args, flag, location)
    assert ran.code == 2, ran.out + ran.err
    assert flag in ran.err and "is not served" in ran.err
    assert "pw-9f3c1e" not in ran.out + ran.err
    assert sorted(p.name for p in filled.dir.iterdir()) == before
    assert admin("stats", "--json").json()["planes"]["memory"]["records"] == {"chunk": 120}


def test_a_swapped_or_foreign_file_is_named_for_what_it_is(filled: Files, admin: Any) -> None:
    """The two plane files given the wrong way round, or a file that is not SQLite: the
    message says so, not that a schema is too new or a key is missing."""
    memory, affect = str(filled.memory), str(filled.affect)
    ran = admin("check", "--memory-db", affect, "--affect-db", memory)  # a failed check
    assert ran.code == 1 and "the affect plane's database, not the memory plane's" in ran.out
    assert "the memory plane's database, not the affect plane's" in ran.out
    ran = admin("stats", "--affect-db", memory)
    assert ran.code == 2 and "the memory plane's database, not the affect plane's" in ran.err
    garbage = filled.dir / "garbage.db"
    garbage.write_bytes(b"not sqlite at all " * 500)
    for flag in ("--memory-db", "--affect-db"):
        ran = admin("check", flag, str(garbage))
        assert ran.code == 1 and "not a SQLite database" in ran.out, ran.out + ran.err
        ran = admin("stats", flag, str(garbage))
        assert ran.code == 2 and "not a SQLite database" in ran.err, ran.err
        plane = flag[2:-3]  # stats reads both files: the message says which one is bad
        assert f"the {plane} plane's file {garbage}" in ran.err, ran.err
        ran = admin("backup", "--to", str(filled.dir / "copies"), flag, str(garbage))
        assert ran.code == 2 and f"the {plane} plane's file {garbage}" in ran.err, ran.err
        assert not (filled.dir / "copies").exists()  # refused before anything was made
    assert garbage.read_bytes() == b"not sqlite at all " * 500
    # the stores as the server opens them: refused before any migration touches the file
    untouched = filled.affect.read_bytes()
    with pytest.raises(SchemaError, match="the affect plane's database, not the memory plane's"):
        open_memory_store(affect, embedding_dim=DIM)
    with pytest.raises(SchemaError, match="the memory plane's database, not the affect plane's"):
        open_affect_store(memory)
    with pytest.raises(SchemaError, match="not a SQLite database"):
        open_affect_store(str(garbage))
    assert filled.affect.read_bytes() == untouched


def test_a_truncated_memory_file_is_named_damaged(filled: Files, admin: Any) -> None:
    """A partial copy (the first part of a backup) is reported as damaged, not as a file
    of another kind: the operator's next step is a restore."""
    whole = filled.dir / "whole.db"
    source = apsw.Connection(str(filled.memory), flags=apsw.SQLITE_OPEN_READONLY)
    target = apsw.Connection(str(whole))
    with target.backup("main", source, "main") as backup:
        backup.step(-1)
    target.close()
    source.close()
    cut = filled.dir / "cut.db"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    ran = admin("check", "--memory-db", str(cut))
    assert ran.code == 1 and "damaged" in ran.out, ran.out + ran.err
    assert "not a memory database" not in ran.out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["admin", command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "example:" in out and f"ratatoskr admin {command}" in out


def test_a_backup_carries_the_used_tokens(filled: Files, admin: Any, tmp_path: Path) -> None:
    """A server started on the copies refuses a token the original server took."""
    now = time.time()
    ledger = JtiLedger(str(filled.dir / "memory.jti.db"))
    assert ledger.claim("used-before", now + 600)
    assert ledger.claim("long-expired", now - 5)
    ledger.close()
    dest = tmp_path / "copy"
    ran = admin("backup", "--to", str(dest), "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["jti"] == {"path": str(dest / "memory.jti.db"), "entries": 1}
    copied = JtiLedger(str(dest / "memory.jti.db"))
    try:
        assert copied.claim("used-before", now + 600) is False
        assert copied.claim("long-expired", now + 600) is True
    finally:
        copied.close()
    shown = admin("backup", "--to", str(tmp_path / "again"))
    assert "jti ledger -> " in shown.out and "(1 unexpired entries)" in shown.out
    # refused before anything is copied: a ledger copy already there, or no ledger given
    held = tmp_path / "held"
    held.mkdir()
    (held / "memory.jti.db").write_bytes(b"")
    ran = admin("backup", "--to", str(held))
    assert ran.code == 2 and "refusing to overwrite" in ran.err
    assert [p.name for p in held.iterdir()] == ["memory.jti.db"]
    ran = admin("backup", "--to", str(tmp_path / "none"), "--jti-db", str(filled.memory))
    assert ran.code == 2 and "not a jti ledger" in ran.err, ran.err
    assert not (tmp_path / "none").exists()


def test_a_file_in_the_ledgers_place_that_is_no_ledger_fails_check_stats_and_the_start(
    filled: Files, admin: Any, tmp_path: Path
) -> None:
    """A plane file restored or copied where the jti ledger goes: every mutating call would
    fail on it, so the check fails, stats says why and the server does not start."""
    ledger = filled.dir / "memory.jti.db"
    JtiLedger(str(ledger)).close()
    assert admin("check").code == 0
    assert "jti ledger: ok" in admin("check").out
    ledger.write_bytes(filled.affect.read_bytes())
    ran = admin("check")
    assert ran.code == 1 and "check FAILED" in ran.out
    assert "jti ledger: 1 problem(s)" in ran.out
    assert "the affect plane's database, not a jti ledger" in ran.out
    report = admin("check", "--json").json()
    assert report["jti"][0]["path"] == str(ledger) and not report["ok"]
    stats = admin("stats", "--json")
    assert stats.code == 0  # the planes' figures are still shown
    assert "not a jti ledger" in stats.json()["jti"][0]["problem"]
    with pytest.raises(SettingsError, match="RATATOSKR_MEMORY_DB: the jti ledger beside it"):
        check_stores(server_settings(filled))
    empty = tmp_path / "empty.db"
    apsw.Connection(str(empty)).execute("CREATE TABLE other (x); PRAGMA user_version = 1")
    with pytest.raises(SchemaError, match="not a jti ledger"):
        JtiLedger(str(empty))
