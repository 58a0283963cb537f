"""A search on a mirror the change log has moved past: the mirror answers for the chunks
that did not change since its ``seq``, and the chunks logged after it are read from the
search's own snapshot and ranked beside them. The mirror worker applies those entries in
the background; meanwhile no search waits for it, and every one sees each write committed
before it began.

One statement reads every changed id (the mirror leaves their rows out, whatever it holds
for them) and, for those the filter admits now, what a hit needs: a deleted chunk joins no
row, a moved one is out of the old scope. Their exact float64 scores are the mirror's bits
(``cosine.py``), so the union, ordered by score and then id, is the exact answer.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import apsw
import numpy as np

from ratatoskr.memory import rules
from ratatoskr.memory.search.cosine import I64, cosine_scores, rank
from ratatoskr.memory.search.hits import Row, hit_from_row
from ratatoskr.memory.search.mirror import VectorMirror
from ratatoskr.sqlite.scope_sql import scope_condition

Hits = list[dict[str, Any]]


class Overlay(NamedTuple):
    """The chunks logged after a mirror's ``seq``, at one snapshot: every id, and the
    stored rows of those inside the search's filter (``hits.Row``, the float32 vector
    always, the float64 one when the embedding is asked for)."""

    changed: list[str]
    inside: list[Row]

    def excluded(self, mirror: VectorMirror) -> I64:
        """The mirror's rows of the changed chunks (call under its lock)."""
        rows = mirror.rows
        held = [rows[cid] for cid in self.changed if cid in rows]
        return np.array(held, dtype=np.int64)


def read_overlay(conn: apsw.Connection, since: int, call: rules.SearchCall) -> Overlay:
    """The chunks logged after entry ``since``, in ``conn``'s read transaction."""
    condition, params = scope_condition(call.scope_all, call.scope_any)
    wide = "m.vector_f64" if call.include_embedding else "NULL"
    rows = conn.execute(
        f"SELECT c.chunk_id, m.revision, m.vector_key, CASE WHEN {condition} THEN m.embedding "
        f"END, CASE WHEN {condition} THEN {wide} END, CASE WHEN {condition} THEN "
        "m.record_json END FROM (SELECT DISTINCT chunk_id FROM memory_changes WHERE seq > ?) "
        "AS c LEFT JOIN memory_chunks AS m ON m.chunk_id = c.chunk_id",
        (*params, *params, *params, since),
    ).fetchall()
    return Overlay([r[0] for r in rows], [r for r in rows if r[3] is not None])


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
