"""Building a mirror's rows off the serving path: a load from the file, a regrouped copy of
a live mirror, and reading the change log. The mirror worker (``worker.py``) runs these in
its own thread, in steps: between two steps it calls ``pause``, which stops the build when
the store closes, keeps the live mirror following the log and lets other threads run.

A load reads the table in rowid order, a slice per read transaction: first every row's id,
scope and payload (to place the rows grouped by scope), then the vectors straight into their
places, so no second copy of the matrix is made. The slices are separate snapshots, so a row
written during the load may be read in one state by the first pass and in another by the
second; every such row is in the change log after the head noted before the load, which the
worker applies afterwards (``read_changes``), so the mirror ends exactly as the file.

A regroup sorts a live mirror's rows into a new copy without reading the file: the rows it
copies are those of the live mirror as of its ``seq``, and any of them the worker changes
meanwhile is in the log after that ``seq`` and applied to the copy before it is swapped in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, NamedTuple

import apsw
import numpy as np
import numpy.typing as npt

from ratatoskr.core.scope import AXES
from ratatoskr.memory.search.changes import Scratch, place, prepare
from ratatoskr.memory.search.cosine import I64, row_norms
from ratatoskr.memory.search.mirror import (
    ARRAYS,
    CHANGED_COLUMNS,
    RECORD_INLINE,
    Changed,
    VectorMirror,
    headroom,
    id_hashes,
)
from ratatoskr.memory.search.ranking import inverse_norms, pick
from ratatoskr.memory.search.row_index import RowIndex
from ratatoskr.memory.search.touch_ahead import write_places
from ratatoskr.sqlite.database import Database
from ratatoskr.sqlite.scope_sql import placeholders

LOAD_ROWS = 16384  # rows per read transaction of a load
BLOCK_BYTES = 16 << 20  # vector bytes copied between two pauses
LIST_BLOCK = 16384  # Python items handled between two pauses (about a millisecond)
# ids mapped to their rows between two pauses: each id's string is read where it lies in
# memory, and at a million ids a block of LIST_BLOCK held the GIL for 8 ms (20 at most)
INDEX_BLOCK = 2048
FETCH_IDS = 500  # ids per statement when reading changed chunks

Pause = Callable[[], None]


class Behind(Exception):
    """The change log cannot bring these rows up to date (pruned past them, or it went
    backwards: a restored file). Only a load from the file can."""


def read_changes(
    conn: apsw.Connection,
    since: int,
    limit: int | None = None,
    pause: Pause | None = None,
    per_step: int = FETCH_IDS,
) -> tuple[int, int, list[Changed], list[str]]:
    """In ``conn``'s read transaction: (head, upto, found, gone), the chunks logged after
    entry ``since`` up to ``upto`` (at most ``limit`` entries on), as stored now (``found``)
    or deleted (``gone``), read ``per_step`` at a time with ``pause`` between. Raises
    ``Behind`` when the log cannot say what changed."""
    head, floor = conn.execute(
        "SELECT (SELECT max(seq) FROM memory_changes), (SELECT min(seq) FROM memory_changes)"
    ).fetchall()[0]
    head = int(head or 0)
    if head < since or (floor is not None and since < int(floor) - 1):
        raise Behind
    upto = head if limit is None else min(head, since + limit)
    if upto == since:
        return head, upto, [], []
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT chunk_id FROM memory_changes WHERE seq > ? AND seq <= ?",
            (since, upto),
        ).fetchall()
    ]
    found: list[Changed] = chunk_rows(conn, CHANGED_COLUMNS, ids, pause, per_step)
    present = {r[0] for r in found}
    return head, upto, found, [cid for cid in ids if cid not in present]


def catch_up(
    db: Database, copy: VectorMirror, pause: Pause, scratch: Scratch, limit: int, backlog: int
) -> None:
    """Apply the log to ``copy`` (not serving: no lock), ``limit`` entries per read, until
    it is within ``backlog`` entries of the head."""
    while True:
        pause()
        with db.read() as conn:
            head, upto, found, gone = read_changes(conn, copy.seq, limit)
        place(copy, prepare(copy, found, scratch), gone)
        copy.seq = upto
        if head - upto <= backlog:
            return


def chunk_rows(
    conn: apsw.Connection,
    columns: str,
    ids: list[str],
    pause: Pause | None = None,
    per_step: int = FETCH_IDS,
) -> list[Any]:
    """``columns`` of the stored chunks among ``ids``, ``per_step`` ids per statement, with
    ``pause`` between two."""
    rows: list[Any] = []
    for lo in range(0, len(ids), per_step):
        if lo and pause is not None:
            pause()
        part = ids[lo : lo + per_step]
        rows += conn.execute(
            f"SELECT {columns} FROM memory_chunks WHERE chunk_id IN ({placeholders(len(part))})",
            part,
        ).fetchall()
    return rows


def _by_rowid(db: Database, columns: str, pause: Pause) -> Iterator[list[Any]]:
    """``rowid, columns`` of every chunk in rowid order, ``LOAD_ROWS`` per read transaction
    (each its own snapshot), with a pause before each."""
    last = 0
    while True:
        pause()
        with db.read() as conn:
            part = conn.execute(
                f"SELECT rowid, {columns} FROM memory_chunks WHERE rowid > ? "
                "ORDER BY rowid LIMIT ?",
                (last, LOAD_ROWS),
            ).fetchall()
        if not part:
            return
        last = int(part[-1][0])
        yield part


def _blocks(count: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, count, size):
        yield lo, min(count, lo + size)


def _index(mirror: VectorMirror, count: int, pause: Pause) -> RowIndex:
    """Each of the first ``count`` ids of ``mirror`` (their hashes in place) to its row,
    a block between two pauses."""
    rows = RowIndex()
    for lo, hi in _blocks(count, INDEX_BLOCK):
        at = np.arange(lo, hi, dtype=np.int64)
        rows.assign(mirror.ids[lo:hi], at, mirror.id_hashes[lo:hi])
        pause()
    return rows


def _held_bytes(records: Iterable[str | None]) -> int:
    return sum(map(len, filter(None, records)))  # an empty record adds nothing either way


def _finish(mirror: VectorMirror, count: int, pause: Pause) -> None:
    """The norms of the first ``count`` rows (their vectors in place) and each axis's
    grouped order; the rows are then live and grouped."""
    rows_per_block = max(1, BLOCK_BYTES // (4 * mirror.dim))
    for lo, hi in _blocks(count, rows_per_block):
        norms = row_norms(mirror.matrix[lo:hi])
        mirror.norms[lo:hi] = norms
        mirror.inv_norms[lo:hi] = inverse_norms(norms)  # a row deleted during the load: inf
        pause()
    mirror.alive[:count] = True
    mirror.n = mirror.sorted_n = count
    mirror._by_code, mirror._sorted_codes = grouped_orders(mirror.codes, count, pause)


def grouped_orders(
    codes: npt.NDArray[np.int32], count: int, pause: Pause
) -> tuple[list[npt.NDArray[np.int32]], list[npt.NDArray[np.int32]]]:
    """Per axis, the first ``count`` rows ordered by their code (stable: ascending within
    a code) and the codes in that order: what finds a value's rows in two lookups."""
    by_code: list[npt.NDArray[np.int32]] = []
    sorted_codes: list[npt.NDArray[np.int32]] = []
    for axis_index in range(len(AXES)):
        held = codes[axis_index, :count]
        order = np.argsort(held, kind="stable").astype(np.int32)
        by_code.append(order)
        sorted_codes.append(held[order])
        pause()
    return by_code, sorted_codes


def load(
    db: Database, dim: int, max_bytes: int, pause: Pause, mark: Callable[[str], None]
) -> VectorMirror | None:
    """Every chunk of the file, grouped by scope, as of the log head noted first (its
    ``seq``; the worker applies the log after it). ``None`` when it does not fit
    ``max_bytes``. ``mark("load-sorted")`` is called between the two passes."""
    mirror = VectorMirror(dim, max_bytes)
    with db.read() as conn:
        head, count = conn.execute(
            "SELECT (SELECT coalesce(max(seq), 0) FROM memory_changes), "
            "(SELECT count(*) FROM memory_chunks)"
        ).fetchall()[0]
    if int(count) * mirror.bytes_per_row > max_bytes:
        return None
    rowids: list[int] = []
    ids: list[str] = []
    payloads: list[tuple[int, str, int, str]] = []
    code_parts: list[npt.NDArray[np.int32]] = []
    code = mirror._code
    first_pass = (
        "chunk_id, tenant, grp, end_user, agent_self, revision, vector_key, "
        "vector_f64 IS NOT NULL, record_json"
    )
    for part in _by_rowid(db, first_pass, pause):
        columns = list(zip(*part, strict=True))
        rowids += columns[0]
        ids += columns[1]
        payloads += zip(columns[6], columns[7], columns[8], columns[9], strict=True)
        code_parts.append(
            np.array(
                [[code(a, v) for v in columns[2 + a]] for a in range(len(AXES))],
                dtype=np.int32,
            )
        )
    count = len(ids)
    codes = (
        np.concatenate(code_parts, axis=1)
        if code_parts
        else np.zeros((len(AXES), 0), dtype=np.int32)
    )
    del code_parts
    records = [p[3] if len(p[3]) <= RECORD_INLINE else None for p in payloads]
    record_bytes = _held_bytes(records)
    if count * mirror.bytes_per_row + record_bytes > max_bytes:
        return None
    order = np.lexsort(codes[::-1])  # tenant first, then group, end_user, agent
    place = np.empty(count, dtype=np.int64)
    place[order] = np.arange(count)
    ordered = order.tolist()
    values = mirror.values
    mirror._reset(capacity(count))  # room for a regroup's copy, of a store grown since
    mirror.values = values
    mirror.codes[:, :count] = codes[:, order]
    del codes
    for lo, hi in _blocks(count, LIST_BLOCK):
        part = ordered[lo:hi]
        picked = pick(ids, part)
        mirror.ids[lo:hi] = picked
        mirror.id_hashes[lo:hi] = id_hashes(picked)
        held = pick(payloads, part)
        mirror.revisions[lo:hi] = [p[0] for p in held]
        mirror.keys[lo:hi] = [p[1] for p in held]
        mirror.wide[lo:hi] = [bool(p[2]) for p in held]
        mirror.records[lo:hi] = pick(records, part)
        pause()
    del ids, payloads, records, ordered
    mirror.rows = _index(mirror, count, pause)
    mirror.record_bytes = record_bytes
    mark("load-sorted")
    _place_vectors(db, mirror, np.array(rowids, dtype=np.int64), place, pause)
    _finish(mirror, count, pause)
    mirror.seq = int(head)
    return mirror


def _place_vectors(
    db: Database, mirror: VectorMirror, rowids: npt.NDArray[np.int64], place: Any, pause: Pause
) -> None:
    """The second pass: each vector read by rowid into its row's place. A row deleted
    since the first pass is left empty, and one inserted since is skipped: both are in the
    log, applied after the load."""
    matrix = mirror.matrix
    for part in _by_rowid(db, "embedding", pause):
        got = np.array([r[0] for r in part], dtype=np.int64)
        at = np.minimum(np.searchsorted(rowids, got), max(0, len(rowids) - 1))
        known = rowids[at] == got if len(rowids) else np.zeros(len(got), dtype=bool)
        vectors = np.frombuffer(b"".join(r[1] for r in part), dtype=np.float32)
        vectors = vectors.reshape(len(part), mirror.dim)
        matrix[place[at[known]]] = vectors[known]


def copy_bytes(live: VectorMirror) -> int:
    """What a regrouped copy of ``live`` adds while both exist: its arrays and Python
    bookkeeping per live row (the ids and records themselves are shared, not copied)."""
    return (live.n - live.dead) * live.bytes_per_row


class Plan(NamedTuple):
    """What a regroup takes of the live mirror at one instant (``plan``): the rows alive at
    its ``seq``, their axis codes renumbered to the values those rows hold, and the code
    tables that renumbering makes."""

    seq: int
    alive: I64
    codes: npt.NDArray[np.int32]
    values: list[dict[str, int]]


def plan(live: VectorMirror, pause: Pause) -> Plan:
    """The regroup's view of ``live``: call while nothing changes it (``pause`` must not
    let a follow run), since its code tables are read a block at a time."""
    n, seq = live.n, live.seq
    alive = np.flatnonzero(live.alive[:n])
    codes = np.empty((len(AXES), len(alive)), dtype=np.int32)
    tables: list[dict[str, int]] = []
    for axis_index in range(len(AXES)):
        held = live.codes[axis_index, alive]
        table = live.values[axis_index]
        remap = np.zeros(len(table) + 1, dtype=np.int32)
        present = np.unique(held)
        present = present[present != 0]
        remap[present] = np.arange(1, len(present) + 1, dtype=np.int32)
        codes[axis_index] = remap[held]
        values: dict[str, int] = {}
        items = iter(table.items())
        while chunk := list(islice(items, LIST_BLOCK)):
            values.update((v, int(remap[c])) for v, c in chunk if remap[c])
            pause()
        tables.append(values)
    return Plan(seq, alive, codes, tables)


def regrouped(
    live: VectorMirror, planned: Plan, pause: Pause, spare: VectorMirror | None = None
) -> VectorMirror:
    """A copy of ``live``'s rows as ``planned``, grouped by scope again, with the values no
    live row holds dropped from the code tables. ``live`` is read without its lock while
    follows may change it: every row they change is in the log after the plan's ``seq``,
    which the worker applies to the copy before swapping it in, so a row read mid-change
    is overwritten then. ``spare``: the rows the previous regroup replaced (or the load
    made room in: ``spare_for``), whose arrays the copy is built in when they have room
    (``_room``)."""
    alive = planned.alive
    count = len(alive)
    copy = _room(live, count, spare)
    copy.values = list(planned.values)
    by_scope = np.lexsort(planned.codes[::-1])
    order = alive[by_scope]
    copy.codes[:, :count] = planned.codes[:, by_scope]
    del by_scope
    rows_per_block = max(1, BLOCK_BYTES // (4 * live.dim))
    for lo, hi in _blocks(count, rows_per_block):
        np.take(live.matrix, order[lo:hi], axis=0, out=copy.matrix[lo:hi], mode="clip")
        pause()
    for name in ("inv_norms", "norms", "wide", "id_hashes"):
        np.take(getattr(live, name), order, out=getattr(copy, name)[:count], mode="clip")
    copy.alive[:count] = True
    for name in ("ids", "revisions", "keys", "records"):
        for lo, hi in _blocks(count, LIST_BLOCK):  # ``live``'s arrays may be regrown between
            np.take(getattr(live, name), order[lo:hi], out=getattr(copy, name)[lo:hi], mode="clip")
            pause()
    copy.rows = _index(copy, count, pause)
    copy.record_bytes = 0
    for lo, hi in _blocks(count, LIST_BLOCK):  # each record's string read where it lies
        copy.record_bytes += _held_bytes(copy.records[lo:hi].tolist())
        pause()
    copy.n = copy.sorted_n = count
    copy._by_code, copy._sorted_codes = grouped_orders(copy.codes, count, pause)
    copy.seq = planned.seq  # rows changed since are in the log after it
    return copy


def capacity(count: int) -> int:
    """The rows a load or a regroup makes arrays of ``count`` live rows with: room for the
    copy the next regroup makes in them (a copy needs ``count + headroom(count)``) when
    the store has grown meanwhile by as many rows as make a regroup due (half the
    headroom). The pages past the rows are not touched until written."""
    grown = count + headroom(count) // 2
    return grown + headroom(grown)


def release(spare: VectorMirror, pause: Pause) -> None:
    """Drop what ``spare`` holds besides its arrays (the id map and code tables of the
    rows a regroup replaced, and the ids, keys and records in its object arrays), a part
    between two pauses. The strings only they still held (the chunks deleted meanwhile)
    are freed here a few at a time; at 1M rows, dropped at once, the id map held the GIL
    for 42 ms, and a block of the object arrays' frees for up to 30 ms."""
    spare.rows.drain(pause)
    while spare.values:
        spare.values.pop()  # an axis's table: a few thousand values, up to one per row
        pause()
    for name in ("ids", "keys", "records"):
        array = getattr(spare, name)
        for lo, hi in _blocks(len(array), LIST_BLOCK):
            array[lo:hi] = None
            pause()


def spare_for(live: VectorMirror, pause: Pause) -> VectorMirror:
    """Arrays a first regroup of ``live`` builds its copy in (``_room``), made now, with the
    pages its rows take written, a block between two pauses. New memory costs the process
    its first write to each page: with the huge pages the matrix is advised to use, the
    kernel compacts memory for them, here 3 s of CPU for the 1.5 GB of 1M x 384, twice
    what the regroup's copying costs. A load pays it while the searches run in SQL; a
    first regroup would pay it while they run beside it."""
    spare = VectorMirror(live.dim, live.max_bytes)
    spare._reset(capacity(live.n))
    rows_per_block = max(1, BLOCK_BYTES // (4 * live.dim))
    for lo, hi in _blocks(live.n, rows_per_block):
        write_places(spare, lo, hi)
        pause()
    return spare


def _room(live: VectorMirror, count: int, spare: VectorMirror | None) -> VectorMirror:
    """An empty mirror with room for ``count`` rows and their headroom: in ``spare``'s
    arrays when they are large enough, else newly allocated. Memory the process touches
    for the first time costs it a page fault per page (here 0.5 s and more of CPU for the
    300 MB of 100k x 768, ten times the copying itself, taken from the searches); arrays
    it touched before cost nothing more. The places past the rows are cleared, as new."""
    copy = VectorMirror(live.dim, live.max_bytes)
    if spare is None or len(spare.alive) < count + headroom(count) or spare.dim != live.dim:
        copy._reset(capacity(count))
        return copy
    for name in ARRAYS:
        setattr(copy, name, getattr(spare, name))
    copy.alive[count:] = False
    copy.wide[count:] = False
    copy.codes[:, count:] = 0
    for name in ("ids", "keys", "records"):
        getattr(copy, name)[count:] = None
    return copy
