"""A stored id or value may hold anything a writer sent: terminal escape sequences, C0 and
C1 controls (a newline, a carriage return), DEL, bidi overrides. The CLI shows each such
character escaped, so nothing a writer stored drives the operator's terminal or hides a
row; ``--json`` keeps the exact stored value, with what JSON lets through raw (DEL, C1
controls, bidi overrides) written as ``\\u`` escapes; every ``--narrow`` hint explore prints, pasted
into a shell, still selects its bucket."""

from __future__ import annotations

import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import apsw
import orjson
import pytest
import sqlite_vec

from ratatoskr.affect.store import open_affect_store
from ratatoskr.memory.store import open_memory_store
from tests.ops.conftest import CTX, DIM, Files

# id -> end_user, each value holding what a terminal would act on
USERS = {
    "c-esc": "esc\x1b[31mRED\x1b[0m",
    "c-c0": "line\nbreak\rcr\x7fdel\x9bcsi\x07",
    "c-bidi": "rtl\u202eevil\u2066x\u2069\u200e\u200f\u061c",
    "c-quote": "it's\x1b[1A\x1b[2K $(touch pwned) \\x1b",
}
BAD_ID = "w4\x1b[5m\u202e"
ORIGIN = "rtl\u202eevil"
OSC = "\x1b]0;owned\x07"


def raw_characters(text: str) -> list[str]:
    """Every character in ``text`` a terminal would not draw as itself (line ends apart)."""
    return [
        c
        for c in text
        if c != "\n" and unicodedata.category(c) in {"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"}
    ]


@pytest.fixture
def odd(files: Files) -> Files:
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    records: list[dict[str, Any]] = [
        {"id": cid, "embedding": [0.5] * DIM, "scope": {"tenant": "t", "end_user": user}}
        for cid, user in USERS.items()
    ]
    records.append(
        {
            "id": BAD_ID,
            "embedding": [0.25] * DIM,
            "scope": {"tenant": "t", "group": OSC},
            "origin": ORIGIN,
            "distillate": f"content {ORIGIN} \x1b[2J",
        }
    )
    memory.upsert_many(records, idempotency_key="odd", ctx=CTX)
    memory.close()
    affect = open_affect_store(str(files.affect))
    affect.put_many(
        [{"id": BAD_ID, "scope": {"tenant": "t", "end_user": USERS["c-esc"]}, "mood": "x"}],
        idempotency_key="odd",
        ctx=CTX,
    )
    affect.close()
    return files


def test_explore_escapes_values_and_json_keeps_them(odd: Files, admin: Any) -> None:
    for facet in ("end_user", "group", "origin"):
        ran = admin("explore", "memory", "--facet", facet)
        assert ran.code == 0, ran.err
        assert raw_characters(ran.out) == [], ran.out
    shown = admin("explore", "memory", "--facet", "end_user").out
    assert '"esc\\u001b[31mRED\\u001b[0m"' in shown
    assert '"rtl\\u202eevil\\u2066x\\u2069\\u200e\\u200f\\u061c"' in shown
    assert '"line\\nbreak\\rcr\\u007fdel\\u009bcsi\\u0007"' in shown
    origin = admin("explore", "memory", "--facet", "origin").out
    assert '"rtl\\u202eevil"' in origin
    buckets = admin("explore", "memory", "--facet", "end_user", "--json").json()["buckets"]
    assert {b["value"] for b in buckets} == set(USERS.values())


def _pasted(hint: str) -> list[str]:
    """The words bash makes of ``hint`` pasted on a command line, decoded as Python
    decodes its arguments."""
    ran = subprocess.run(["bash", "-c", "printf '%s\\0' " + hint], capture_output=True, check=True)
    return [w.decode("utf-8", "surrogateescape") for w in ran.stdout.split(b"\0")[:-1]]


def test_two_values_that_draw_alike_are_shown_apart(files: Files, admin: Any) -> None:
    """``zoé`` composed and ``zoe`` with a COMBINING ACUTE ACCENT draw alike but are two
    values: the composed one is shown as it is, the other quoted with its mark escaped,
    and each one's hint, pasted, selects it alone."""
    composed, decomposed = "zo\u00e9", "zoe\u0301"
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    memory.upsert_many(
        [
            {"id": f"u{n}", "embedding": [0.5] * DIM, "scope": {"tenant": "t", "end_user": user}}
            for n, user in enumerate((composed, decomposed))
        ],
        idempotency_key="lookalikes",
        ctx=CTX,
    )
    memory.close()
    lines = admin("explore", "memory", "--facet", "end_user").out.splitlines()
    rows = [line.strip() for line in lines if "zo" in line]
    assert len(rows) == 2
    assert any(line.startswith(composed + " ") for line in rows)
    assert any(line.startswith('"zoe\\u0301"') for line in rows)
    for line, user in zip(sorted(rows), sorted([decomposed, composed]), strict=True):
        words = _pasted(line[line.index("--narrow") :].rstrip())
        listed = admin("list", "memory", *words, "--json").json()["records"]
        assert [r["scope"]["end_user"] for r in listed] == [user]


def test_every_narrow_hint_pasted_into_a_shell_selects_its_bucket(odd: Files, admin: Any) -> None:
    lines = admin("explore", "memory", "--facet", "end_user").out.splitlines()
    hints = [line[line.index("--narrow") :].rstrip() for line in lines if "--narrow" in line]
    assert len(hints) == len(USERS)
    selected = []
    for hint in hints:
        words = _pasted(hint)
        assert words[0] == "--narrow" and len(words) == 2, hint
        listed = admin("list", "memory", *words, "--json")
        assert listed.code == 0, listed.err
        ids = [r["id"] for r in listed.json()["records"]]
        assert len(ids) == 1, (hint, ids)
        assert words[1] == f"end_user={USERS[ids[0]]}"
        selected += ids
    assert sorted(selected) == sorted(USERS)


def test_a_value_no_command_line_can_pass_says_so(files: Files, admin: Any) -> None:
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    record = {"id": "nul", "embedding": [0.5] * DIM, "scope": {"tenant": "a\0b"}}
    memory.upsert_many([record], idempotency_key="nul", ctx=CTX)
    memory.close()
    ran = admin("explore", "memory", "--facet", "tenant")
    assert ran.code == 0, ran.err
    assert "\0" not in ran.out and '"a\\u0000b"' in ran.out
    assert "--narrow" not in ran.out and "holds a NUL" in ran.out
    bucket = admin("explore", "memory", "--facet", "tenant", "--json").json()["buckets"][0]
    assert bucket["value"] == "a\0b"


def test_list_escapes_ids_values_and_its_filter(odd: Files, admin: Any) -> None:
    for plane in ("memory", "affect"):
        ran = admin("list", plane)
        assert ran.code == 0, ran.err
        assert raw_characters(ran.out) == [], ran.out
        assert '"w4\\u001b[5m\\u202e"' in ran.out
    memory = admin("list", "memory").out
    assert '"\\u001b]0;owned\\u0007"' in memory and '"rtl\\u202eevil"' in memory
    # a row is one line: a newline in a value does not split it
    row = next(line for line in memory.splitlines() if "c-c0" in line)
    assert '"line\\nbreak\\rcr\\u007fdel\\u009bcsi\\u0007"' in row
    narrowed = admin("list", "memory", "--narrow", f"end_user={USERS['c-esc']}")
    assert raw_characters(narrowed.out) == [], narrowed.out
    assert 'end_user="esc\\u001b[31mRED\\u001b[0m"' in narrowed.out.splitlines()[0]
    exact = admin("list", "memory", "--json").json()["records"]
    assert {r["id"] for r in exact} == {*USERS, BAD_ID}
    assert next(r for r in exact if r["id"] == BAD_ID)["origin"] == ORIGIN


@pytest.mark.parametrize(
    "command",
    [("list", "memory"), ("list", "affect"), ("explore", "memory", "--facet", "end_user")],
)
def test_json_output_holds_the_values_with_no_raw_control(
    odd: Files, admin: Any, command: tuple[str, ...]
) -> None:
    ran = admin(*command, "--json")
    assert ran.code == 0, ran.err
    assert raw_characters(ran.out) == [], ran.out  # DEL, C1 and bidi included
    assert "\\u202e" in ran.out
    read = ran.json()  # the same values, read back
    if command[0] == "list":
        assert BAD_ID in {r["id"] for r in read["records"]}
    else:
        assert set(USERS.values()) <= {b["value"] for b in read["buckets"]}


def test_get_escapes_its_header_and_the_record_json_keeps_its_value(odd: Files, admin: Any) -> None:
    ran = admin("get", "memory", BAD_ID)
    assert ran.code == 0, ran.err
    assert raw_characters(ran.out) == [], ran.out
    assert '# chunk "w4\\u001b[5m\\u202e"' in ran.out
    body = orjson.loads(ran.out.split("\n", 1)[1])  # still JSON, holding the same values
    assert body["id"] == BAD_ID and body["origin"] == ORIGIN
    assert body["distillate"] == f"content {ORIGIN} \x1b[2J"
    exact = admin("get", "memory", BAD_ID, "--json").json()
    assert exact[0]["record"]["origin"] == ORIGIN and exact[0]["id"] == BAD_ID


def test_forget_and_erase_escape_the_scope_they_echo(odd: Files, admin: Any) -> None:
    scope = f"end_user={USERS['c-esc']}"
    for command in (
        ("erase", "--scope", scope, "--dry-run"),
        ("erase", "--scope", scope),
        ("forget", "memory", "--narrow", scope, "--dry-run"),
        ("forget", "affect", "--ids", BAD_ID),
    ):
        ran = admin(*command)
        assert ran.code in (0, 1), ran.err
        assert raw_characters(ran.out + ran.err) == [], ran.out
    erase = admin("erase", "--scope", scope, "--dry-run").out
    assert 'erase end_user="esc\\u001b[31mRED\\u001b[0m"' in erase
    done = admin("erase", "--scope", scope, "--yes", "--json")
    assert done.code == 0, done.err
    assert done.json()["scope"] == {"end_user": USERS["c-esc"]}
    assert done.json()["planes"]["memory"]["chunk"] == 1


def test_check_escapes_the_ids_it_lists(odd: Files, admin: Any) -> None:
    conn = apsw.Connection(str(odd.memory))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute("DELETE FROM memory_vec WHERE chunk_id = ?", (BAD_ID,))
    conn.close()
    ran = admin("check")
    assert ran.code == 1
    assert raw_characters(ran.out) == [], ran.out
    assert "without a memory_vec row: w4\\u001b[5m\\u202e" in ran.out
    problems = admin("check", "--json").json()["planes"]["memory"]["problems"]
    assert any(BAD_ID in p for p in problems)


def test_import_messages_escape_the_ids_they_name(files: Files, admin: Any) -> None:
    path = files.dir / "bad.jsonl"
    line = {"id": BAD_ID, "embedding": [1.0] * (DIM - 1), "scope": {"tenant": "t"}}
    path.write_bytes(orjson.dumps(line) + b"\n")
    ran = admin("import", "memory", str(path))
    assert ran.code == 1
    assert raw_characters(ran.err) == [], ran.err
    assert "w4\\u001b[5m\\u202e" in ran.err
    failed = admin("import", "memory", str(path), "--json").json()
    assert BAD_ID in failed["error"]


def test_plain_values_print_as_they_are(tmp_path: Path, admin: Any) -> None:
    """Plain values print as they are: no quotes, no escapes (the explore hint too)."""
    memory = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    memory.upsert_many(
        [{"id": "plain", "embedding": [0.5] * DIM, "scope": {"tenant": "acme co"}}],
        idempotency_key="p",
        ctx=CTX,
    )
    memory.close()
    ran = admin("explore", "memory", "--facet", "tenant", "--memory-db", str(tmp_path / "m.db"))
    assert ran.code == 0, ran.err
    assert "acme co " in ran.out and "--narrow 'tenant=acme co'" in ran.out
