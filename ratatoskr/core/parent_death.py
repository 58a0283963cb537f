"""A child process that ends with its parent (Linux ``PR_SET_PDEATHSIG``).

A gunicorn worker whose master is killed outright (the OOM killer, ``kill -9``) would go on
serving alone: its writes acknowledged while the replication the master ran is gone, and its
port held against the next start. Litestream and its supervisor are tied to their parents
the same way.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1

_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent() -> None:
    """SIGTERM this process when the thread that started it ends (a ``preexec_fn``)."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def end_with(parent_pid: int) -> None:
    """Called in a child just forked by ``parent_pid``: SIGTERM it when that parent ends,
    at once if it ended before the link was made (the child is then re-parented)."""
    die_with_parent()
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)
