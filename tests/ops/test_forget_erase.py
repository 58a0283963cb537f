"""Forget refuses empty filters and removes nothing without --yes; erase leaves no trace of
the erased subject in the database files, their WAL or shared memory."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import apsw
import pytest

from ratatoskr.affect.store import open_affect_store
from ratatoskr.core.filters import Filter
from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops import forget as forget_ops
from ratatoskr.ops.stores import Paths, Stores
from tests.lock_holder import holding_the_lock
from tests.ops.conftest import CTX, DIM, Files


def counts(admin: Any, plane: str) -> dict[str, int]:
    page = admin("explore", plane, "--facet", "tenant", "--json").json()
    kinds = {"memory": "chunk"}
    if plane == "memory":
        return {kinds[plane]: page["total"]}
    by_kind = admin("explore", "affect", "--facet", "kind", "--json").json()
    return {b["value"]: b["count"] for b in by_kind["buckets"]}


def test_forget_refuses_an_empty_filter(filled: Files, admin: Any) -> None:
    before = counts(admin, "memory")
    for args in ([], ["--yes"], ["--dry-run"]):
        ran = admin("forget", "memory", *args)
        assert ran.code == 2
        assert "empty filter" in ran.err
    assert admin("erase", "--scope", "tenant=", "--yes").code == 2
    assert counts(admin, "memory") == before


def test_forget_without_yes_removes_nothing(filled: Files, admin: Any) -> None:
    before = counts(admin, "affect")
    ran = admin("forget", "affect", "--scope", "tenant=acme", "--json")
    assert ran.code == 1
    assert ran.json()["removed"] is False
    would = ran.json()["planes"]["affect"]
    assert counts(admin, "affect") == before
    dry = admin("forget", "affect", "--scope", "tenant=acme", "--dry-run", "--yes", "--json")
    assert dry.code == 0 and dry.json()["planes"]["affect"] == would
    assert counts(admin, "affect") == before
    human = admin("forget", "affect", "--scope", "tenant=acme")
    assert "nothing removed" in human.out and "--yes" in human.out


def test_a_removal_that_matches_nothing_says_so(filled: Files, admin: Any) -> None:
    """Zero records matched: "add --yes" would send the operator to remove nothing."""
    for command in (
        ("forget", "memory", "--scope", "tenant=nobody"),
        ("erase", "--scope", "end_user=nobody"),
    ):
        ran = admin(*command)
        assert ran.code == 1
        assert "nothing matches: no record to remove." in ran.out and "--yes" not in ran.out


def test_forget_by_filter_and_by_ids(filled: Files, admin: Any) -> None:
    acme = admin("explore", "affect", "--facet", "kind", "--narrow", "tenant=acme", "--json")
    expected = {b["value"]: b["count"] for b in acme.json()["buckets"]}
    ran = admin(
        "forget", "affect", "--scope", "tenant=acme", "--narrow", "kind=event", "--yes", "--json"
    )
    assert ran.code == 0
    assert ran.json()["planes"]["affect"] == {"event": expected["event"]}
    left = admin("explore", "affect", "--facet", "kind", "--narrow", "tenant=acme", "--json")
    assert {b["value"]: b["count"] for b in left.json()["buckets"]} == {"state": expected["state"]}
    by_ids = admin("forget", "memory", "--ids", "c0001", "c0002", "nope", "--yes", "--json")
    assert by_ids.json()["planes"]["memory"] == {"chunk": 2}
    assert admin("get", "memory", "c0001", "c0003", "--json").json()[0]["id"] == "c0003"
    assert admin("check").code == 0


def test_forget_takes_every_ids_list_when_repeated(filled: Files, admin: Any) -> None:
    """One ``--ids`` per record, as a deletion request is often written: all are removed,
    not the last list alone."""
    ran = admin("forget", "memory", "--ids", "c0001", "--ids", "c0002", "c0003", "--yes", "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["planes"]["memory"] == {"chunk": 3}
    assert admin("get", "memory", "c0001", "c0002", "c0003", "c0004", "--json").json() == [
        admin("get", "memory", "c0004", "--json").json()[0]
    ]


def test_forget_by_ids_of_one_kind_keeps_the_other_kinds_namesake(
    filled: Files, admin: Any
) -> None:
    affect = open_affect_store(str(filled.affect))
    scope = {"tenant": "acme"}
    affect.put_many([{"id": "twin", "scope": scope}], idempotency_key="twin-s", ctx=CTX)
    event = {"id": "twin", "at": "2025-01-01T00:00:00Z", "scope": scope}
    affect.append_events([event], idempotency_key="twin-e", ctx=CTX)
    affect.close()
    ids = ("forget", "affect", "--ids", "twin")
    assert admin(*ids, "--narrow", "tenant=acme", "--yes").code == 2  # ids, or a filter
    assert admin(*ids, "--narrow", "kind=chunk", "--yes").code == 2
    ran = admin(*ids, "--narrow", "kind=state", "--yes", "--json")
    assert ran.code == 0 and ran.json()["planes"]["affect"] == {"state": 1}
    assert [r["kind"] for r in admin("get", "affect", "twin", "--json").json()] == ["event"]


def _traces(directory: Path, needles: list[bytes]) -> list[str]:
    found = []
    for path in sorted(directory.iterdir()):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.name}: {n!r}" for n in needles if n in data]
    return found


def test_erase_removes_every_trace(filled: Files, admin: Any) -> None:
    marker = "zq-erase-marker-7f3a91"
    subject = "erase-me-5c1e9"  # the subject's own id: erased with the subject
    who = {"tenant": "acme", "end_user": subject}
    vector = [0.123456, 0.654321, 0.777777, 0.314159, 0.271828, 0.161803, 0.141421, 0.173205]
    memory = open_memory_store(str(filled.memory), embedding_dim=DIM)
    memory.upsert_many(
        [
            {"id": f"x{i}", "embedding": vector, "scope": who, "distillate": f"{marker} {i}"}
            for i in range(3)
        ],
        idempotency_key="erase-1",
        ctx=CTX,
    )
    memory.upsert_many(  # a second revision: the first one is in freed pages now
        [{"id": "x0", "embedding": vector, "scope": who, "distillate": f"{marker} again"}],
        idempotency_key="erase-2",
        ctx=CTX,
    )
    # chunks that left the subject before the erase: their change log entries named it
    elsewhere = [0.5] * DIM
    passing = [{"id": c, "embedding": elsewhere, "scope": who} for c in ("moved", "gone")]
    memory.upsert_many(passing, idempotency_key="passing", ctx=CTX)
    memory.upsert_many(
        [{"id": "moved", "embedding": elsewhere, "scope": {"tenant": "acme", "end_user": "u1"}}],
        idempotency_key="moved",
        ctx=CTX,
    )
    memory.delete_many(["gone"])
    memory.close()
    affect = open_affect_store(str(filled.affect))
    affect.put_many(
        [{"id": "sx", "scope": who, "note": marker}], idempotency_key="erase-3", ctx=CTX
    )
    affect.append_events(
        [{"id": "ex", "at": "2025-02-01T00:00:00Z", "scope": who, "note": marker}],
        idempotency_key="erase-4",
        ctx=CTX,
    )
    affect.close()
    needles = [marker.encode(), struct.pack(f"{DIM}f", *vector), subject.encode()]
    assert _traces(filled.dir, needles)  # the test would notice the content

    # A "server" keeps both files open throughout, so the WAL and -shm files stay on disk.
    server_memory = open_memory_store(str(filled.memory), embedding_dim=DIM)
    server_affect = open_affect_store(str(filled.affect))
    assert server_memory.get("x1") is not None and server_affect.get("sx") is not None
    ran = admin("erase", "--scope", f"end_user={subject}", "--yes", "--json")
    assert ran.code == 0, ran.err
    planes = ran.json()["planes"]
    assert planes["memory"]["chunk"] == 3 and planes["memory"]["idempotency"] == 2
    assert planes["affect"]["state"] == 1 and planes["affect"]["event"] == 1
    assert planes["affect"]["idempotency"] == 2
    assert planes["memory"]["wal_truncated"] and planes["affect"]["wal_truncated"]
    assert marker not in ran.out

    names = {p.name for p in filled.dir.iterdir()}
    assert {"memory.db-wal", "memory.db-shm", "affect.db-wal", "affect.db-shm"} <= names
    assert _traces(filled.dir, needles) == []
    assert server_memory.get("x1") is None and server_affect.get("sx") is None
    server_memory.close()
    server_affect.close()
    assert _traces(filled.dir, needles) == []
    assert admin("check").code == 0
    assert admin("list", "memory", "--limit", "500", "--json").json()["records"]
    assert (
        admin(
            "explore", "memory", "--facet", "end_user", "--narrow", f"end_user={subject}", "--json"
        ).json()["total"]
        == 0
    )
    # the other records are still searchable through the rebuilt vector index
    memory = open_memory_store(str(filled.memory), embedding_dim=DIM)
    hits = memory.search([1.0] * DIM, top_k=5)
    memory.close()
    assert len(hits) == 5


def test_a_damaged_idempotency_entry_is_reported_and_does_not_stop_an_erase(
    filled: Files, admin: Any
) -> None:
    """An entry whose record ids cannot be read: ``check`` names it, and an erase goes
    through, removing such an entry only when the subject's id is legible in it (it may
    name the subject) and keeping the others; before, any one stopped every erase, the
    memory plane already erased."""
    who = {"tenant": "acme", "end_user": "damaged-entry-subject"}
    memory = open_memory_store(str(filled.memory), embedding_dim=DIM)
    memory.upsert_many(
        [{"id": "dx", "embedding": [0.5] * DIM, "scope": who}], idempotency_key="d1", ctx=CTX
    )
    memory.close()
    affect = open_affect_store(str(filled.affect))
    affect.put_many([{"id": "dsx", "scope": who}], idempotency_key="d2", ctx=CTX)
    affect.close()
    conn = apsw.Connection(str(filled.affect))
    oldest = "(SELECT min(rowid) FROM affect_idempotency)"  # the fill's, another subject's
    conn.execute(f"UPDATE affect_idempotency SET record_ids = '[[[' WHERE rowid = {oldest}")
    conn.execute(
        "UPDATE affect_idempotency SET record_ids = '[\"dsx\", ' WHERE record_ids = '[\"dsx\"]'"
    )
    conn.close()

    report = admin("check", "--json").json()
    assert report["ok"] is False
    assert report["planes"]["affect"]["problems"] == [
        "idempotency entries whose record ids are not a JSON list: 2"
    ]
    ran = admin("erase", "--scope", "end_user=damaged-entry-subject", "--yes", "--json")
    assert ran.code == 0, ran.err
    planes = ran.json()["planes"]
    assert planes["memory"]["chunk"] == 1 and planes["memory"]["idempotency"] == 1
    assert planes["affect"]["state"] == 1 and planes["affect"]["idempotency"] == 1
    conn = apsw.Connection(str(filled.affect))
    left = [r[0] for r in conn.execute("SELECT record_ids FROM affect_idempotency")]
    conn.close()
    assert "[[[" in left and not any("dsx" in r for r in left)


def test_erase_refuses_an_axis_given_twice(filled: Files, admin: Any) -> None:
    """A scope holds one value per axis: a second ``end_user`` is refused, not the first
    one silently dropped (which would erase someone other than asked)."""
    before = counts(admin, "memory")
    ran = admin("erase", "--scope", "end_user=u1", "--scope", "end_user=u2", "--yes")
    assert ran.code == 2 and "end_user twice" in ran.err
    assert counts(admin, "memory") == before


def test_erase_without_yes_is_a_dry_run(filled: Files, admin: Any) -> None:
    before = counts(admin, "memory")
    ran = admin("erase", "--scope", "tenant=acme")
    assert ran.code == 1
    assert "would remove" in ran.out and "nothing removed" in ran.out
    assert counts(admin, "memory") == before


def test_every_value_a_writer_stored_can_be_narrowed_forgotten_and_erased(
    files: Files, admin: Any
) -> None:
    """Blank values and origins of any length are stored as given; explore counts them,
    so narrow, forget and erase must reach them too."""
    long_origin = "o" * 300
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    odd = [
        {"id": "blank-user", "embedding": [0.5] * DIM, "scope": {"tenant": "t", "end_user": " "}},
        {"id": "empty-origin", "embedding": [0.5] * DIM, "scope": {"tenant": "t"}, "origin": ""},
        {"id": "long-origin", "embedding": [0.5] * DIM, "scope": {"tenant": "t"}},
    ]
    odd[2]["origin"] = long_origin
    memory.upsert_many(odd, idempotency_key="odd", ctx=CTX)
    memory.close()
    for facet, value, chunk_id in (
        ("end_user", " ", "blank-user"),
        ("origin", "", "empty-origin"),
        ("origin", long_origin, "long-origin"),
    ):
        buckets = admin("explore", "memory", "--facet", facet, "--json").json()["buckets"]
        assert {"value": value, "count": 1, "narrow": f"{facet}={value}"} in buckets
        listed = admin("list", "memory", "--narrow", f"{facet}={value}", "--json")
        assert listed.code == 0, listed.err
        assert [r["id"] for r in listed.json()["records"]] == [chunk_id]
    gone = admin("forget", "memory", "--narrow", f"origin={long_origin}", "--yes", "--json")
    assert gone.code == 0 and gone.json()["planes"]["memory"] == {"chunk": 1}
    erased = admin("erase", "--scope", "end_user= ", "--yes", "--json")
    assert erased.code == 0, erased.err
    assert erased.json()["planes"]["memory"]["chunk"] == 1
    empty = admin("erase", "--scope", "end_user=", "--yes")
    assert empty.code == 2 and "scope.end_user must be a string of 1..256" in empty.err


def test_the_python_api_refuses_what_the_cli_refuses(filled: Files) -> None:
    with Stores(Paths(str(filled.memory), str(filled.affect))) as stores:
        memory = stores.get("memory")
        with pytest.raises(ValueError, match="not a list of its letters"):
            forget_ops.forget(memory, ids="c0001")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="neither was given"):
            forget_ops.forget(memory)
        for scope in ({"tenant": None}, {"planet": "x"}, {"tenant": ""}, {"tenant": 7}):
            with pytest.raises(ValueError):
                forget_ops.erase(stores, scope)  # type: ignore[arg-type]
            with pytest.raises(ValueError):
                forget_ops.forget(memory, flt=Filter(scope=scope))  # type: ignore[arg-type]
        assert admin_counts(memory) == 120  # nothing was removed


def admin_counts(store: Any) -> int:
    return int(sum(store.record_counts().values()))


def test_erase_removes_nothing_when_a_plane_cannot_take_a_write(
    filled: Files, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATATOSKR_SQLITE_BUSY_TIMEOUT_MS", "200")
    before = {p: counts(admin, p) for p in ("memory", "affect")}
    holder = holding_the_lock(filled.affect)  # a long transaction of another writer
    try:
        ran = admin("erase", "--scope", "tenant=acme", "--yes")
    finally:
        holder.communicate(b"\n")
    assert ran.code == 2
    assert "nothing was erased: the affect plane cannot take a write now" in ran.err
    assert {p: counts(admin, p) for p in ("memory", "affect")} == before


def test_an_erase_that_fails_on_one_plane_says_what_the_other_removed_and_can_be_rerun(
    filled: Files, admin: Any
) -> None:
    """A plane whose deletes fail after the check (here a foreign trigger refuses them)."""
    conn = apsw.Connection(str(filled.affect))
    conn.execute(
        "CREATE TRIGGER refuse BEFORE DELETE ON affect_states BEGIN "
        "SELECT RAISE(ABORT, 'refused by a trigger'); END"
    )
    tenants = admin("explore", "memory", "--facet", "tenant", "--json").json()["buckets"]
    acme = next(b["count"] for b in tenants if b["value"] == "acme")
    assert acme > 0
    ran = admin("erase", "--scope", "tenant=acme", "--yes", "--json")
    assert ran.code == 2
    report = ran.json()
    assert report["planes"]["memory"]["chunk"] == acme
    assert "affect" not in report["planes"] and report["incomplete"]["plane"] == "affect"
    assert "erase incomplete: memory erased, the affect plane not" in ran.err
    assert "run the same erase again" in ran.err
    conn.execute("DROP TRIGGER refuse")
    conn.close()
    again = admin("erase", "--scope", "tenant=acme", "--yes", "--json")
    assert again.code == 0, again.err
    assert again.json()["planes"]["memory"]["chunk"] == 0
    assert admin("list", "affect", "--scope", "tenant=acme", "--json").json()["records"] == []
