"""Cursors: tamper evidence, binding to the filter, one secret per file, paging under writes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ratatoskr.affect.reference import ReferenceAffectStore
from ratatoskr.affect.store import RatatoskrAffectStore, open_affect_store
from ratatoskr.core.cursors import CursorCodec, filter_tag, make_walk, open_walk
from ratatoskr.core.errors import InvalidArguments
from tests.affect.helpers import T1, T2, FakeClock, append, ctx, event, put, state, walk
from tests.backends import Backend

SECRET = b"s" * 32


def test_codec_round_trips_key_and_direction() -> None:
    codec = CursorCodec(SECRET)
    tag = filter_tag("x", {"a": 1})
    cursor = codec.make(tag, (42, "id/é"), descending=True)
    position = codec.open(cursor, tag, (int, str), descending=True)
    assert position.key == (42, "id/é") and position.descending


def test_codec_refuses_short_secret() -> None:
    with pytest.raises(ValueError):
        CursorCodec(b"short")


def test_filter_tag_separates_kinds_and_filters() -> None:
    assert filter_tag("a", {"t": 1}) == filter_tag("a", {"t": 1})
    assert filter_tag("a", {"t": 1}) != filter_tag("b", {"t": 1})
    assert filter_tag("a", {"t": 1}) != filter_tag("a", {"t": 2})


def _tampered(cursor: str) -> list[str]:
    body, mac = cursor.split(".")

    def flip(s: str, i: int) -> str:
        return s[:i] + ("A" if s[i] != "A" else "B") + s[i + 1 :]

    return [
        flip(cursor, 3),  # payload altered
        f"{body}.{flip(mac, 5)}",  # mac altered
        cursor[:-1],  # truncated mac
        cursor[: len(body) - 2] + cursor[len(body) :],  # truncated payload
        body,  # mac dropped
        f"{body}.",  # empty mac
        f".{mac}",  # empty payload
        cursor + "=",  # padding appended
        cursor + ".x",
        "",
        "x" * 5000,
        "not a cursor",
        "ünïcode.ünïcode",
    ]


def test_forged_altered_and_truncated_cursors_are_invalid() -> None:
    codec = CursorCodec(SECRET)
    tag = filter_tag("x", {})
    cursor = codec.make(tag, ("abc",))
    for bad in _tampered(cursor):
        with pytest.raises(InvalidArguments) as info:
            codec.open(bad, tag, (str,))
        assert bad not in info.value.message or bad == ""
    with pytest.raises(InvalidArguments):
        CursorCodec(b"o" * 32).open(cursor, tag, (str,))  # made by another secret
    with pytest.raises(InvalidArguments):
        codec.open(cursor, filter_tag("x", {"tenant": "t"}), (str,))  # another filter
    with pytest.raises(InvalidArguments):
        codec.open(cursor, tag, (str,), descending=True)  # another direction
    with pytest.raises(InvalidArguments):
        codec.open(cursor, tag, (int, str))  # another key shape
    with pytest.raises(InvalidArguments):
        codec.open(codec.make(tag, (True,)), tag, (int,))  # booleans are no keys


def _two_pages(store: Any) -> None:
    put(store, [state(f"s{i}", T1) for i in range(5)], "k1")
    append(store, [event(f"e{i}", f"2026-01-01T00:00:0{i}Z", T1) for i in range(5)], "k2")


def test_store_cursors_refuse_tampering_and_other_filters(store: Any) -> None:
    _two_pages(store)
    lc = store.list(limit=2)["next_cursor"]
    ec = store.read_events(limit=2)["next_cursor"]
    for bad in _tampered(lc):
        with pytest.raises(InvalidArguments):
            store.list(limit=2, cursor=bad)
    others: list[Callable[[], Any]] = [
        lambda: store.list(limit=2, cursor=lc, scope_all=T1),
        lambda: store.list(limit=2, cursor=lc, scope_any=[T1]),
        lambda: store.list(limit=2, cursor=lc, ctx=ctx(T1)),  # another token scope
        lambda: store.read_events(limit=2, cursor=lc),  # a list cursor for events
        lambda: store.list(limit=2, cursor=ec),  # an events cursor for list
        lambda: store.read_events(limit=2, cursor=ec, order="desc"),
        lambda: store.read_events(limit=2, cursor=ec, since="2026-01-01T00:00:00Z"),
        lambda: store.read_events(limit=2, cursor=ec, until="2027-01-01T00:00:00Z"),
        lambda: store.read_events(limit=2, cursor=ec, scope_all=T1),
    ]
    for call in others:
        with pytest.raises(InvalidArguments):
            call()
    # the limit is not part of the filter, and scope_any order does not matter
    assert store.list(limit=3, cursor=lc)["records"][0]["id"] == "s2"
    c2 = store.list(limit=1, scope_any=[T1, T2])["next_cursor"]
    assert store.list(limit=1, scope_any=[T2, T1], cursor=c2)["records"][0]["id"] == "s1"
    # the token scope counts as part of the merged filter: the same merged filter pages on
    c3 = store.list(limit=2, scope_all=T1)["next_cursor"]
    assert store.list(limit=2, cursor=c3, ctx=ctx(T1))["records"][0]["id"] == "s2"


def test_paging_passes_ids_of_the_longest_escaped_form(store: Any) -> None:
    """A cursor carries the last id as JSON, where each control character takes six
    bytes: pages ending on ids of 512 of them still page on, on every read."""
    ids = ["\u0001" * 512, "\u0001" * 511 + "\u0002", "\u0001" * 511 + "\u0003"]
    put(store, [state(i, T1) for i in ids], "k1")
    append(store, [event(i, "2026-01-01T00:00:00.000001Z", T1) for i in ids], "k2")
    states, cursors = walk(store.list, "records", limit=1)
    assert [r["id"] for r in states] == ids and len(cursors) == 2
    events, cursors = walk(store.read_events, "events", limit=1)
    assert [e["id"] for e in events] == ids and len(cursors) == 2
    assert max(len(c) for c in cursors) > 4096


def test_cursor_of_another_store_is_invalid(tmp_path: Path) -> None:
    a = open_affect_store(str(tmp_path / "a.db"))
    b = open_affect_store(str(tmp_path / "b.db"))
    for s in (a, b):
        _two_pages(s)
    with pytest.raises(InvalidArguments):
        b.list(limit=2, cursor=a.list(limit=2)["next_cursor"])
    with pytest.raises(InvalidArguments):
        ReferenceAffectStore().list(limit=2, cursor=a.list(limit=2)["next_cursor"])


def test_secret_lives_in_the_file_and_every_worker_shares_it(tmp_path: Path) -> None:
    path = str(tmp_path / "affect.db")
    first = open_affect_store(path)
    _two_pages(first)
    cursor = first.list(limit=2)["next_cursor"]
    second = open_affect_store(path)  # another worker on the same file
    assert [r["id"] for r in second.list(limit=2, cursor=cursor)["records"]] == ["s2", "s3"]
    first.close()
    reopened = open_affect_store(path)
    assert reopened.list(limit=2, cursor=cursor)["records"][0]["id"] == "s2"
    second.close()
    reopened.close()


# -- paging while others write -----------------------------------------------------------


class _Writer:
    """Another caller on its own thread (its own SQLite connection), run between pages."""

    def __init__(self, work: Callable[[int], None]) -> None:
        self.work = work
        self.go = threading.Event()
        self.done = threading.Event()
        self.stop = False
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.turn = 0

    def _run(self) -> None:
        while True:
            self.go.wait()
            self.go.clear()
            if self.stop:
                return
            try:
                self.work(self.turn)
            except BaseException as exc:  # surfaced by the test
                self.errors.append(exc)
            self.turn += 1
            self.done.set()

    def between_pages(self) -> None:
        self.done.clear()
        self.go.set()
        assert self.done.wait(30)

    def close(self) -> None:
        self.stop = True
        self.go.set()
        self.thread.join(30)
        assert not self.errors, self.errors


def _walk_with(read: Callable[..., dict[str, Any]], key: str, between: Callable[[], None]) -> Any:
    seen: list[Any] = []
    cursors: list[str] = []
    cursor = None
    for _ in range(10_000):
        page = read(cursor=cursor)
        seen.extend(page[key])
        cursor = page["next_cursor"]
        if cursor is None:
            return seen, cursors
        cursors.append(cursor)
        between()
    raise AssertionError("paging did not terminate")


def test_a_first_page_whose_states_vanish_before_its_end_is_read_still_answers(
    backend: Backend, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first page and the walk's end are two reads; another caller's delete between
    them leaves nothing admitted to end at. The page answers and its cursor pages on (it
    answered 500 before)."""
    store = backend.affect(backend.fresh(tmp_path, "affect"), clock=clock)
    try:
        put(store, [state(f"s{i}") for i in range(3)], "seed")
        read = store._fetch
        reads = 0

        def between_the_two_reads(statement: str, args: Any) -> Any:
            nonlocal reads
            rows = read(statement, args)
            reads += 1
            if reads == 1:  # the page is read: every state it admits goes
                store.delete_many(["s0", "s1", "s2"], ctx=ctx())
            return rows

        monkeypatch.setattr(store, "_fetch", between_the_two_reads)
        page = store.list(limit=2, scope_all=T1)
        assert [r["id"] for r in page["records"]] == ["s0", "s1"]
        monkeypatch.undo()
        rest = store.list(limit=2, scope_all=T1, cursor=page["next_cursor"])
        assert rest == {"records": [], "next_cursor": None}
    finally:
        store.close()


def test_list_paging_under_concurrent_inserts_and_deletes(
    sqlite_store: RatatoskrAffectStore,
) -> None:
    stable = [f"s{i:03}" for i in range(0, 120, 2)]
    doomed = [f"s{i:03}" for i in range(1, 120, 4)]
    put(sqlite_store, [state(i) for i in stable + doomed], "seed")
    doomed_iter = iter(doomed)

    def work(turn: int) -> None:
        # inserts before, around and after the cursor; deletes of items not yet visited
        fresh = [state(f"s{i:03}x{turn}") for i in (0, 40, 80, 119)] + [state(f"a{turn}")]
        put(sqlite_store, fresh, f"w{turn}")
        sqlite_store.delete_many([next(doomed_iter, "none"), f"s{40:03}x{turn}"])

    writer = _Writer(work)
    try:
        seen, cursors = _walk_with(
            lambda cursor: sqlite_store.list(limit=7, cursor=cursor, scope_all=T1),
            "records",
            writer.between_pages,
        )
    finally:
        writer.close()
    ids = [r["id"] for r in seen]
    assert ids == sorted(set(ids)), "each item at most once, in id order"
    assert set(stable) <= set(ids), "every item present throughout is visited"
    assert len(set(cursors)) == len(cursors)


def test_read_events_paging_under_concurrent_appends(
    sqlite_store: RatatoskrAffectStore,
) -> None:
    stable = [event(f"e{i:03}", f"2026-01-01T00:{i // 4:02}:00Z") for i in range(200)]
    append(sqlite_store, stable, "seed")

    def work(turn: int) -> None:
        # ties on the same instant with smaller and larger ids, plus earlier and later events
        at = f"2026-01-01T00:{(turn * 3) % 50:02}:00Z"
        extra = [
            event(f"a{turn}", at),
            event(f"z{turn}", at),
            event(f"early{turn}", "2025-01-01T00:00:00Z"),
            event(f"late{turn}", "2027-01-01T00:00:00Z"),
        ]
        append(sqlite_store, extra, f"w{turn}")
        sqlite_store.put_many([state(f"s{turn}")], idempotency_key=f"p{turn}", ctx=ctx())

    for order in ("asc", "desc"):
        writer = _Writer(work)
        try:
            seen, cursors = _walk_with(
                lambda cursor, o=order: sqlite_store.read_events(limit=9, cursor=cursor, order=o),
                "events",
                writer.between_pages,
            )
        finally:
            writer.close()
        ids = [e["id"] for e in seen]
        assert len(ids) == len(set(ids))
        assert {e["id"] for e in stable} <= set(ids)
        assert len(set(cursors)) == len(cursors)


def test_reference_paging_while_another_caller_writes(clock: FakeClock) -> None:
    ref = ReferenceAffectStore(clock=clock)
    put(ref, [state(f"s{i:03}") for i in range(0, 60, 2)], "seed")
    turn = iter(range(1000))

    def between() -> None:
        t = next(turn)
        put(ref, [state(f"s{t:03}x"), state("a")], f"w{t}")
        ref.delete_many([f"s{(t * 4 + 2) % 60:03}"])

    seen, _ = _walk_with(lambda cursor: ref.list(limit=4, cursor=cursor), "records", between)
    ids = [r["id"] for r in seen]
    assert ids == sorted(set(ids))
    survivors = {f"s{i:03}" for i in range(0, 60, 2)} - {
        f"s{(t * 4 + 2) % 60:03}" for t in range(len(ids))
    }
    assert survivors <= set(ids)


def test_a_walk_ends_while_writers_add_past_it_faster_than_it_pages(store: Any) -> None:
    """Each page sees more new items past the walk than it returns; the walk still ends,
    at the last item its filter admitted when it began, having visited each one once."""
    put(store, [state(f"m{i:02}") for i in range(20)], "seed-states")
    append(store, [event(f"e{i:02}", f"2026-01-01T00:00:{i:02}Z") for i in range(20)], "seed")
    turn = iter(range(1000))

    def more_states() -> None:
        t = next(turn)
        put(store, [state(f"z{t:03}-{k}") for k in range(5)], f"s{t}")

    def later_and_earlier_events() -> None:
        t = next(turn)
        # past either end of any walk begun before: later than every event, or earlier
        fresh = [event(f"late{t:03}-{k}", f"{2100 + t}-01-01T00:00:{k:02}Z") for k in range(5)]
        fresh += [event(f"early{t:03}-{k}", f"{1900 - t}-01-01T00:00:{k:02}Z") for k in range(5)]
        append(store, fresh, f"a{t}")

    def bounded(read: Callable[..., dict[str, Any]], items: int) -> Callable[..., Any]:
        pages = iter(range(items // 3 + 1))  # pages of 3, and the last one

        def run(cursor: str | None) -> dict[str, Any]:
            assert next(pages, None) is not None, "the walk went past what was there"
            return read(cursor=cursor)

        return run

    there = [r["id"] for r in store.list(limit=500)["records"]]
    read = bounded(lambda cursor: store.list(limit=3, cursor=cursor), len(there))
    seen, _ = _walk_with(read, "records", more_states)
    assert [r["id"] for r in seen] == there
    for order in ("asc", "desc"):
        there = [e["id"] for e in store.read_events(limit=1000, order=order)["events"]]
        read = bounded(
            lambda cursor, o=order: store.read_events(limit=3, cursor=cursor, order=o), len(there)
        )
        seen, _ = _walk_with(read, "events", later_and_earlier_events)
        assert [e["id"] for e in seen] == there


def test_a_cursor_made_before_walks_carried_an_end_still_pages() -> None:
    codec = CursorCodec(SECRET)
    tag = filter_tag("affect.list", {})
    assert open_walk(codec, codec.make(tag, ("m05",)), tag, (str,)) == (("m05",), None)
    made = make_walk(codec, tag, ("m05",), ("m19",))
    assert open_walk(codec, made, tag, (str,)) == (("m05",), ("m19",))
