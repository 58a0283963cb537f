"""Explore counts are exact (checked against a brute count), narrowing drills down, and list
paging visits every record once and ends."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pytest

from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops import listing
from ratatoskr.ops.listing import MAX_GET_IDS
from ratatoskr.ops.stores import PlaneStore
from tests.backends import Backend
from tests.ops.conftest import CTX, DIM, Files, chunks

AXIS_FACETS = ("tenant", "group", "end_user", "agent_self")


def brute(records: list[dict[str, Any]], facet: str) -> tuple[Counter[str], int]:
    counts: Counter[str] = Counter()
    missing = 0
    for record in records:
        value = record.get("origin") if facet == "origin" else record["scope"].get(facet)
        if value is None:
            missing += 1
        else:
            counts[value] += 1
    return counts, missing


@pytest.mark.parametrize("facet", [*AXIS_FACETS, "origin"])
def test_memory_explore_matches_a_brute_count(filled: Files, admin: Any, facet: str) -> None:
    records = chunks(120)
    expected, missing = brute(records, facet)
    page = admin("explore", "memory", "--facet", facet, "--json").json()
    assert {b["value"]: b["count"] for b in page["buckets"]} == dict(expected)
    assert page["total"] == 120
    assert page["missing"] == missing
    assert page["truncated"] is False
    assert page["more_buckets"] == 0
    counts = [(-b["count"], b["value"]) for b in page["buckets"]]
    assert counts == sorted(counts)  # by count descending, ties by value


def test_narrow_drills_down_to_a_list(filled: Files, admin: Any) -> None:
    records = chunks(120)
    acme = [r for r in records if r["scope"]["tenant"] == "acme"]
    page = admin("explore", "memory", "--facet", "end_user", "--narrow", "tenant=acme", "--json")
    expected, missing = brute(acme, "end_user")
    assert {b["value"]: b["count"] for b in page.json()["buckets"]} == dict(expected)
    assert page.json()["missing"] == missing
    bucket = page.json()["buckets"][0]
    origin = admin(
        "explore",
        "memory",
        "--facet",
        "origin",
        "--narrow",
        "tenant=acme",
        "--narrow",
        bucket["narrow"],
        "--json",
    ).json()
    assert origin["total"] == bucket["count"]
    chat = next(b for b in origin["buckets"] if b["value"] == "chat")
    listed = admin(
        "list",
        "memory",
        "--scope",
        "tenant=acme",
        "--narrow",
        bucket["narrow"],
        "--narrow",
        "origin=chat",
        "--limit",
        "500",
        "--json",
    ).json()
    assert len(listed["records"]) == chat["count"]
    assert {r["origin"] for r in listed["records"]} == {"chat"}


def test_affect_explore_by_kind_and_axis(filled: Files, admin: Any) -> None:
    kinds = admin("explore", "affect", "--facet", "kind", "--json").json()
    assert [(b["value"], b["count"]) for b in kinds["buckets"]] == [("event", 60), ("state", 40)]
    tenants = admin("explore", "affect", "--facet", "tenant", "--narrow", "kind=state", "--json")
    assert tenants.json()["total"] == 40
    everything = admin("explore", "affect", "--facet", "tenant", "--json").json()
    assert everything["total"] == 100 and everything["missing"] == 0


def test_limit_cuts_buckets_and_counts_the_rest(filled: Files, admin: Any) -> None:
    page = admin("explore", "memory", "--facet", "end_user", "--limit", "1", "--json").json()
    assert len(page["buckets"]) == 1
    assert page["more_buckets"] == 3


def test_ties_order_by_value(files: Files, admin: Any) -> None:
    store = open_memory_store(str(files.memory), embedding_dim=DIM)
    records = [
        {"id": f"t{i}", "embedding": [1.0] * DIM, "scope": {"tenant": name}}
        for i, name in enumerate(["zeta", "alpha", "mid", "alpha", "zeta"])
    ]
    store.upsert_many(records, idempotency_key="k", ctx=CTX)
    store.close()
    page = admin("explore", "memory", "--facet", "tenant", "--json").json()
    assert [b["value"] for b in page["buckets"]] == ["alpha", "zeta", "mid"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--limit", "0"], "limit must be an integer in 1..500"),
        (["--limit", "501"], "limit must be an integer in 1..500"),
        (["--scan-limit", "0"], "scan_limit must be an integer in 1..50,000"),
        (["--scan-limit", "50001"], "scan_limit must be an integer in 1..50,000"),
        (["--narrow", "kind=state"], "facet of the memory plane must be one of"),
        (["--narrow", "end_user="], "scope.end_user must be a string of 1..256"),
    ],
)
def test_explore_refuses_bad_limits_clearly(
    filled: Files, admin: Any, args: list[str], message: str
) -> None:
    ran = admin("explore", "memory", "--facet", "tenant", *args)
    assert ran.code == 2
    assert message in ran.err


@pytest.mark.parametrize(("plane", "expected"), [("memory", 120), ("affect", 100)])
def test_paging_visits_everything_once_and_ends(
    filled: Files, admin: Any, plane: str, expected: int
) -> None:
    seen: list[tuple[str, str]] = []
    cursors: list[str] = []
    cursor: list[str] = []
    while True:
        page = admin("list", plane, "--limit", "7", *cursor, "--json").json()
        seen.extend((r["kind"], r["id"]) for r in page["records"])
        if page["next_cursor"] is None:
            break
        assert page["next_cursor"] not in cursors
        cursors.append(page["next_cursor"])
        cursor = ["--cursor", page["next_cursor"]]
        assert len(cursors) <= expected
    assert len(seen) == expected == len(set(seen))


def test_cursor_of_another_filter_is_refused(filled: Files, admin: Any) -> None:
    page = admin("list", "memory", "--limit", "3", "--json").json()
    ran = admin("list", "memory", "--scope", "tenant=acme", "--cursor", page["next_cursor"])
    assert ran.code == 2
    assert "cursor" in ran.err


def test_human_list_shows_no_content(filled: Files, admin: Any) -> None:
    ran = admin("list", "memory", "--limit", "500")
    assert ran.code == 0
    assert "c0000" in ran.out
    assert "note " not in ran.out
    assert "end of listing" in ran.out


def test_get_keeps_order_and_leaves_out_missing(filled: Files, admin: Any) -> None:
    hits = admin("get", "memory", "c0005", "nope", "c0001", "c0005", "--json").json()
    assert [h["id"] for h in hits] == ["c0005", "c0001"]
    assert hits[0]["record"]["distillate"] == "note 5"
    affect = admin("get", "affect", "e0003", "s0002", "--json").json()
    assert [(h["kind"], h["id"]) for h in affect] == [("event", "e0003"), ("state", "s0002")]
    human = admin("get", "memory", "c0005")
    assert "note 5" in human.out and f"<{DIM} numbers" in human.out


@pytest.mark.parametrize("plane", ["memory", "affect"])
def test_get_takes_at_most_200_ids_on_every_backend(
    backend: Backend, plane: str, tmp_path: Path, admin: Any
) -> None:
    location = backend.fresh(tmp_path, plane)
    if plane == "memory":
        store = backend.memory(location, embedding_dim=DIM)
        store.upsert_many(chunks(3), idempotency_key="k", ctx=CTX)
        stored = ["c0000", "c0001", "c0002"]
    else:
        store = backend.affect(location)
        states = [{"id": f"s{i}", "scope": {"tenant": "acme"}} for i in range(3)]
        store.put_many(states, idempotency_key="k", ctx=CTX)
        stored = ["s0", "s1", "s2"]
    store.close()
    where = (f"--{plane}-db", location)
    ids = stored + [f"missing-{i}" for i in range(MAX_GET_IDS - len(stored))]
    assert len(ids) == MAX_GET_IDS == 200
    ran = admin("get", plane, *where, *ids, "--json")
    assert ran.code == 0, ran.err
    assert [hit["id"] for hit in ran.json()] == stored
    refused = admin("get", plane, *where, *ids, "one-more", "--json")
    assert refused.code == 2
    assert refused.out == ""
    assert "at most 200 ids" in refused.err and "201 given" in refused.err
    with pytest.raises(ValueError, match="at most 200 ids"):
        listing.get_records(cast(PlaneStore, None), [*ids, "one-more"])  # before any store


def test_get_checks_its_ids_before_opening_a_database(tmp_path: Path, admin: Any) -> None:
    absent = str(tmp_path / "absent.db")
    ran = admin("get", "memory", "--memory-db", absent, *[f"c{i}" for i in range(201)])
    assert ran.code == 2
    assert "at most 200 ids" in ran.err
    assert not Path(absent).exists()


def test_stored_values_print_as_they_are_and_their_hints_paste_safely(
    files: Files, admin: Any, tmp_path: Path
) -> None:
    """A value is whatever a writer stored: rich markup in it prints literally, and the
    ``--narrow`` hint explore prints is quoted for the shell (pasted, it runs nothing)."""
    odd = "$(touch pwned) [/]x 'q'"
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    record = {**chunks(1)[0], "id": "[/]odd-id", "scope": {"tenant": "acme", "end_user": odd}}
    memory.upsert_many([record], idempotency_key="odd", ctx=CTX)
    memory.close()
    explored = admin("explore", "memory", "--facet", "end_user")
    assert explored.code == 0, explored.err
    hint = next(line for line in explored.out.splitlines() if "--narrow" in line)
    pasted = shlex.split(hint[hint.index("--narrow") :])
    assert pasted == ["--narrow", f"end_user={odd}"]
    listed = admin("list", "memory", *pasted)
    assert listed.code == 0, listed.err
    assert "[/]odd-id" in listed.out and "1 shown" in listed.out
