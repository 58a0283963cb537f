"""A search on a mirror the change log has moved past: the mirror answers for the chunks
that did not change since its ``seq``, and the chunks logged after it are read from the
search's own snapshot and ranked beside them. The mirror worker applies those entries in
the background; meanwhile no search waits for it, and every one sees each write committed
before it began.

What changed is read once per stretch of the log (``ChangeView``: every changed id, and
the axis values of those still stored), by the first search that finds the log at a new
head, or by the worker, which reads whole rows to apply them. Every later search whose
snapshot is at that same head, on that same mirror ``seq``, takes the view as it is: the
same chunks in the same state, without reading them again. Each search then leaves the
mirror's rows of every changed chunk out (whatever the mirror holds for them), and ranks
beside the mirror those changed chunks its filter admits now, read from its own snapshot
when the view holds only their scope: a deleted chunk is not stored, a moved one is out of
its old scope. Their exact float64 scores are the mirror's bits (``cosine.py``), so the
union, ordered by score and then id, is the exact answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import apsw
import numpy as np

from ratatoskr.core.scope import AXES, Scope
from ratatoskr.memory import rules
from ratatoskr.memory.search.cosine import I64, cosine_scores, rank
from ratatoskr.memory.search.hits import Row, hit_from_row
from ratatoskr.memory.search.mirror import Changed, VectorMirror
from ratatoskr.sqlite.scope_sql import placeholders

READ_IDS = 500  # ids per statement when reading the rows a filter admits

Hits = list[dict[str, Any]]


class Overlay(NamedTuple):
    """The chunks logged after a mirror's ``seq``, at one snapshot: every id, and the
    stored rows of those inside the search's filter (``hits.Row``, the float32 vector
    always, the float64 one when the embedding is asked for)."""

    changed: set[str]
    inside: list[Row]

    def excluded(self, mirror: VectorMirror) -> I64:
        """The mirror's rows of the changed chunks (call under its lock)."""
        held = [row for row in map(mirror.rows.get, self.changed) if row is not None]
        return np.array(held, dtype=np.int64)

    def kept(self, mirror: VectorMirror, admitted: I64) -> I64:
        """``admitted`` rows whose chunk did not change (call under the lock): cheaper than
        ``excluded`` when the filter admits fewer rows than there are changed chunks."""
        changed = self.changed
        keep = [cid not in changed for cid in mirror.ids[admitted].tolist()]
        return admitted[np.array(keep, dtype=bool)] if keep else admitted


class ChangeView(NamedTuple):
    """The chunks logged after entry ``since`` up to ``upto``, the log's head when they
    were read: every changed id, and per chunk still stored its id and four axis values
    (``SCOPE_COLUMNS``), or, when ``whole``, its row as the worker reads it to apply it
    (``mirror.CHANGED_COLUMNS``, which begin with the same five)."""

    since: int
    upto: int
    changed: set[str]
    stored: Sequence[Changed]
    whole: bool

    def overlay(self, conn: apsw.Connection, call: rules.SearchCall) -> Overlay:
        """The overlay of a search whose snapshot (``conn``'s) is at ``upto``."""
        inside = [r for r in self.stored if _admits(r, call.scope_all, call.scope_any)]
        if not inside:
            return Overlay(self.changed, [])
        if self.whole and not (call.include_embedding and any(r[8] for r in inside)):
            rows: list[Row] = [(r[0], r[6], r[7], r[5], None, r[9]) for r in inside]
        else:  # a float64 embedding asked for is only in the file
            rows = _read_rows(conn, [r[0] for r in inside], call.include_embedding)
        return Overlay(self.changed, rows)


def read_view(conn: apsw.Connection, since: int, head: int) -> ChangeView:
    """The chunks logged after entry ``since``, in ``conn``'s read transaction (whose
    log head is ``head``)."""
    rows = conn.execute(
        "SELECT c.chunk_id, m.tenant, m.grp, m.end_user, m.agent_self, m.rowid IS NOT NULL "
        "FROM (SELECT DISTINCT chunk_id FROM memory_changes WHERE seq > ?) AS c "
        "LEFT JOIN memory_chunks AS m ON m.chunk_id = c.chunk_id",
        (since,),
    ).fetchall()
    return ChangeView(since, head, {r[0] for r in rows}, [r for r in rows if r[5]], False)


def _read_rows(conn: apsw.Connection, ids: list[str], include_embedding: bool) -> list[Row]:
    """What a hit needs of ``ids``, with the float32 vector always (it is ranked)."""
    wide = "vector_f64" if include_embedding else "NULL"
    rows: list[Row] = []
    for lo in range(0, len(ids), READ_IDS):
        part = ids[lo : lo + READ_IDS]
        rows += conn.execute(
            f"SELECT chunk_id, revision, vector_key, embedding, {wide}, record_json "
            f"FROM memory_chunks WHERE chunk_id IN ({placeholders(len(part))})",
            part,
        ).fetchall()
    return rows


def _admits(row: Changed, scope_all: Scope, scope_any: Sequence[Scope]) -> bool:
    """The filter (``core.scope.matches``) on a changed row's axis columns."""
    if any(row[1 + AXES.index(axis)] != value for axis, value in scope_all.items()):
        return False
    return not scope_any or any(
        all(row[1 + AXES.index(axis)] == value for axis, value in element.items())
        for element in scope_any
    )


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
