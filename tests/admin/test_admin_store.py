"""The operator methods every plane store has, whatever its backend: exact counts, listings
without content, whole records by id, forget and erase (seen by every other view of the
store), record counts, stats, prune, check and backup."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ratatoskr.core.errors import InvalidArguments
from ratatoskr.core.filters import KINDS, Filter
from ratatoskr.memory import rules as memory_rules
from tests.admin.conftest import DIM, Kit
from tests.backends import BACKENDS

SECRET = "content-never-listed-5c1d"
SCOPES = (
    {"tenant": "acme", "end_user": "u1"},
    {"tenant": "acme", "end_user": "u2"},
    {"tenant": "acme"},
    {"tenant": "beta", "end_user": "u1"},
    {"tenant": "beta", "agent_self": "a1"},
)


def fill(kit: Kit, per_kind: int = 10) -> dict[str, list[dict[str, Any]]]:
    """``per_kind`` records of every kind of the plane, spread over ``SCOPES``, each kind in
    two calls; the records written, by kind."""
    written: dict[str, list[dict[str, Any]]] = {}
    for kind in KINDS[kit.plane]:
        records = [
            kit.record(kind, f"{kind[0]}{i:03d}", SCOPES[i % len(SCOPES)], note=SECRET)
            for i in range(per_kind)
        ]
        if kind == "chunk":
            for i, record in enumerate(records):
                if i % 3:
                    record["origin"] = "chat" if i % 3 == 1 else "doc"
        half = per_kind // 2
        kit.write(kind, records[:half], f"{kind}-1")
        kit.write(kind, records[half:], f"{kind}-2")
        written[kind] = records
    return written


def test_count_by_is_exact_for_every_facet(kit: Kit) -> None:
    written = fill(kit)
    everything = [r for records in written.values() for r in records]
    for facet in ("tenant", "end_user", "agent_self"):
        counts = kit.store.count_by(Filter(), facet)
        expected = Counter(r["scope"][facet] for r in everything if facet in r["scope"])
        assert counts.total == len(everything)
        assert counts.missing == len(everything) - sum(expected.values())
        assert dict(counts.values) == dict(expected)
    by_kind = kit.store.count_by(Filter(), "kind")
    assert sorted(by_kind.values) == sorted((k, len(v)) for k, v in written.items())
    assert by_kind.missing == 0 and by_kind.total == len(everything)
    first = KINDS[kit.plane][0]
    narrowed = kit.store.count_by(Filter(scope={"tenant": "acme"}, kind=first), "end_user")
    acme = [r for r in written[first] if r["scope"]["tenant"] == "acme"]
    assert narrowed.total == len(acme)
    assert narrowed.missing == sum(1 for r in acme if "end_user" not in r["scope"])


def test_count_by_origin_on_memory(memory_kit: Kit) -> None:
    chunks = fill(memory_kit)["chunk"]
    counts = memory_kit.store.count_by(Filter(scope={"tenant": "acme"}), "origin")
    acme = [c for c in chunks if c["scope"]["tenant"] == "acme"]
    assert dict(counts.values) == dict(Counter(c["origin"] for c in acme if "origin" in c))
    assert counts.missing == sum(1 for c in acme if "origin" not in c)
    only_chat = memory_kit.store.count_by(Filter(origin="chat"), "tenant")
    assert only_chat.total == sum(1 for c in chunks if c.get("origin") == "chat")


def test_an_empty_origin_counts_as_a_value_not_as_missing(memory_kit: Kit) -> None:
    scope = {"tenant": "acme"}
    chunks = [memory_kit.record("chunk", f"e{i}", scope) for i in range(3)]
    chunks[0]["origin"] = ""
    chunks[1]["origin"] = "doc"
    memory_kit.write("chunk", chunks, "empty-origin")
    counts = memory_kit.store.count_by(Filter(scope=scope), "origin")
    assert (counts.total, counts.missing) == (3, 1)
    assert dict(counts.values) == {"": 1, "doc": 1}


def test_list_records_pages_by_kind_then_id_and_shows_no_content(kit: Kit) -> None:
    written = fill(kit, per_kind=7)
    expected = sorted((k, r["id"]) for k, records in written.items() for r in records)
    seen: list[tuple[str, str]] = []
    cursor = None
    for _ in range(len(expected) + 1):
        page = kit.store.list_records(Filter(), limit=3, cursor=cursor)
        assert len(page.records) <= 3
        for item in page.records:
            assert SECRET not in repr(item)
            assert set(item) <= {"kind", "id", "revision", "scope", "origin", "at"}
            assert item["revision"] == (None if item["kind"] == "event" else 1)
        seen.extend((item["kind"], item["id"]) for item in page.records)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == expected
    acme = kit.store.list_records(Filter(scope={"tenant": "acme"}), limit=500)
    assert acme.next_cursor is None
    assert {item["scope"]["tenant"] for item in acme.records} == {"acme"}
    first = kit.store.list_records(Filter(), limit=2)
    with pytest.raises(InvalidArguments):
        kit.store.list_records(Filter(scope={"tenant": "acme"}), limit=2, cursor=first.next_cursor)


def test_listed_fields_per_kind(kit: Kit) -> None:
    fill(kit, per_kind=4)
    for item in kit.store.list_records(Filter(), limit=500).records:
        assert ("origin" in item) == (item["kind"] == "chunk")
        assert ("at" in item) == (item["kind"] == "event")
        if item["kind"] == "event":
            assert item["at"] == "2025-01-01T00:00:00.000000Z"


def test_listed_event_times_are_utc_for_every_year(affect_kit: Kit) -> None:
    """An operator's listing shows each event's instant in UTC, zero-padded to four digits;
    an offset that moves it out of 0000..9999 shows the year with its sign."""
    times = {
        "e1": ("0000-01-01T00:00:00+01:00", "-0001-12-31T23:00:00.000000Z"),
        "e2": ("0000-02-29T12:00:00Z", "0000-02-29T12:00:00.000000Z"),
        "e3": ("0739-04-29T08:10:36.181692+02:00", "0739-04-29T06:10:36.181692Z"),
        "e4": ("2025-01-01T00:00:00Z", "2025-01-01T00:00:00.000000Z"),
        "e5": ("9999-12-31T23:30:00-01:00", "+10000-01-01T00:30:00.000000Z"),
    }
    scope = {"tenant": "t"}
    events = [affect_kit.record("event", i, scope, at=at) for i, (at, _) in times.items()]
    affect_kit.write("event", events, "e")
    listed = affect_kit.store.list_records(Filter(), limit=10).records
    assert {item["id"]: item["at"] for item in listed} == {i: t for i, (_, t) in times.items()}


def test_get_records_keeps_the_order_named(kit: Kit) -> None:
    written = fill(kit, per_kind=4)
    kind = KINDS[kit.plane][-1]
    ids = [written[kind][2]["id"], "missing", written[kind][0]["id"]]
    found = kit.store.get_records(ids)
    assert [(f["id"], f["kind"]) for f in found] == [(ids[0], kind), (ids[2], kind)]
    assert found[0]["record"]["note"] == SECRET


def test_an_affect_id_may_name_a_state_and_an_event(affect_kit: Kit) -> None:
    affect_kit.write("event", [affect_kit.record("event", "twin", {"tenant": "t"})], "e")
    affect_kit.write("state", [affect_kit.record("state", "twin", {"tenant": "t"})], "s")
    found = affect_kit.store.get_records(["twin"])
    assert [f["kind"] for f in found] == ["state", "event"]
    assert affect_kit.store.match(ids=["twin"]) == {"event": ["twin"], "state": ["twin"]}
    assert affect_kit.store.forget(ids=["twin"]) == {"event": 1, "state": 1}
    assert affect_kit.store.get_records(["twin"]) == []


@pytest.mark.parametrize("kind, other", [("state", "event"), ("event", "state")])
def test_a_kind_narrows_ids_to_that_kinds_records(affect_kit: Kit, kind: str, other: str) -> None:
    affect_kit.write("event", [affect_kit.record("event", "twin", {"tenant": "t"})], "e")
    affect_kit.write("state", [affect_kit.record("state", "twin", {"tenant": "t"})], "s")
    assert affect_kit.store.match(ids=["twin"], kind=kind) == {kind: ["twin"]}
    assert affect_kit.store.forget(ids=["twin"], kind=kind) == {kind: 1}
    assert [f["kind"] for f in affect_kit.store.get_records(["twin"])] == [other]
    with pytest.raises(ValueError, match="kinds are"):
        affect_kit.store.forget(ids=["twin"], kind="chunk")
    with pytest.raises(ValueError, match="narrows ids"):
        affect_kit.store.forget(flt=Filter(scope={"tenant": "t"}), kind=kind)
    assert [f["kind"] for f in affect_kit.store.get_records(["twin"])] == [other]


def test_match_names_what_forget_removes(kit: Kit) -> None:
    written = fill(kit)
    acme = Filter(scope={"tenant": "acme", "end_user": "u1"})
    matched = kit.store.match(flt=acme)
    assert set(matched) == set(KINDS[kit.plane])
    for kind, records in written.items():
        expected = [r["id"] for r in records if r["scope"] == SCOPES[0]]
        assert sorted(matched[kind]) == expected
    assert kit.store.record_counts() == {k: 10 for k in KINDS[kit.plane]}  # a dry run
    assert kit.store.forget(flt=acme) == {k: len(v) for k, v in matched.items()}
    assert kit.store.match(flt=acme) == {k: [] for k in KINDS[kit.plane]}
    assert kit.store.count_by(Filter(), "tenant").total == 10 * len(KINDS[kit.plane]) - sum(
        len(v) for v in matched.values()
    )
    kind = KINDS[kit.plane][0]
    one = Filter(scope={"tenant": "beta"}, kind=kind)
    assert set(kit.store.match(flt=one)) == {kind}
    assert kit.store.check() == []


def test_forget_by_ids_counts_only_what_exists(kit: Kit) -> None:
    written = fill(kit, per_kind=3)
    kind = KINDS[kit.plane][0]
    ids = [written[kind][0]["id"], "nope", written[kind][0]["id"]]
    counts = kit.store.forget(ids=ids)
    assert counts[kind] == 1 and sum(counts.values()) == 1
    assert kit.store.get_records([ids[0]]) == []


@pytest.mark.parametrize(
    "selection",
    [{}, {"flt": Filter()}, {"ids": []}, {"ids": [""]}, {"ids": ["x"], "flt": Filter(kind="x")}],
)
def test_the_store_refuses_a_selection_that_would_remove_everything(
    kit: Kit, selection: dict[str, Any]
) -> None:
    fill(kit, per_kind=2)
    for method in (kit.store.match, kit.store.forget):
        with pytest.raises(ValueError):
            method(**selection)
    with pytest.raises(ValueError):
        kit.store.erase({})
    assert sum(kit.store.record_counts().values()) == 2 * len(KINDS[kit.plane])


def test_deletes_reach_every_other_view_of_the_store(kit: Kit) -> None:
    written = fill(kit, per_kind=5)
    other = kit.open()  # another worker's store on the same storage
    everything = [r["id"] for records in written.values() for r in records]
    assert len(other.get_records(everything)) == len(everything)
    kind = KINDS[kit.plane][0]
    kit.store.forget(ids=[written[kind][0]["id"]])
    kit.store.erase({"tenant": "beta"})
    left = {f["id"] for f in other.get_records(everything)}
    beta = {
        r["id"] for records in written.values() for r in records if r["scope"]["tenant"] == "beta"
    }
    assert left == set(everything) - beta - {written[kind][0]["id"]}
    assert other.record_counts() == kit.store.record_counts()


def test_forget_and_erase_keep_another_workers_search_in_step(memory_kit: Kit) -> None:
    written = fill(memory_kit, per_kind=10)["chunk"]
    other = memory_kit.open()
    probe = [1.0] + [0.5] * 7

    def found() -> set[str]:
        call = memory_rules.parse_search(probe, 50, None, None, None, None, None, DIM)
        return {h["chunk_id"] for h in other.search_parsed(call)}

    assert found() == {c["id"] for c in written}  # other's search index is loaded
    memory_kit.store.forget(ids=["c000"])
    memory_kit.store.forget(flt=Filter(origin="doc"))
    memory_kit.store.erase({"tenant": "beta"})
    gone = {"c000"} | {c["id"] for c in written if c.get("origin") == "doc"}
    gone |= {c["id"] for c in written if c["scope"]["tenant"] == "beta"}
    assert found() == {c["id"] for c in written} - gone
    assert memory_kit.store.check() == []


def test_erase_removes_the_idempotency_entries_of_erased_records(kit: Kit) -> None:
    fill(kit, per_kind=10)
    kit.write(KINDS[kit.plane][0], [kit.record(KINDS[kit.plane][0], "far", {"tenant": "z"})], "z")
    before = kit.store.stats()["idempotency_entries"]
    report = kit.store.erase({"tenant": "acme"})
    for kind in KINDS[kit.plane]:
        assert report[kind] == 6  # ids 0-2, 5-7 of each kind lie in acme
    assert report["idempotency"] == 2 * len(KINDS[kit.plane])  # both calls of each kind
    assert kit.store.stats()["idempotency_entries"] == before - report["idempotency"]
    assert kit.store.count_by(Filter(scope={"tenant": "acme"}), "tenant").total == 0
    assert kit.store.get_records(["far"])
    assert kit.store.check() == []


def test_record_counts_stats_and_prune(kit: Kit) -> None:
    assert kit.store.record_counts() == {k: 0 for k in KINDS[kit.plane]}
    fill(kit, per_kind=4)
    kind = KINDS[kit.plane][0]
    kit.write(kind, [kit.record(kind, "brief", {"tenant": "t"})], "short", klass="ephemeral")
    counts = {k: 4 for k in KINDS[kit.plane]}
    counts[kind] += 1
    assert kit.store.record_counts() == counts
    stats = kit.store.stats()
    assert stats["records"] == counts
    assert stats["idempotency_entries"] == 2 * len(KINDS[kit.plane]) + 1
    assert stats["idempotency_expired"] == 0
    assert stats["schema_version"] == stats["schema_latest"] >= 1
    kit.clock.now += 11 * 60  # past the ephemeral class's ten minutes
    assert kit.store.stats()["idempotency_expired"] == 1
    assert kit.store.prune() == 1
    assert kit.store.prune() == 0
    after = kit.store.stats()
    assert after["idempotency_expired"] == 0
    assert after["idempotency_entries"] == stats["idempotency_entries"] - 1
    assert after["records"] == counts  # pruning drops cache entries, never records


def test_storage_bytes_measures_what_the_store_holds(kit: Kit) -> None:
    empty = kit.store.storage_bytes()
    assert isinstance(empty, int) and empty > 0
    fill(kit, per_kind=50)
    grown = kit.store.storage_bytes()
    assert isinstance(grown, int) and grown >= empty


def test_backup_is_a_sound_store_with_the_same_records(kit: Kit, tmp_path: Path) -> None:
    """On every backend a backup is one SQLite file of the plane, openable as a store."""
    fill(kit)
    dest_dir = tmp_path / "copy"
    dest_dir.mkdir()
    dest = BACKENDS["sqlite"].fresh(dest_dir, kit.plane)
    size = kit.store.backup(dest)
    assert size > 0
    assert os.stat(dest).st_mode & 0o777 == 0o600
    copy = kit.open(dest, BACKENDS["sqlite"])
    assert copy.record_counts() == kit.store.record_counts()
    assert copy.check() == []
    assert copy.list_records(Filter(), limit=500).records == (
        kit.store.list_records(Filter(), limit=500).records
    )
    with pytest.raises(ValueError):
        kit.store.backup(dest)
