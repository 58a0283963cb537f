"""The memory search, in one routine: from the mirror when it can answer, else exact SQL.

A search walks these steps, each of which may hand it to the next route:

1. **current**: when the file provably has not changed since the mirror last synced
   (``CurrentMark``), rank on the mirror without opening a read transaction;
2. **mirror**: inside a read transaction, lock the mirror, apply the change log up to that
   snapshot (``sync``), note the mark, admit the filter's rows and rank them;
3. **SQL**: with no mirror, a mirror still loading, or one over its byte budget, rank in SQL.

``quick`` is the wire's event-loop mode: every step refuses (``None``) instead of waiting or
doing more than about half a millisecond of work, so the caller can fall back to a thread.
Every route picks float32 candidates with a margin and rescores them in float64, so all of
them return the same exact hits.
"""

from __future__ import annotations

from typing import Any

import apsw

from ratatoskr.memory import rules
from ratatoskr.memory.search.hits import CurrentMark, Gathered, fetch_rows, mirror_hits, sql_hits
from ratatoskr.memory.search.mirror import VectorMirror
from ratatoskr.memory.search.sql import rank_in_sql
from ratatoskr.sqlite.database import Database

# the quick mode's bounds: about half a millisecond of work, whatever the dimension
QUICK_CHANGES = 64  # change-log entries a quick search may apply
QUICK_FLOATS = 1 << 21  # rows x dim to score
QUICK_HITS = 64
QUICK_HIT_FLOATS = 1 << 14  # embedding values in the hits: ~20 embeddings at 768

Hits = list[dict[str, Any]]


class SearchEngine:
    """Owns the mirror of one store's file and answers its searches."""

    def __init__(self, db: Database, embedding_dim: int, mirror: VectorMirror | None) -> None:
        self.db = db
        self.embedding_dim = embedding_dim
        self.mirror = mirror
        self._mark = CurrentMark()

    def search(self, call: rules.SearchCall, *, quick: bool = False) -> Hits | None:
        """The hits of a validated, confined call; ``None`` only in ``quick`` mode, when
        the search is not cheap for sure (nothing was done that needs undoing)."""
        hits = self._from_current(call, quick)
        if hits is not None:
            return hits
        mirror = self.mirror
        if quick and (mirror is None or mirror.loading):
            return None
        with self.db.read() as conn:
            gathered = self._on_mirror(conn, call, quick)
            if gathered is None:
                if quick:
                    return None
                ranked = rank_in_sql(conn, call, self.embedding_dim)
                return sql_hits(conn, ranked, call.include_embedding)
            unheld = gathered.unheld()
            fetched = fetch_rows(conn, unheld, call.include_embedding) if unheld else {}
            return mirror_hits(gathered, call.include_embedding, fetched)

    def _on_mirror(
        self, conn: apsw.Connection, call: rules.SearchCall, quick: bool
    ) -> Gathered | None:
        """Step 2 at ``conn``'s snapshot; ``None`` hands the search on (to SQL, or back)."""
        mirror = self.mirror
        if mirror is None or mirror.loading:
            return None  # a (re)load takes seconds at 1M chunks: answer in SQL meanwhile
        if not mirror.lock.acquire(blocking=not quick):
            return None
        try:
            if not mirror.sync(conn, max_changes=QUICK_CHANGES if quick else None):
                return None
            self._mark.note(conn, mirror.generation)
            return self._rank(mirror, call, quick)
        finally:
            mirror.lock.release()

    def _from_current(self, call: rules.SearchCall, quick: bool) -> Hits | None:
        """Step 1: the mirror alone, when the file is provably unchanged since it synced;
        ``None`` when that cannot be shown (or, ``quick``, the work is not small)."""
        mirror = self.mirror
        if mirror is None or mirror.loading or self.db.in_memory:
            return None
        conn = self.db.connection()
        try:
            current = self._mark.check(conn)
        except apsw.Error:
            return None  # the full path reports it
        if current is None:
            return None
        version, generation = current
        if not mirror.lock.acquire(blocking=not quick):
            return None
        try:
            if mirror.generation != generation:
                return None
            gathered = self._rank(mirror, call, quick)
        finally:
            mirror.lock.release()
        if gathered is None:
            return None
        unheld = gathered.unheld()
        if not unheld:
            return mirror_hits(gathered, call.include_embedding, {})
        try:
            fetched = fetch_rows(conn, unheld, call.include_embedding)  # its own snapshot
        except apsw.Error:
            return None
        if conn.data_version() != version or len(fetched) != len(unheld):
            return None  # the file changed since the check: not the mirror's snapshot
        return mirror_hits(gathered, call.include_embedding, fetched)

    def _rank(self, mirror: VectorMirror, call: rules.SearchCall, quick: bool) -> Gathered | None:
        """Admit the filter's rows and rank them (the caller holds the lock); ``None`` in
        ``quick`` mode when scoring them or building the hits would not stay small."""
        rows = mirror.admitted(call.scope_all, call.scope_any)
        if quick and not self._quick_enough(mirror.admitted_count(rows), call):
            return None
        return mirror.search(rows, call.vector, call.top_k, call.include_embedding)

    def _quick_enough(self, admitted: int, call: rules.SearchCall) -> bool:
        """Whether ranking ``admitted`` rows and building the hits stays small: the rows to
        score, the number of hits, and the floats of their embeddings (built as Python
        lists, then written as JSON on the event loop)."""
        hits = min(call.top_k, admitted)
        embedding_floats = hits * self.embedding_dim if call.include_embedding else 0
        return (
            admitted * self.embedding_dim <= QUICK_FLOATS
            and hits <= QUICK_HITS
            and embedding_floats <= QUICK_HIT_FLOATS
        )
