"""The mirror worker: one thread per store that builds, follows and regroups its mirror, so
no search ever waits for that work.

- **load**: as soon as the store opens, the worker loads the mirror from the file
  (``build.load``), applies the log written meanwhile and only then marks it ``ready``;
  until then every search runs exact SQL. A log it cannot follow (pruned past the mirror,
  or gone backwards: a restored file) drops the mirror and loads it again the same way.
- **follow**: every ``POLL_SECONDS``, or at once when a search finds the log far ahead of
  the mirror (``poke``), it reads the new entries and brings them in (``changes.py``),
  in steps of ``STEP_ROWS`` rows (read, prepared, then published under the lock), and
  before each step it lets the searches under way return (``in_flight.py``); meanwhile searches
  answer with the changes beside the mirror (``overlay.py``), taking them from the
  worker's own read (``ahead``) when it read them at the log's head.
  A process no search has asked of for ``FOLLOW_IDLE_SECONDS`` does not follow: a writer
  that never searches pays nothing for the mirror, and the first search after its writes
  answers beside the mirror (or in SQL, a long burst later) while the worker catches up.
- **follow on a search's thread**: a long search (a whole tenant at a million rows), its
  hits computed, brings the log in itself (``follow_here``), unless the worker is changing
  the mirror just then: between two searches of that thread, rather than beside the next
  short one, taking its core, the GIL or the lock. For ``DEFER_SECONDS`` after one did,
  the worker leaves the log to them (unless a search finds it far ahead: ``poke``).
- **touch ahead**: after each follow it writes the places just past the rows, so the first
  write to those pages is not a follow's (``touch_ahead.py``).
- **regroup**: when the unsorted tail or the dead rows pass their share, and the mirror is
  being searched, it notes the live rows (``build.plan``), then builds a sorted copy
  beside the live mirror (``build.regrouped``), in the arrays the last regroup replaced
  or the load made room in, while the live mirror goes on following the log; it brings
  the copy up to the log and swaps it in under the lock. The copy counts against the
  budget: when the live mirror and the copy do not both fit, it regroups in place, in
  steps of a bounded pause (``inplace.py``).

Its thread's CPU time is kept by phase (``work_clock.py``): what each part of this work
costs the searches on a busy machine (a search's follow keeps its own: ``here_by_phase``).
Only one thread changes the mirror at a time (``_changing``): the worker, for a cycle
(but while a regroup builds beside it), or a search following the log. Whatever fails
(the file replaced or unreadable, memory) leaves the live mirror as it was, serving; the
worker tries again after ``RETRY_SECONDS``. ``stop`` ends it within one step, a load included.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import apsw

from ratatoskr.memory.search import build, changes, inplace
from ratatoskr.memory.search.build import Behind
from ratatoskr.memory.search.holds import Stopped, reach
from ratatoskr.memory.search.in_flight import InFlight
from ratatoskr.memory.search.mirror import Changed, VectorMirror
from ratatoskr.memory.search.overlay import ChangeView
from ratatoskr.memory.search.touch_ahead import TouchAhead
from ratatoskr.memory.search.work_clock import WorkClock, thread_cpu_seconds
from ratatoskr.sqlite.database import Database

POLL_SECONDS = 0.02  # how often an idle worker looks at the change log
RETRY_SECONDS = 0.5  # after a failure
FOLLOW_ENTRIES = 4096  # change-log entries read per step
STEP_ROWS = 128  # rows read, prepared or published per step of a follow (~0.3 ms each)
QUIET_WAIT_SECONDS = 0.002  # the longest a step of a follow or a regroup waits for searches
QUIET_POLL_SECONDS = 0.0001  # how often it looks meanwhile
PAUSE_FOLLOW_SECONDS = 0.002  # a build step follows the log at most this often
SWAP_BACKLOG = 256  # entries the log may be ahead of a copy when the worker swaps it in
FOLLOW_HERE_ENTRIES = 512  # read per follow on a search's thread: about one writer's commit
DEFER_SECONDS = 0.1  # after a long search followed the log itself, the worker leaves it to them
FOLLOW_IDLE_SECONDS = 5.0  # a mirror no search asked of for this long is not followed
STOP_SECONDS = 10.0  # ``stop`` waits this long for the thread

logger = logging.getLogger("ratatoskr.memory")


class MirrorWorker:
    """The thread that keeps one store's mirror (see the module's docstring)."""

    def __init__(self, db: Database, mirror: VectorMirror, in_flight: InFlight) -> None:
        self.db = db
        self.mirror = mirror
        self._in_flight = in_flight  # the searches it steps aside for
        self.failures = 0  # steps that failed (and were tried again)
        self.max_pause = 0.0  # the longest hold of the lock by a step, seconds
        self.max_inplace_pause = 0.0  # the longest of them by a step of an in-place regroup
        self._work = WorkClock()  # its thread's CPU time by phase (``cpu_by_phase``)
        self._here_work = WorkClock()  # the same, of the follows on searches' threads
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._conn: apsw.Connection | None = None
        self._budget_head: int | None = None  # log head when the mirror last did not fit
        # the rows the last regroup beside the mirror replaced: the next one builds its
        # copy in their arrays (kept while a copy fits the budget: ``build._room``)
        self._spare: VectorMirror | None = None
        self._scratch = changes.Scratch()  # the vectors of the batch being brought in
        self._copy_scratch = changes.Scratch()  # the same, into a copy (the live one follows)
        self._touched = TouchAhead()  # the places past the rows written before a follow
        self._failing = False
        self._followed_at = 0.0
        # held by whoever changes the mirror: the worker for a whole cycle, or a long
        # search's thread following the log (``follow_here``), never both at once
        self._changing = threading.Lock()
        self._here_at = float("-inf")  # when a search's thread last followed the log
        self._poked = False
        self._asked_at = float("-inf")  # the last search on this store (``asked``)
        self._changed = threading.Condition()  # notified when the mirror's state changes
        # the changes past the mirror's seq as last read at the log's head, by this worker
        # (to apply them) or a search (``offer``): the searches at that head take their
        # overlay from it (set under the mirror's lock)
        self.ahead: ChangeView | None = None
        self._thread = threading.Thread(target=self._run, name="ratatoskr-mirror", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cpu_seconds(self) -> float | None:
        """The CPU time the worker's thread has used so far (what its work takes from the
        searches on a busy machine); ``None`` when it is not running."""
        return thread_cpu_seconds(self._thread)

    def cpu_by_phase(self) -> dict[str, float]:
        """The CPU seconds its thread has spent so far by phase: ``load``, ``follow: read``,
        ``follow: prepare``, ``follow: place``, ``regroup: build`` (or ``in place``),
        ``regroup: catch up``, ``regroup: release``, ``waiting`` and ``other``."""
        return self._work.seconds()

    def here_by_phase(self) -> dict[str, float]:
        """The CPU seconds the follows on long searches' threads (``follow_here``) have
        spent so far, by phase: work the worker's thread did not do."""
        return self._here_work.seconds()

    def asked(self) -> None:
        """A search ran on this store: keep following its writes."""
        self._asked_at = time.monotonic()

    def poke(self) -> None:
        """A search found the log ahead of the mirror: follow it now."""
        self._asked_at = time.monotonic()
        self._poked = True
        self._wake.set()

    def offer(self, view: ChangeView) -> None:
        """A search read the changes past the mirror at a head the worker has not read:
        the searches after it at that head take them as they are (under the lock)."""
        ahead = self.ahead
        if ahead is None or (ahead.since, ahead.upto) != (view.since, view.upto):
            self.ahead = view

    def follow_here(self) -> bool:
        """On a long search's thread, its hits computed: bring the log's next entries (up
        to ``FOLLOW_HERE_ENTRIES``) into the mirror now, unless the worker is changing it.
        Whether it followed; a failure is left to the worker, which meets it again."""
        mirror = self.mirror
        if not mirror.ready or self._stopping.is_set():
            return False
        if not self._changing.acquire(blocking=False):
            return False
        try:
            if not mirror.ready:
                return False
            self._follow(here=True)
        except Exception:  # noqa: BLE001 - the worker, not held back, meets it and reports it
            return False
        else:
            self._here_at = time.monotonic()
            return True
        finally:
            self._changing.release()

    def wait_until(self, done: Callable[[VectorMirror], bool], timeout: float) -> bool:
        """Whether ``done(mirror)`` holds within ``timeout`` seconds (looked at after each
        change of state: a load, a swap, a drop, a failure)."""
        with self._changed:
            return self._changed.wait_for(lambda: done(self.mirror), timeout)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def stop(self) -> None:
        """End the thread (within one step; a statement under way is interrupted)."""
        self._stopping.set()
        self._wake.set()
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(apsw.Error):
                conn.interrupt()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(STOP_SECONDS)

    # -- the loop ----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                if self._conn is None and not self.db.in_memory:
                    self._conn = self.db.connection()
                with self._work.phase("other"):
                    self._cycle()
            except Stopped:
                return
            except Exception as exc:  # the live mirror stays as it was, serving
                if self._stopping.is_set():
                    return
                self.failures += 1
                if not self._failing:  # once per spell: the reason, never a path or content
                    logger.warning("search mirror: %s; trying again", type(exc).__name__)
                self._failing = True
                self._notify()
                self._stopping.wait(RETRY_SECONDS)
                continue
            if self._failing:
                logger.info("search mirror: working again")
                self._failing = False
            self._wake.wait(POLL_SECONDS)

    def _cycle(self) -> None:
        with self._changing:
            self._changes()

    def _changes(self) -> None:
        mirror = self.mirror
        if not mirror.ready:
            self._load()
            return
        now = time.monotonic()
        if now - self._asked_at > FOLLOW_IDLE_SECONDS:
            return  # nobody searches here now: the next search (``asked``) resumes it
        poked, self._poked = self._poked, False
        if poked or not self._deferred(now):
            try:
                self._follow()
            except Behind:
                self._drop()
                return
        self._touched.run(mirror, self._quiet, self._work)
        if mirror.used_bytes() > mirror.max_bytes:
            self._drop(over_budget=True)
            return
        if mirror.searched and mirror.needs_regroup():
            self._regroup()

    def _at(self, point: str) -> None:
        """A test's hold point: only the worker's own thread stops there (a search
        following the log passes the same code)."""
        if threading.current_thread() is self._thread:
            reach(point, self, self._stopping)

    def _deferred(self, now: float) -> bool:
        """Whether a long search followed the log lately: the worker leaves it to them."""
        return now - self._here_at < DEFER_SECONDS

    def _yield(self) -> None:
        """Between two steps: end if the store closes, and let other threads run."""
        if self._stopping.is_set():
            raise Stopped
        with self._work.phase("waiting"):
            time.sleep(0)  # releases the GIL: a search waiting for it runs now

    def _quiet(self) -> None:
        """Before a step of a follow or a regroup: let the searches under way return first,
        for at most ``QUIET_WAIT_SECONDS`` from now or from when they began (``in_flight.py``).
        A load does not wait: the searches meanwhile run in SQL, far longer than its steps."""
        in_flight = self._in_flight
        if in_flight.idle:
            return
        with self._work.phase("waiting"):
            deadline = time.monotonic() + QUIET_WAIT_SECONDS
            while not in_flight.idle and time.monotonic() < min(
                deadline, in_flight.since + QUIET_WAIT_SECONDS
            ):
                if self._stopping.is_set():
                    raise Stopped
                time.sleep(QUIET_POLL_SECONDS)

    def _pause(self) -> None:
        """Between two steps of an in-place regroup (which holds the mirror): as between
        two of a build, a long search may follow the log meanwhile (``follow_here``)."""
        with self._beside():
            self._step_aside()

    # -- load --------------------------------------------------------------------------

    def _load(self) -> None:
        mirror = self.mirror
        head = self._budget_head if mirror.over_budget else None
        if head is not None and self._log_head() == head:
            return  # nothing changed since it did not fit
        self._at("load-started")
        with self._work.phase("load"):
            fresh = build.load(self.db, mirror.dim, mirror.max_bytes, self._yield, self._at)
        if fresh is None:
            self._budget_head = self._log_head()
            mirror.over_budget = True
            self._notify()
            return
        self._at("load-scanned")
        with self._work.phase("load"):
            if fresh.used_bytes() + build.copy_bytes(fresh) <= mirror.max_bytes:
                self._spare = build.spare_for(fresh, self._yield)  # a first regroup's copy
            self._catch_up(fresh, self._yield)
        if fresh.used_bytes() > mirror.max_bytes:
            mirror.over_budget = True
            self._notify()
            return
        with mirror.lock:
            old = self._swap(fresh)
            mirror.over_budget = False
            mirror.reloads += 1
            mirror.ready = True
        del old
        self._notify()

    def _log_head(self) -> int:
        with self.db.read() as conn:
            head = conn.execute("SELECT coalesce(max(seq), 0) FROM memory_changes")
            return int(head.fetchall()[0][0])

    def _drop(self, over_budget: bool = False) -> None:
        """Stop serving from the mirror (searches go to SQL) and free it; the next cycle
        loads it again."""
        mirror = self.mirror
        with mirror.lock:
            mirror.ready = False
            old = mirror.adopt(VectorMirror(mirror.dim, mirror.max_bytes))
        mirror.over_budget = over_budget
        self._budget_head = None
        self._spare = None
        del old
        self._notify()

    # -- follow ------------------------------------------------------------------------

    def _follow(self, here: bool = False) -> None:
        """Apply the log to the live mirror up to its head, a lock hold per few rows;
        ``here``: on a search's thread (``follow_here``), one read of the log, without
        stepping aside for searches."""
        mirror = self.mirror
        quiet, work = self._manner(here)
        self._at("follow")
        while True:
            self._followed_at = time.monotonic()
            quiet()
            with work.phase("follow: read"), self.db.read() as conn:
                limit = FOLLOW_HERE_ENTRIES if here else FOLLOW_ENTRIES
                head, upto, found, gone = build.read_changes(
                    conn, mirror.seq, limit, quiet, STEP_ROWS
                )
            if upto == mirror.seq:
                return
            if upto == head:
                changed = {r[0] for r in found}
                changed.update(gone)
                with mirror.lock:
                    self.ahead = ChangeView.of(mirror.seq, upto, changed, found)
            self._apply(found, gone, upto, quiet, work)
            self._notify()
            if upto == head or here:
                return
            self._yield()

    def _manner(self, here: bool) -> tuple[Callable[[], None], WorkClock]:
        """How a follow steps aside before each step, and the clock its CPU time goes to:
        on a search's thread (``here``) it steps aside for no one, on its own clock."""
        return (lambda: None, self._here_work) if here else (self._quiet, self._work)

    def _apply(
        self,
        found: list[Changed],
        gone: list[str],
        upto: int,
        quiet: Callable[[], None],
        work: WorkClock,
    ) -> None:
        """Bring the rows read into the live mirror, ``STEP_ROWS`` at a time, prepared
        outside the lock and published under it (each step after ``quiet``, on ``work``'s
        clock: ``_manner``); the last step moves its ``seq`` to ``upto``."""
        mirror = self.mirror
        steps = max(1, -(-max(len(found), len(gone)) // STEP_ROWS))
        for step in range(steps):
            lo, hi = step * STEP_ROWS, (step + 1) * STEP_ROWS
            last = step == steps - 1
            quiet()
            with work.phase("follow: prepare"):
                prepared = changes.prepare(mirror, found[lo:hi], self._scratch)
            quiet()
            with work.phase("follow: place"):
                changes.place(mirror, prepared, gone[lo:hi], self._publishing(upto, last))

    @contextmanager
    def _publishing(self, upto: int, last: bool) -> Iterator[None]:
        """The lock hold that publishes a part of a batch; the last one moves the mirror's
        ``seq`` to ``upto`` (the changes ``ahead`` are then in it)."""
        self._at("follow-staged")
        mirror = self.mirror
        with mirror.lock:
            started = time.perf_counter()
            mirror.published = max(mirror.published, upto)
            yield
            if last:
                mirror.seq = upto
                self.ahead = None
            self._note_pause(started)

    def _note_pause(self, started: float) -> None:
        self.max_pause = max(self.max_pause, time.perf_counter() - started)

    def _catch_up(self, copy: VectorMirror, pause: build.Pause) -> None:
        """Apply the log to ``copy`` (not serving: no lock) until it is nearly current."""
        build.catch_up(self.db, copy, pause, self._copy_scratch, FOLLOW_ENTRIES, SWAP_BACKLOG)

    def _swap(self, copy: VectorMirror) -> VectorMirror:
        """Under the live mirror's lock: swap in ``copy``, caught up with the log as
        ``_catch_up`` last read it (the entries committed since are read beside it by the
        searches, and followed right after); the rows it replaced are returned, to be freed
        once the lock is released."""
        started = time.perf_counter()
        old = self.mirror.adopt(copy)
        self._note_pause(started)
        return old

    # -- regroup -----------------------------------------------------------------------

    def _regroup(self) -> None:
        mirror = self.mirror
        if mirror.used_bytes() + build.copy_bytes(mirror) > mirror.max_bytes:
            self._spare = None  # no room for a copy: none is kept either
            with self._work.phase("regroup: in place"):
                inplace.regroup(mirror, self._pause, self._locked_step)
            mirror.regroups += 1
            mirror.searched = False
            self._notify()
            return
        spare, self._spare = self._spare, None
        with self._work.phase("regroup: build"):
            planned = build.plan(mirror, self._yield)  # nothing follows the log meanwhile
            with self._beside():  # the copy is built while the live mirror follows the log
                copy = build.regrouped(mirror, planned, self._step_aside, spare)
                del spare, planned
                self._at("regroup-built")
                with self._work.phase("regroup: catch up"):
                    self._catch_up(copy, self._step_aside)
        with self._work.phase("regroup: catch up"):
            self._catch_up(copy, self._yield)  # the last entries, the live mirror still
        with mirror.lock:
            old = self._swap(copy)
            self._spare = old  # the next regroup builds its copy in its arrays
            mirror.regroups += 1
            mirror.searched = False
        del copy
        self._notify()
        with self._work.phase("regroup: release"), self._beside():
            build.release(old, self._step_aside)
        self._at("regroup-released")

    @contextmanager
    def _beside(self) -> Iterator[None]:
        """While a regroup builds its copy and catches it up, the live mirror is not the
        worker's: a long search's thread follows the log into it (``follow_here``), or the
        worker between two steps (``_step_aside``); taken back for the swap."""
        self._changing.release()
        try:
            yield
        finally:
            self._changing.acquire()

    def _step_aside(self) -> None:
        """Between two steps of a regroup's build: let the searches under way return, keep
        the live mirror current when no long search did lately, and write its next places
        (``touch_ahead.py``: a long search's follow writes there too)."""
        self._at("regroup-pause")
        self._yield()
        self._quiet()
        with self._work.phase("waiting"):  # a long search's follow runs alone till done
            self._changing.acquire()
        try:
            now = time.monotonic()
            followed = now - self._followed_at < PAUSE_FOLLOW_SECONDS or self._deferred(now)
            if self.mirror.ready and not followed:
                self._follow()
            self._touched.run(self.mirror, self._quiet, self._work, steps=1)
        finally:
            self._changing.release()

    @contextmanager
    def _locked_step(self) -> Iterator[None]:
        """One step of an in-place regroup: under the lock, its pause measured."""
        self._at("inplace-step")
        with self.mirror.lock:
            started = time.perf_counter()
            yield
            self._note_pause(started)
            held = time.perf_counter() - started
            self.max_inplace_pause = max(self.max_inplace_pause, held)
