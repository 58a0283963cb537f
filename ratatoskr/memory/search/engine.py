"""The memory search, in one routine: from the mirror when it can answer, else exact SQL.

A search walks these steps, each of which may hand it to the next route:

1. **current**: when the file provably has not changed since this thread's last search
   read its log head, and the mirror is at that head or the changes the mark holds bring
   it there (``CurrentMark``), rank on the mirror without opening a read transaction; the
   changes (a ``ChangeView``) are ranked beside it as in step 2, the filter's changed rows
   read when the view holds only ids, and the file shown unchanged after every read;
2. **mirror**: lock the mirror, then open a read transaction (so the snapshot holds every
   change the mirror does: the worker applies a change only after reading it), read the
   log's head, and rank on the mirror; when the log is ahead of the mirror, the chunks
   changed since (read once per head, by the first search or the worker) are left out of
   it and ranked beside it (**overlay**);
3. **SQL**: with no mirror, before its first load is complete, over its byte budget, or
   a log too far ahead of it (``OVERLAY_MAX``), rank in SQL.

No search loads or regroups the mirror: its worker thread (``worker.py``) does, and a
search never waits for it beyond one of its short steps. Only a long search, once its hits
are computed, follows the log on its own thread (``FOLLOW_HERE_FLOATS``), and only when
the worker is not changing the mirror: it never waits for that either. ``quick`` is the wire's
event-loop mode: every step refuses (``None``) instead of waiting or doing more than about
half a millisecond of work, so the caller can fall back to a thread. Every route picks
float32 candidates with a margin and rescores them in float64, so all of them return the
same exact hits.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import apsw

from ratatoskr.memory import rules
from ratatoskr.memory.search.hits import CurrentMark, Gathered, fetch_rows, mirror_hits
from ratatoskr.memory.search.in_flight import InFlight
from ratatoskr.memory.search.mirror import VectorMirror
from ratatoskr.memory.search.overlay import Overlay, overlay_hits, read_view
from ratatoskr.memory.search.sql import rank_in_sql
from ratatoskr.memory.search.worker import MirrorWorker
from ratatoskr.sqlite.database import Database

# the quick mode's bounds: about half a millisecond of work, whatever the dimension
QUICK_CHANGES = 64  # change-log entries a quick search may read beside the mirror
QUICK_FLOATS = 1 << 21  # rows x dim to score
QUICK_HITS = 64
QUICK_HIT_FLOATS = 1 << 14  # embedding values in the hits: ~20 embeddings at 768
# Beyond this many change-log entries ahead of the mirror a search runs in SQL (the worker
# is then far behind: a burst of writes): reading them would cost more than SQL does.
OVERLAY_MAX = 8192
# A search wakes the worker only when the log is this far ahead of the mirror: woken by a
# search, the worker is run on that search's core, at once, and the search waits for it
# (measured: a third more searches over 3 ms under a writer). Otherwise the worker finds
# the entries at its next look, within ``worker.POLL_SECONDS``, and the searches until then
# share one read of them.
POKE_AHEAD = 2048
# up to this many admitted rows per changed chunk, a search checks the admitted rows' ids
# against the changed ones (``Overlay.kept``) rather than each changed id in the mirror,
# unless a search at the same view found the changed rows already (``Overlay.known``)
KEPT_PER_CHANGED = 4
# a search that scored this many floats (a tenant at a million rows: 38M) follows the log
# on its own thread once its hits are computed (``MirrorWorker.follow_here``)
FOLLOW_HERE_FLOATS = 1 << 23
LOADING_REASON = "search mirror is loading: searches are served by exact SQL, slower"

Hits = list[dict[str, Any]]


class SearchEngine:
    """Owns the mirror of one store's file (and its worker) and answers its searches."""

    def __init__(self, db: Database, embedding_dim: int, mirror: VectorMirror | None) -> None:
        self.db = db
        self.embedding_dim = embedding_dim
        self.mirror = mirror
        self._mark = CurrentMark()
        self._scored = threading.local()  # the floats this thread's search scored
        self.routes: Counter[str] = Counter()  # searches answered per route (approximate)
        self.in_flight = InFlight()  # the worker steps aside for them (``in_flight.py``)
        self.worker = MirrorWorker(db, mirror, self.in_flight) if mirror is not None else None
        if self.worker is not None:
            self.worker.start()

    @property
    def loading(self) -> bool:
        """Whether searches run in SQL because the mirror is not loaded yet (not because
        it is off or over its budget)."""
        mirror = self.mirror
        return mirror is not None and not mirror.ready and not mirror.over_budget

    def health(self, health: dict[str, Any]) -> dict[str, Any]:
        """A store's ``ok`` is ``degraded`` while the mirror loads: served, slower."""
        if health.get("status") == "ok" and self.loading:
            mode = health.get("reason")  # the durability the file's writes have
            reason = LOADING_REASON if mode is None else f"{LOADING_REASON}; {mode}"
            return {"status": "degraded", "reason": reason}
        return health

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop()

    def search(self, call: rules.SearchCall, *, quick: bool = False) -> Hits | None:
        """The hits of a validated, confined call; ``None`` only in ``quick`` mode, when
        the search is not cheap for sure (nothing was done that needs undoing)."""
        if self.worker is None:
            return self._search(call, quick)
        self.worker.asked()
        self._scored.floats = 0
        self.in_flight.begin()
        try:
            hits = self._search(call, quick)
        finally:
            self.in_flight.end()
        if not quick and self._scored.floats >= FOLLOW_HERE_FLOATS:
            self.worker.follow_here()
        return hits

    def _search(self, call: rules.SearchCall, quick: bool) -> Hits | None:
        hits = self._from_current(call, quick)
        if hits is not None:
            self.routes["current"] += 1
            return hits
        mirror = self.mirror
        if mirror is not None and mirror.ready:
            if not mirror.lock.acquire(blocking=not quick):
                return None
            held = True
            try:
                with self.db.read() as conn:
                    step = self._at_snapshot(conn, mirror, call, quick)
                    mirror.lock.release()
                    held = False
                    if step is None:
                        return None if quick else self._in_sql(conn, call)
                    gathered, overlay, route = step
                    if gathered is None:
                        return None
                    unheld = gathered.unheld()
                    fetched = fetch_rows(conn, unheld, call.include_embedding) if unheld else {}
                    hits = mirror_hits(gathered, call.include_embedding, fetched)
            finally:
                if held:
                    mirror.lock.release()
            self.routes[route] += 1
            return hits if overlay is None else overlay_hits(overlay, call, hits)
        if quick:
            return None
        with self.db.read() as conn:
            return self._in_sql(conn, call)

    def _in_sql(self, conn: apsw.Connection, call: rules.SearchCall) -> Hits:
        self.routes["sql"] += 1
        return rank_in_sql(conn, call, self.embedding_dim)

    def _at_snapshot(
        self, conn: apsw.Connection, mirror: VectorMirror, call: rules.SearchCall, quick: bool
    ) -> tuple[Gathered | None, Overlay | None, str] | None:
        """Step 2 in ``conn``'s snapshot, holding the mirror's lock: the mirror's part of the
        answer, the changes beside it and the route; ``None`` hands the search to SQL."""
        head, floor = conn.execute(
            "SELECT (SELECT max(seq) FROM memory_changes), (SELECT min(seq) FROM memory_changes)"
        ).fetchall()[0]
        head, seq = int(head or 0), mirror.seq
        if not mirror.ready:
            return None
        overlay, route = None, "mirror"
        if head == seq:
            self._mark.note(conn, head)
        else:
            if self.worker is not None and head - seq > POKE_AHEAD:
                self.worker.poke()  # far behind: now, rather than at its next look
            pruned = floor is not None and seq < int(floor) - 1
            if head < seq or pruned or head - seq > (QUICK_CHANGES if quick else OVERLAY_MAX):
                return None
            view = self.worker.ahead if self.worker is not None else None
            route = "overlay-shared"
            if view is None or view.since != seq or view.upto != head:
                base = view if view is not None and view.since == seq < view.upto < head else None
                view, route = read_view(conn, seq, head, base), "overlay"
                if self.worker is not None:
                    self.worker.offer(view)
            overlay = view.overlay(conn, call)
            self._mark.note(conn, head, view)  # until the next commit
        return self._rank(mirror, call, quick, overlay), overlay, route

    def _from_current(self, call: rules.SearchCall, quick: bool) -> Hits | None:
        """Step 1: the mirror alone (with the changes beside it the mark holds), when the
        file is provably unchanged since they matched it; ``None`` when that cannot be
        shown (or, ``quick``, the work is not small)."""
        mirror = self.mirror
        if mirror is None or not mirror.ready or self.db.in_memory:
            return None
        conn = self.db.connection()
        try:
            current = self._mark.check(conn)
        except apsw.Error:
            return None  # the full path reports it
        if current is None:
            return None
        version, head, view = current
        overlay, read = None, False
        if view is not None and mirror.seq != head:  # (read again under the lock)
            read = view.stored is None  # its ids only: the filter's rows from the file,
            try:  # the file shown unchanged below
                overlay = view.overlay(conn if read else None, call)
            except apsw.Error:
                return None
            if overlay is None:
                return None  # a changed chunk's row is needed from the file
        if not mirror.lock.acquire(blocking=not quick):
            return None
        try:
            if not mirror.ready or mirror.published > head:
                return None  # changes committed since the check may be in the rows
            if mirror.seq == head:
                overlay = None  # the mirror holds the file at the head
            elif overlay is None or view.since != mirror.seq or view.upto != head:
                return None
            gathered = self._rank(mirror, call, quick, overlay)
        finally:
            mirror.lock.release()
        if gathered is None:
            return None
        unheld = gathered.unheld()
        if not unheld:
            if read and conn.data_version() != version:
                return None  # the file changed since the check: not the view's snapshot
            hits = mirror_hits(gathered, call.include_embedding, {})
            return hits if overlay is None else overlay_hits(overlay, call, hits)
        try:
            fetched = fetch_rows(conn, unheld, call.include_embedding)  # its own snapshot
        except apsw.Error:
            return None
        if conn.data_version() != version or len(fetched) != len(unheld):
            return None  # the file changed since the check: not the mirror's snapshot
        hits = mirror_hits(gathered, call.include_embedding, fetched)
        return hits if overlay is None else overlay_hits(overlay, call, hits)

    def _rank(
        self,
        mirror: VectorMirror,
        call: rules.SearchCall,
        quick: bool,
        overlay: Overlay | None = None,
    ) -> Gathered | None:
        """Admit the filter's rows, less those of the chunks ``overlay`` holds, and rank
        them (the caller holds the lock); ``None`` in ``quick`` mode when scoring them or
        building the hits would not stay small."""
        mirror.searched = True
        rows = mirror.admitted(call.scope_all, call.scope_any)
        count = mirror.admitted_count(rows)
        if quick and not self._quick_enough(count, call):
            return None
        self._scored.floats = count * self.embedding_dim
        exclude = None
        if overlay is not None:
            exclude = overlay.known(mirror)
            if exclude is None:
                if rows is not None and len(rows) <= KEPT_PER_CHANGED * len(overlay.changed):
                    rows = overlay.kept(mirror, rows)
                else:
                    exclude = overlay.excluded(mirror)
        return mirror.search(rows, call.vector, call.top_k, call.include_embedding, exclude)

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

    def wait_until(self, done: Callable[[VectorMirror], bool], timeout: float) -> bool:
        """Whether ``done(mirror)`` holds within ``timeout`` seconds, looked at each time the
        worker changes the mirror's state (a load, a swap, a drop); tests and benchmarks."""
        if self.mirror is None or self.worker is None:
            return True
        return self.worker.wait_until(done, timeout)
