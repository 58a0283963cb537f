"""A search on a mirror the change log has moved past: the mirror answers for the chunks
that did not change since its ``seq``, and the chunks logged after it are read from the
search's own snapshot and ranked beside them. The mirror worker applies those entries in
the background; meanwhile no search waits for it, and every one sees each write committed
before it began.

What changed is read once per stretch of the log (``ChangeView``), by the first search
that finds the log at a new head, or by the worker, which reads whole rows to apply them.
A search reads only the changed ids and each one's last entry: a batch's thousand entries
made into Python rows cost a millisecond, and a search needs the scopes of none but the
few chunks its own filter admits, which SQLite picks from the same entries in a few tens
of microseconds (``ChangeView.overlay``). Every later search whose snapshot is at that
same head, on that same mirror ``seq``, takes the view as it is: the same chunks in the
same state, without reading them again. Each search then leaves the mirror's rows of
every changed chunk out (whatever the mirror holds for them), and ranks beside the mirror
those changed chunks its filter admits now, read from its own snapshot when the view
holds only their ids or scope: a deleted chunk is not stored, a moved one is out of its
old scope. Their exact float64 scores are the mirror's bits (``cosine.py``), so the
union, ordered by score and then id, is the exact answer.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Any, NamedTuple

import apsw
import numpy as np
import orjson

from ratatoskr.core.scope import AXES, Scope
from ratatoskr.memory import rules
from ratatoskr.memory.search.build import chunk_rows
from ratatoskr.memory.search.cosine import I64, cosine_scores, rank
from ratatoskr.memory.search.hits import Row, hit_from_row
from ratatoskr.memory.search.mirror import Changed, VectorMirror, id_hashes
from ratatoskr.sqlite.scope_sql import scope_condition

SCOPE = 6  # a view's row of what the log says: id, four axis values, stored

Hits = list[dict[str, Any]]


class ChangedRows:
    """The mirror's rows of a view's changed chunks at one of its generations: looked up
    in the mirror's id map once (a thousand cold lookups cost a million-row mirror's
    search a third of a millisecond), then shared by every search at that view until the
    worker next changes the rows. Read and written under the mirror's lock."""

    __slots__ = ("generation", "rows", "hashes")

    def __init__(self) -> None:
        self.generation = -1
        self.rows: I64 | None = None
        self.hashes: I64 | None = None  # the changed ids' ``hash()``, sorted (any generation)


class Overlay(NamedTuple):
    """The chunks logged after a mirror's ``seq``, at one snapshot: every id, and the
    stored rows of those inside the search's filter (``hits.Row``, the float32 vector
    always, the float64 one when the embedding is asked for); ``found``, their view's
    rows in the mirror."""

    changed: Set[str]
    inside: list[Row]
    found: ChangedRows

    def known(self, mirror: VectorMirror) -> I64 | None:
        """``excluded``, when a search at this view already found it at the mirror's
        present generation (call under its lock)."""
        found = self.found
        return found.rows if found.generation == mirror.generation else None

    def excluded(self, mirror: VectorMirror) -> I64:
        """The mirror's rows of the changed chunks, looked up now and left for the searches
        after this one at the same generation (``known``; call under the lock)."""
        held = [row for row in mirror.rows.rows_of(self.changed) if row >= 0]
        rows = np.array(held, dtype=np.int64)
        self.found.rows, self.found.generation = rows, mirror.generation
        return rows

    def kept(self, mirror: VectorMirror, admitted: I64) -> I64:
        """``admitted`` rows whose chunk did not change (call under the lock): cheaper than
        ``excluded`` unless the filter admits many times more rows than there are changed
        chunks (the mirror's id map is large and cold). The rows' id hashes are looked up
        among the changed ids' (contiguous integers: a thousand rows at 1M chunks in 0.09
        ms, against 0.44 ms through their id strings); only a row whose hash matches has
        its id compared."""
        if not len(admitted):
            return admitted
        changed = self.found.hashes
        if changed is None:
            changed = self.found.hashes = np.sort(id_hashes(list(self.changed)))
        if not len(changed):
            return admitted
        hashes = mirror.id_hashes[admitted]
        at = np.searchsorted(changed, hashes)
        at[at == len(changed)] = 0
        matched = np.flatnonzero(changed[at] == hashes)
        if not len(matched):
            return admitted
        ids = mirror.ids[admitted[matched]].tolist()
        gone = [i for i, cid in zip(matched.tolist(), ids, strict=True) if cid in self.changed]
        keep = np.ones(len(admitted), dtype=bool)
        keep[gone] = False
        return admitted[keep]


class ChangeView(NamedTuple):
    """The chunks logged after entry ``since`` up to ``upto``, the log's head when they
    were read: every changed id, and either per chunk still stored its id and four axis
    values (``SCOPE``: what the log says) or its whole row, as the worker reads it to
    apply it (``mirror.CHANGED_COLUMNS``, which begin with the same five); or, as a
    search reads it, ``stored`` is ``None`` and ``latest`` holds each changed chunk's
    last entry."""

    since: int
    upto: int
    changed: Set[str]
    stored: Sequence[Changed] | None
    found: ChangedRows  # a new one per view (``of``): the searches at it share it
    latest: dict[str, int] | None = None

    @classmethod
    def of(cls, since: int, upto: int, changed: Set[str], stored: Sequence[Changed]) -> ChangeView:
        return cls(since, upto, changed, stored, ChangedRows())

    def overlay(self, conn: apsw.Connection | None, call: rules.SearchCall) -> Overlay | None:
        """The overlay of a search whose snapshot (``conn``'s) is at ``upto``, or, outside
        a transaction, a connection whose caller shows afterwards that the file did not
        change since its snapshot at ``upto``; without ``conn``, ``None`` when a row it
        needs is not in the view (only its id or scope was read, or a float64 embedding is
        asked for)."""
        if self.stored is None:
            if conn is None:
                return None
            return Overlay(self.changed, self._inside(conn, call), self.found)
        inside = _admitted(self.stored, call.scope_all, call.scope_any)
        whole = [r for r in inside if len(r) > SCOPE and not (call.include_embedding and r[8])]
        rows: list[Row] = [(r[0], r[6], r[7], r[5], None, r[9]) for r in whole]
        if len(whole) < len(inside):
            if conn is None:
                return None
            held = {r[0] for r in whole}
            missing = [r[0] for r in inside if r[0] not in held]
            rows += _read_rows(conn, missing, call.include_embedding)
        return Overlay(self.changed, rows, self.found)

    def _inside(self, conn: apsw.Connection, call: rules.SearchCall) -> list[Row]:
        """The stored rows of the changed chunks the filter admits: those whose last entry
        says the chunk is stored with a scope inside it (``schema.py``)."""
        assert self.latest is not None
        condition, params = scope_condition(call.scope_all, call.scope_any)
        entries = conn.execute(
            "SELECT chunk_id, seq FROM memory_changes "
            f"WHERE seq > ? AND seq <= ? AND stored AND {condition}",
            [self.since, self.upto, *params],
        ).fetchall()
        latest = self.latest
        ids = [cid for cid, seq in entries if latest.get(cid) == seq]
        return _read_rows(conn, ids, call.include_embedding) if ids else []


def read_view(
    conn: apsw.Connection, since: int, head: int, base: ChangeView | None = None
) -> ChangeView:
    """The chunks logged after entry ``since``, in ``conn``'s read transaction (whose
    log head is ``head``), from the log alone: each changed id and its last entry, which
    says whether the chunk is stored and with what scope (``schema.py``). ``base``, a
    view of the same ``since`` at an earlier head, is extended by the entries after it.
    An entry written before the log said so has the table joined instead."""
    start = since if base is None else base.upto
    if base is not None and base.latest is None:
        return _extended(conn, since, head, base)
    unmarked = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM memory_changes WHERE seq > ? AND stored IS NULL)",
        (start,),
    ).fetchall()[0][0]
    if unmarked:
        return _joined_view(conn, since, head)
    # Two JSON arrays in one row: a thousand entries as Python rows cost 0.67 ms at 1M
    # chunks, as two arrays 0.54 ms. The subquery's rowid search keeps the log's order.
    ids, seqs = conn.execute(
        "SELECT json_group_array(chunk_id), json_group_array(seq) FROM "
        "(SELECT chunk_id, seq FROM memory_changes WHERE seq > ? ORDER BY seq)",
        (start,),
    ).fetchall()[0]
    # a chunk's later entry replaces its earlier ones
    latest: dict[str, int] = dict(zip(orjson.loads(ids), orjson.loads(seqs), strict=True))
    found = ChangedRows()
    if base is not None and base.latest is not None:
        hashes = base.found.hashes  # extended by the new ids' alone (a repeated hash
        if hashes is not None:  # finds its rows the same)
            found.hashes = np.sort(np.concatenate((hashes, id_hashes(list(latest)))))
        latest = {**base.latest, **latest}
    return ChangeView(since, head, latest.keys(), None, found, latest)  # ids: its keys


def _extended(conn: apsw.Connection, since: int, head: int, base: ChangeView) -> ChangeView:
    """``base``, a view of whole rows or scopes, extended by the entries after it."""
    assert base.stored is not None
    entries = conn.execute(
        "SELECT chunk_id, tenant, grp, end_user, agent_self, stored FROM memory_changes "
        "WHERE seq > ? ORDER BY seq",
        (base.upto,),
    ).fetchall()
    last = {r[0]: r for r in entries}  # a chunk's later entry replaces its earlier ones
    if any(r[5] is None for r in last.values()):
        return _joined_view(conn, since, head)
    stored = [r for r in last.values() if r[5]]
    kept = [r for r in base.stored if r[0] not in last]
    return ChangeView.of(since, head, base.changed | last.keys(), kept + stored)


def _joined_view(conn: apsw.Connection, since: int, head: int) -> ChangeView:
    rows = conn.execute(
        "SELECT c.chunk_id, m.tenant, m.grp, m.end_user, m.agent_self, m.rowid IS NOT NULL "
        "FROM (SELECT DISTINCT chunk_id FROM memory_changes WHERE seq > ?) AS c "
        "LEFT JOIN memory_chunks AS m ON m.chunk_id = c.chunk_id",
        (since,),
    ).fetchall()
    return ChangeView.of(since, head, {r[0] for r in rows}, [r for r in rows if r[5]])


def _read_rows(conn: apsw.Connection, ids: list[str], include_embedding: bool) -> list[Row]:
    """What a hit needs of ``ids``, with the float32 vector always (it is ranked)."""
    wide = "vector_f64" if include_embedding else "NULL"
    columns = f"chunk_id, revision, vector_key, embedding, {wide}, record_json"
    return chunk_rows(conn, columns, ids)


def _admitted(stored: Sequence[Changed], scope_all: Scope, scope_any: Sequence[Scope]) -> list[Any]:
    """The rows of ``stored`` the filter (``core.scope.matches``) admits, by their axis
    columns (each pair compared by position: a view can hold thousands of rows)."""
    rows = list(stored)
    for axis, value in scope_all.items():
        at = 1 + AXES.index(axis)
        rows = [r for r in rows if r[at] == value]
    if not scope_any or not rows:
        return rows
    branches = [[(1 + AXES.index(axis), value) for axis, value in e.items()] for e in scope_any]
    return [r for r in rows if any(all(r[at] == v for at, v in b) for b in branches)]


def overlay_hits(overlay: Overlay, call: rules.SearchCall, mirror_hits: Hits) -> Hits:
    """The exact top_k of the mirror's hits (the changed chunks left out) and the changed
    chunks inside the filter."""
    inside = overlay.inside
    if not inside:
        return mirror_hits
    matrix = np.frombuffer(b"".join(r[3] for r in inside), dtype=np.float32)
    scores = cosine_scores(matrix.reshape(len(inside), -1), call.vector)
    ranked = rank([r[0] for r in inside], scores, call.top_k)
    by_id = {r[0]: r for r in inside}
    hits = mirror_hits + [
        hit_from_row(by_id[cid], score, call.include_embedding) for cid, score in ranked
    ]
    hits.sort(key=lambda hit: (-hit["score"], hit["chunk_id"]))
    return hits[: call.top_k]
