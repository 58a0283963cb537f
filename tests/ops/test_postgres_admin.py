"""``ratatoskr admin`` against PostgreSQL URLs, and ``admin migrate`` from the SQLite files.

The migration copies every row as stored: afterwards the PostgreSQL stores answer exactly as
the files did, replays and revision checks included, and an affect cursor handed out before
the move pages on after it. It refuses a target that holds records, resumes where a stopped
run left off, and checks the copy at the end.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from typing import Any, cast

import pytest

from ratatoskr.affect.postgres import transfer as affect_transfer
from ratatoskr.affect.postgres.store import PgAffectStore
from ratatoskr.affect.store import open_affect_store
from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import IdempotencyConflict, RevisionMismatch
from ratatoskr.memory.postgres.store import PgMemoryStore
from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops import migrate as migrate_ops
from ratatoskr.ops.locations import open_affect, open_ledger, open_memory
from ratatoskr.ops.stores import Paths, Stores
from ratatoskr.postgres.jti import PgJtiLedger
from ratatoskr.postgres.probe import component_version, unfinished_migrations
from ratatoskr.server.app import check_stores
from ratatoskr.server.settings import SettingsError, load_settings
from ratatoskr.sqlite.jti import JtiLedger, ledger_beside
from tests.backends import postgres_schema, postgres_server
from tests.ops.conftest import CTX, DIM, Files, chunks
from tests.server.harness import clean_env, free_port

OTHER = CallContext(actor="someone-else")


@pytest.fixture
def url() -> str:
    return postgres_schema("admin")


def both_planes_at(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """Both planes named at ``url`` through the environment, as the server names them."""
    monkeypatch.setenv("RATATOSKR_MEMORY_DB", url)
    monkeypatch.setenv("RATATOSKR_AFFECT_DB", url)


def _inexact_chunk() -> dict[str, Any]:
    """A vector float32 cannot hold exactly, an id holding U+0000: stored as they came."""
    return {"id": "odd\x00id", "embedding": [0.1] * DIM, "scope": {"tenant": "acme"}}


def test_migrate_copies_everything_and_the_stores_answer_as_before(
    filled: Files, url: str, admin: Any
) -> None:
    memory = open_memory_store(str(filled.memory), embedding_dim=DIM)
    memory.upsert_many([_inexact_chunk()], idempotency_key="odd", ctx=CTX)
    memory.upsert_many(chunks(3), idempotency_key="rewrite", ctx=CTX)  # revisions 2
    before = memory.get_many(["odd\x00id", "c0000", "c0001", "c0100"])
    memory.close()
    affect = open_affect_store(str(filled.affect))
    page = affect.list(limit=15, scope_all={"tenant": "acme"})
    rest = affect.list(limit=500, scope_all={"tenant": "acme"}, cursor=page["next_cursor"])
    affect.close()

    ran = admin("migrate", "--to", url, "--json")
    assert ran.code == 0, ran.err
    report = ran.json()
    assert report["ok"] is True and set(report["planes"]) == {"memory", "affect"}
    assert report["planes"]["memory"]["copied"] == 121

    pg_memory = cast(PgMemoryStore, open_memory(url, embedding_dim=DIM))  # a postgresql:// URL
    pg_affect = cast(PgAffectStore, open_affect(url))
    try:
        assert pg_memory.get_many(["odd\x00id", "c0000", "c0001", "c0100"]) == before
        # the idempotency entries came along: a replay replays, a reused key conflicts
        again = pg_memory.upsert_many(chunks(3), idempotency_key="rewrite", ctx=CTX)
        assert again == {"upserted": 3, "replayed": True}
        with pytest.raises(IdempotencyConflict):
            pg_memory.upsert_many(chunks(2), idempotency_key="rewrite", ctx=CTX)
        with pytest.raises(RevisionMismatch):
            pg_memory.upsert_many(
                chunks(1), idempotency_key="n", ctx=OTHER, expected_revisions={"c0000": 1}
            )
        # a cursor made by the SQLite store pages on in PostgreSQL
        moved = pg_affect.list(limit=500, scope_all={"tenant": "acme"}, cursor=page["next_cursor"])
        assert moved == rest
    finally:
        pg_memory.close()
        pg_affect.close()

    refused = admin("migrate", "--to", url)
    assert refused.code == 2 and "this migration finished earlier" in refused.err
    assert "rows" not in refused.err  # no empty progress bars above the refusal


def test_a_stopped_migration_resumes_after_its_last_batch(
    files: Files, url: str, admin: Any, tmp_path: Any
) -> None:
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    records = chunks(2500)
    for start in range(0, len(records), 500):
        memory.upsert_many(records[start : start + 500], idempotency_key=f"b{start}", ctx=CTX)
    memory.close()

    class Stop(Exception):
        pass

    def stop_after_first(plane: str, rows: int) -> None:
        raise Stop

    paths = Paths(str(files.memory), str(files.affect))
    with Stores(paths) as stores, pytest.raises(Stop):
        migrate_ops.migrate(stores, url, progress=stop_after_first)
    # meanwhile no operator's write goes into the half-copied plane (its end check would fail)
    first = str(records[0]["id"])
    lines = tmp_path / "more.jsonl"
    lines.write_text('{"id": "extra", "embedding": [1, 0, 0, 0, 0, 0, 0, 0]}\n')
    for command in (
        ["forget", "memory", "--ids", first, "--yes"],
        ["erase", "--scope", "tenant=acme", "--yes"],
        ["import", "memory", str(lines)],
    ):
        ran = admin(*command, "--memory-db", url, "--affect-db", str(files.affect))
        assert ran.code == 2 and "unfinished admin migrate" in ran.err, (command, ran.err)
    with Stores(paths) as stores:
        report = migrate_ops.migrate(stores, url)
    assert report["ok"] is True
    assert report["planes"]["memory"]["copied"] == 1500  # the first 1,000 were committed
    pg_memory = open_memory(url, embedding_dim=DIM)
    try:
        assert pg_memory.record_counts() == {"chunk": 2500}
    finally:
        pg_memory.close()


def test_a_migration_whose_check_fails_stays_unfinished(files: Files, url: str) -> None:
    """A copy that differs from its source (here a row removed from the target between two
    batches) fails the end check, and the database stays marked unfinished: ``serve``
    and ``admin check`` refuse it, not only the run that found it."""
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    records = chunks(1500)
    for start in range(0, len(records), 500):
        memory.upsert_many(records[start : start + 500], idempotency_key=f"b{start}", ctx=CTX)
    memory.close()
    target = cast(PgMemoryStore, open_memory(url, embedding_dim=DIM))

    def lose_a_row(plane: str, rows: int) -> None:
        target.db.write(
            lambda conn: conn.execute(
                "DELETE FROM memory_chunks WHERE ctid = (SELECT min(ctid) FROM memory_chunks)"
            )
        )

    paths = Paths(str(files.memory), str(files.affect))
    try:
        with Stores(paths) as stores:
            report = migrate_ops.migrate(stores, url, progress=lose_a_row)
    finally:
        target.close()
    assert report["ok"] is False and report["planes"]["memory"]["checked"] is False
    assert unfinished_migrations(url) == ["memory"]
    with Stores(paths) as stores:  # run again: the same difference, still unfinished
        assert migrate_ops.migrate(stores, url)["ok"] is False
    assert unfinished_migrations(url) == ["memory"]


def test_a_database_that_does_not_exist_is_said_once(files: Files) -> None:
    """The pool's reconnect warnings (libpq's text, three times over five seconds) are not
    the operator's to read: the command's own message is. A process of its own, as an
    operator runs it: pytest's logging would catch the warnings in process."""
    missing = postgres_server().url("no_such_database")
    ran = subprocess.run(
        [sys.executable, "-m", "ratatoskr", "admin", "migrate", "--to", missing, "--json"],
        capture_output=True,
        text=True,
        cwd=files.dir,
        env=clean_env(
            {"RATATOSKR_MEMORY_DB": str(files.memory), "RATATOSKR_AFFECT_DB": str(files.affect)}
        ),
        timeout=60,
    )
    assert ran.returncode == 2
    assert ran.stderr.strip().splitlines() == [
        f"ratatoskr admin migrate: {ran.stderr.split(': ', 1)[1].strip()}"
    ]
    assert 'database "no_such_database" does not exist' in ran.stderr


def test_every_admin_command_works_against_urls(
    filled: Files, url: str, admin: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert admin("migrate", "--to", url).code == 0
    url = url.replace("postgres@", "postgres:hunter2@")  # the test cluster trusts; shown masked
    both_planes_at(monkeypatch, url)

    listed = admin("list", "memory", "--scope", "tenant=acme", "--json").json()
    assert listed["records"] and all(r["scope"]["tenant"] == "acme" for r in listed["records"])
    explored = admin("explore", "affect", "--facet", "kind", "--json").json()
    assert {b["value"]: b["count"] for b in explored["buckets"]} == {"state": 40, "event": 60}
    got = admin("get", "memory", "c0001", "--json").json()
    assert got[0]["id"] == "c0001"
    assert admin("forget", "memory", "--ids", "c0001", "--yes").code == 0
    assert admin("get", "memory", "c0001", "--json").json() == []
    erased = admin("erase", "--scope", "tenant=beta", "--yes", "--json")
    assert erased.code == 0, erased.err
    assert admin("list", "memory", "--scope", "tenant=beta", "--json").json()["records"] == []
    open_ledger(url).close()  # as a server makes it
    stats = admin("stats", "--json")
    assert stats.json()["planes"]["memory"]["records"]["chunk"] > 0
    shown = admin("stats")
    assert "hunter2" not in stats.out + shown.out + shown.err
    assert "jti ledger" in shown.out and "None" not in shown.out  # its sync is the server's
    assert "postgres:***@" in stats.json()["planes"]["memory"]["path"]
    # the durability in force, as SQLite's synchronous (the test cluster runs without fsync)
    assert {p["synchronous"] for p in stats.json()["planes"].values()} == {"fsync=off"}
    assert "fsync=off" in shown.out
    assert admin("check").code == 0
    backup = admin("backup", "--to", str(tmp_path / "backup"), "--json")
    assert backup.code == 0, backup.err
    assert backup.json()["check"]["ok"] is True
    assert admin("prune", "--json").code == 0
    lines = tmp_path / "more.jsonl"
    lines.write_text('{"id": "new-1", "scope": {"tenant": "acme"}, "mood": "ok"}\n')
    imported = admin("import", "affect", str(lines), "--kind", "state", "--json")
    assert imported.code == 0, imported.err
    assert admin("get", "affect", "new-1", "--json").json()[0]["kind"] == "state"


def test_a_read_only_plane_stops_an_erase_before_anything_is_removed_and_still_lists(
    filled: Files, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The affect plane on a database that takes no write (a standby): an empty transaction
    passes there, so the erase must try a real write before it removes anything."""
    memory_url, affect_url = postgres_schema("ro_memory"), postgres_schema("ro_affect")
    for url in (memory_url, affect_url):  # both planes into each; one of each is used
        moved = admin("migrate", "--to", url)
        assert moved.code == 0, moved.err
    read_only = affect_url.replace("options=", "options=-cdefault_transaction_read_only%3Don%20")
    monkeypatch.setenv("RATATOSKR_MEMORY_DB", memory_url)
    monkeypatch.setenv("RATATOSKR_AFFECT_DB", read_only)
    before = admin("explore", "memory", "--facet", "tenant", "--json").json()["buckets"]
    ran = admin("erase", "--scope", "tenant=acme", "--yes")
    assert ran.code == 2
    assert "nothing was erased: the affect plane cannot take a write now" in ran.err, ran.err
    assert admin("explore", "memory", "--facet", "tenant", "--json").json()["buckets"] == before
    # a read-only plane still pages through its records, cursor after cursor
    seen: list[str] = []
    cursor: list[str] = []
    while True:
        page = admin("list", "affect", "--limit", "30", *cursor, "--json")
        assert page.code == 0, page.err
        seen += [r["id"] for r in page.json()["records"]]
        if page.json()["next_cursor"] is None:
            break
        cursor = ["--cursor", page.json()["next_cursor"]]
    assert len(seen) == len(set(seen)) == 100


def test_check_names_a_dropped_table_and_the_other_commands_say_it_is_missing(
    filled: Files, url: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert admin("migrate", "--to", url).code == 0
    memory = cast(PgMemoryStore, open_memory(url, embedding_dim=DIM))
    try:
        memory.db.write(lambda conn: conn.execute("DROP TABLE memory_idempotency"))
    finally:
        memory.close()
    both_planes_at(monkeypatch, url)
    checked = admin("check", "--json")
    assert checked.code == 1
    problems = checked.json()["planes"]["memory"]["problems"]
    assert problems == ["schema: table memory_idempotency is missing"]
    for command in (["stats"], ["prune"], ["erase", "--scope", "tenant=acme", "--yes"]):
        ran = admin(*command)
        assert ran.code == 2 and "Traceback" not in ran.err, (command, ran.err)
        assert 'relation "memory_idempotency" does not exist' in ran.err, (command, ran.err)


def test_a_postgresql_ledger_whose_table_was_dropped_fails_check_and_stats_says_so(
    filled: Files, url: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert admin("migrate", "--to", url).code == 0
    ledger = cast(PgJtiLedger, open_ledger(url))  # as a server makes it
    try:
        ledger.db.write(lambda conn: conn.execute("DROP TABLE ratatoskr_jti"))
    finally:
        ledger.close()
    both_planes_at(monkeypatch, url)
    checked = admin("check", "--json")
    assert checked.code == 1
    (found,) = checked.json()["jti"]
    assert any('relation "ratatoskr_jti" does not exist' in p for p in found["problems"])
    stats = admin("stats", "--json")
    assert stats.code == 0, stats.err
    (shown,) = stats.json()["jti"]
    assert 'relation "ratatoskr_jti" does not exist' in shown["problem"]


def _settings(url: str) -> Any:
    return load_settings(
        {
            "RATATOSKR_MEMORY_DB": url,
            "RATATOSKR_AFFECT_DB": url,
            "RATATOSKR_MEMORY_EMBEDDING_DIM": str(DIM),
            "RATATOSKR_HEIMDALL_KEY": "k" * 32,
        }
    )


def test_a_migration_stopped_between_planes_resumes_and_nothing_serves_it_meanwhile(
    filled: Files, url: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Stop(Exception):
        pass

    def stopped(*args: Any) -> Any:
        raise Stop  # the run dies the moment the memory plane is done

    paths = Paths(str(filled.memory), str(filled.affect))
    with monkeypatch.context() as patch:
        patch.setattr(affect_transfer, "batches", stopped)
        with Stores(paths) as stores, pytest.raises(Stop):
            migrate_ops.migrate(stores, url)

    # half a deployment: the memory plane complete, the affect plane empty
    with pytest.raises(SettingsError, match="unfinished ratatoskr admin migrate"):
        check_stores(_settings(url))
    with monkeypatch.context() as env:
        env.setenv("RATATOSKR_MEMORY_DB", url)
        env.setenv("RATATOSKR_AFFECT_DB", url)
        checked = admin("check", "--json")
        assert checked.code == 1
        assert checked.json()["planes"]["memory"]["problems"] == []
        assert "has not finished" in checked.json()["planes"]["affect"]["problems"][-1]

    again = admin("migrate", "--to", url, "--json")
    assert again.code == 0, again.err
    report = again.json()
    assert report["planes"]["memory"] == {
        "source": str(filled.memory),
        "copied": 0,  # finished by the first run, checked again
        "rows": report["planes"]["memory"]["rows"],
        "checked": True,
    }
    assert report["planes"]["affect"]["copied"] == 100 and report["ok"] is True
    check_stores(_settings(url))  # whole now: a server may start
    finished = admin("migrate", "--to", url)
    assert finished.code == 2 and "this migration finished earlier" in finished.err


def test_the_tokens_used_before_the_move_stay_used_after_it(filled: Files, url: str) -> None:
    now = time.time()
    ledger = JtiLedger(ledger_beside(str(filled.memory)))
    assert ledger.claim("used-before", now + 600)
    assert ledger.claim("long-expired", now - 5)  # its token can no longer verify anyway
    ledger.close()

    with Stores(Paths(str(filled.memory), str(filled.affect))) as stores:
        assert migrate_ops.migrate(stores, url)["jti"] == 1

    moved = open_ledger(url)  # the ledger a server on the database claims tokens in
    try:
        assert moved.claim("used-before", now + 600) is False  # a replay, refused
        assert moved.claim("long-expired", now + 600) is True
    finally:
        moved.close()


def test_a_plane_missing_from_the_named_database_is_an_error_not_left_out(
    filled: Files, url: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a mistyped source file stops the migration before the target is touched
    refused = admin("migrate", "--affect-db", str(filled.dir / "afect.db"), "--to", url)
    assert refused.code == 2 and "afect.db" in refused.err
    assert component_version(url, "memory") is None
    # and so does a mistyped ledger: the database is not claimed for these files
    typo = str(filled.dir / "memroy.jti.db")
    refused = admin("migrate", "--jti-db", typo, "--to", url)
    assert refused.code == 2 and typo in refused.err and "--jti-db" in refused.err
    assert component_version(url, "memory") is None
    assert component_version(url, "affect") is None

    monkeypatch.delenv("RATATOSKR_AFFECT_DB")
    monkeypatch.chdir(filled.dir)  # no ./data/affect.db: the memory plane alone moves
    ran = admin("migrate", "--to", url, "--json")
    assert ran.code == 0, ran.err
    assert set(ran.json()["planes"]) == {"memory"}
    assert ran.json()["not_migrated"] == {"affect": "no file at ./data/affect.db"}

    monkeypatch.setenv("RATATOSKR_MEMORY_DB", url)
    monkeypatch.setenv("RATATOSKR_AFFECT_DB", url)  # a database holding no affect plane
    for command in (
        ("check",),
        ("stats",),
        ("prune",),
        ("backup", "--to", str(filled.dir / "copy")),
        ("erase", "--scope", "tenant=acme", "--yes"),
    ):
        out = admin(*command)
        assert out.code == 2, command
        assert "no affect plane in the database at" in out.err, command
    assert admin("list", "memory", "--scope", "tenant=acme", "--json").json()["records"]


def test_check_reports_an_unreachable_database_as_its_planes_problem(
    filled: Files, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outage is a finding of the plane it hits (exit 1, JSON too); the other plane is
    still checked. A database that refuses (it does not exist) says why."""
    down = f"postgresql://ratatoskr:s3cret@127.0.0.1:{free_port()}/worldtree?connect_timeout=2"
    monkeypatch.setenv("RATATOSKR_MEMORY_DB", down)
    checked = admin("check", "--json")
    assert checked.code == 1, checked.err
    report = checked.json()
    assert report["planes"]["affect"]["problems"] == []
    assert "cannot be reached" in report["planes"]["memory"]["problems"][0]
    assert "s3cret" not in checked.out + checked.err

    missing = postgres_server().url("no_such_database_here")
    monkeypatch.setenv("RATATOSKR_MEMORY_DB", missing)
    refused = admin("check", "--json").json()["planes"]["memory"]["problems"][0]
    assert 'database "no_such_database_here" does not exist' in refused


def _migrated_then_damaged(admin: Any, url: str, damage: str) -> None:
    """The files migrated into ``url``, then ``damage`` (a statement) run on the memory
    plane behind the store's back."""
    assert admin("migrate", "--to", url).code == 0
    memory = cast(PgMemoryStore, open_memory(url, embedding_dim=DIM))
    try:
        memory.db.write(lambda conn: conn.execute(damage))
    finally:
        memory.close()


def test_check_catches_a_record_that_is_not_json_on_postgresql(
    filled: Files, url: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrated_then_damaged(
        admin, url, "UPDATE memory_chunks SET record_json = '{\"id\": ' WHERE chunk_id = 'c0003'"
    )
    both_planes_at(monkeypatch, url)
    report = admin("check", "--json").json()
    assert report["planes"]["memory"]["problems"] == [
        "1 chunk(s) whose stored record is not a JSON object"
    ]
    assert report["planes"]["affect"]["problems"] == [] and report["ok"] is False


def test_a_damaged_idempotency_entry_is_reported_and_does_not_stop_an_erase_on_postgresql(
    filled: Files, url: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrated_then_damaged(
        admin,
        url,
        "UPDATE memory_idempotency SET record_ids = 'garbage' WHERE idempotency_id = "
        "(SELECT min(idempotency_id) FROM memory_idempotency)",
    )
    both_planes_at(monkeypatch, url)
    report = admin("check", "--json").json()
    assert report["planes"]["memory"]["problems"] == [
        "idempotency entries whose record ids are not a JSON list: 1"
    ]
    before = admin("stats", "--json").json()["planes"]["memory"]["records"]["chunk"]
    ran = admin("erase", "--scope", "tenant=acme", "--yes", "--json")
    assert ran.code == 0, ran.err
    removed = ran.json()["planes"]["memory"]["chunk"]
    assert removed > 0
    assert admin("stats", "--json").json()["planes"]["memory"]["records"]["chunk"] == (
        before - removed
    )


def test_check_catches_a_float64_vector_that_does_not_round_to_the_stored_one(
    filled: Files, url: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert admin("migrate", "--to", url).code == 0
    memory = cast(PgMemoryStore, open_memory(url, embedding_dim=DIM))
    try:
        memory.upsert_many([_inexact_chunk()], idempotency_key="inexact", ctx=CTX)
        monkeypatch.setenv("RATATOSKR_MEMORY_DB", url)
        monkeypatch.setenv("RATATOSKR_AFFECT_DB", url)
        assert admin("check").code == 0
        memory.db.write(
            lambda conn: conn.execute(
                "UPDATE memory_chunks SET vector_f64 = %s WHERE chunk_id = %s",
                (struct.pack(f"{DIM}d", *[0.2] * DIM), b"odd\x00id"),
            )
        )
    finally:
        memory.close()
    report = admin("check", "--json").json()
    assert report["planes"]["memory"]["problems"] == [
        "1 chunk(s) whose float64 vector is not finite or does not round to it: odd\x00id"
    ]


def test_an_empty_origin_moves_as_it_was_sent(
    files: Files, url: str, admin: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """An origin may be the empty string; it is not the missing origin, in the copy, in its
    check, and in a backup of the database."""
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    empty = {**chunks(1)[0], "id": "empty-origin", "origin": ""}
    memory.upsert_many([empty, {**chunks(2)[1], "id": "no-origin"}], idempotency_key="o", ctx=CTX)
    memory.close()
    ran = admin("migrate", "--to", url, "--json")
    assert ran.code == 0, ran.out + ran.err
    assert ran.json()["planes"]["memory"]["checked"] is True
    both_planes_at(monkeypatch, url)
    counted = admin("explore", "memory", "--facet", "origin", "--json").json()
    assert {b["value"]: b["count"] for b in counted["buckets"]} == {"": 1}
    assert admin("backup", "--to", str(tmp_path / "copy"), "--json").code == 0
    monkeypatch.setenv("RATATOSKR_MEMORY_DB", str(tmp_path / "copy" / "memory.db"))
    monkeypatch.setenv("RATATOSKR_AFFECT_DB", str(tmp_path / "copy" / "affect.db"))
    again = admin("explore", "memory", "--facet", "origin", "--json").json()
    assert {b["value"]: b["count"] for b in again["buckets"]} == {"": 1}
