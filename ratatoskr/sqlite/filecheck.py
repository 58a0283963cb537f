"""Is the database file on disk still the one the store opened, and still SQLite?

SQLite keeps serving from its page cache and open descriptors when the file under it is
deleted, replaced or overwritten, so a store's own health query can answer ``ok`` over a
file that will not survive a restart. This looks at the path itself: present, a regular
file, readable, the same inode as at open, the SQLite header. Reasons never hold the path.

The header is read through one descriptor kept open for the identity's whole life, never
through a fresh ``open``/``close``: closing *any* descriptor of a file drops every POSIX lock
the process holds on it, SQLite's included. Without its shared lock on the database file, the
next connection another process closes (a second worker, ``ratatoskr admin``) believes it is
the last one, checkpoints and deletes the WAL under the live connections, whose later
commits then go to an unlinked file and are lost.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field

SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True)
class FileIdentity:
    """The file a store opened: its path and inode at open time, and a descriptor of it that
    is closed only when the identity is collected (after the store's connections)."""

    path: str
    device: int
    inode: int
    fd: int = field(default=-1, repr=False, compare=False)

    @classmethod
    def of(cls, path: str) -> FileIdentity:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        identity = cls(path, st.st_dev, st.st_ino, fd)
        weakref.finalize(identity, os.close, fd)
        return identity

    def problem(self) -> str | None:
        """Why the file is no longer the database that is being served, or None."""
        try:
            st = os.stat(self.path)
        except OSError:
            return "database file is missing"
        if (st.st_dev, st.st_ino) != (self.device, self.inode):
            return "database file was replaced while serving"
        if not os.access(self.path, os.R_OK):
            return "database file cannot be read"
        try:
            header = os.pread(self.fd, len(SQLITE_HEADER), 0)
        except OSError:
            return "database file cannot be read"
        if header != SQLITE_HEADER:
            return "database file is not a SQLite database"
        return None
