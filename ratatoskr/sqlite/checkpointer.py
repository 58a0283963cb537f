"""WAL checkpoints on a thread of their own, so a commit only appends to the WAL.

SQLite's automatic checkpoint runs inside the commit that crosses the threshold: that
commit copies the whole WAL (64 MB at 1,000 pages of 64 KiB) back into the database file
and waits for two fsyncs, so under bulk writes every few batches one stalls for several
times its own length, and the copy adds to every batch's average. Here the commit's WAL hook
only wakes this thread, which runs a PASSIVE checkpoint on its own connection (SQLite
releases the GIL while it copies and syncs), on the other core.

Nothing about durability changes: a commit is in the WAL either way, and a checkpoint is
the same operation whichever thread runs it. If the thread falls behind (a reader holding an
old snapshot, a slow disk), the WAL grows, and a commit that finds it past
``inline_pages`` checkpoints in line as SQLite would have, so the WAL stays bounded.

One thread per open ``Database`` and process, started by the first commit that needs it (so
a gunicorn worker forked from a master that opened the file starts its own).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

import apsw

WAKE_PAGES = 1000  # SQLite's default wal_autocheckpoint
INLINE_PAGES = 8 * WAKE_PAGES


class Checkpointer:
    """Wakes on ``on_commit`` past ``wake_pages`` WAL frames and checkpoints the file."""

    def __init__(
        self,
        connect: Callable[[], apsw.Connection],
        wake_pages: int = WAKE_PAGES,
        inline_pages: int = INLINE_PAGES,
    ) -> None:
        self._connect = connect
        self.wake_pages = wake_pages
        self.inline_pages = inline_pages
        self._changed = threading.Condition()
        self._asked = 0  # checkpoints commits have asked for
        self._done = 0  # of those, how many a finished checkpoint covered
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        self.runs = 0  # checkpoints this process's thread has run
        self.inline_runs = 0  # checkpoints a commit ran itself, the thread being behind

    def on_commit(self, conn: apsw.Connection, name: str, pages: int) -> int:
        """The WAL hook (``Connection.set_wal_hook``): SQLite calls it after each commit."""
        if pages >= self.inline_pages:
            self.inline_runs += 1
            with contextlib.suppress(apsw.Error):
                conn.wal_checkpoint(name, apsw.SQLITE_CHECKPOINT_PASSIVE)
        elif pages >= self.wake_pages:
            with self._changed:
                if self._stopping:
                    return int(apsw.SQLITE_OK)
                if self._thread is None or self._pid != os.getpid():
                    self._pid = os.getpid()
                    self._thread = threading.Thread(
                        target=self._run, name="ratatoskr-checkpoint", daemon=True
                    )
                    self._thread.start()
                self._asked += 1
                self._changed.notify_all()
        return int(apsw.SQLITE_OK)

    def _run(self) -> None:
        conn = None
        try:
            while True:
                with self._changed:
                    self._changed.wait_for(lambda: self._stopping or self._done < self._asked)
                    if self._stopping:
                        return
                    covered = self._asked  # a checkpoint now covers every commit so far
                try:
                    if conn is None:
                        conn = self._connect()
                    conn.wal_checkpoint("main", apsw.SQLITE_CHECKPOINT_PASSIVE)
                    self.runs += 1
                except apsw.Error:
                    # a busy or failing file: the next commit asks again, and past
                    # inline_pages the commit checkpoints itself
                    pass
                with self._changed:
                    self._done = covered
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._done = self._asked
                self._changed.notify_all()
            if conn is not None:
                with contextlib.suppress(apsw.Error):
                    conn.close()

    @property
    def thread(self) -> threading.Thread | None:
        """This process's checkpoint thread, once a commit has started it."""
        return self._thread if self._pid == os.getpid() else None

    def drain(self, timeout: float) -> bool:
        """Wait until every checkpoint asked for has run; False if ``timeout`` passed."""
        with self._changed:
            return self._changed.wait_for(lambda: self._done >= self._asked, timeout)

    def stop(self) -> None:
        """End the thread (after the checkpoint it may be running) and close its connection."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
            thread = self._thread if self._pid == os.getpid() else None
        if thread is not None:
            thread.join(timeout=30)
