"""Is the database file on disk still the one the store opened, and still SQLite?

SQLite keeps serving from its page cache and open descriptors when the file under it is
deleted, replaced or overwritten, so a store's own health query can answer ``ok`` over a
file that will not survive a restart. This looks at the path itself: present, a regular
file, readable, the same inode as at open, the SQLite header. Reasons never hold the path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True)
class FileIdentity:
    """The file a store opened: its path and inode at open time."""

    path: str
    device: int
    inode: int

    @classmethod
    def of(cls, path: str) -> FileIdentity:
        st = os.stat(path)
        return cls(path, st.st_dev, st.st_ino)

    def problem(self) -> str | None:
        """Why the file is no longer the database that is being served, or None."""
        try:
            st = os.stat(self.path)
        except OSError:
            return "database file is missing"
        if (st.st_dev, st.st_ino) != (self.device, self.inode):
            return "database file was replaced while serving"
        try:
            with open(self.path, "rb") as handle:
                header = handle.read(len(SQLITE_HEADER))
        except OSError:
            return "database file cannot be read"
        if header != SQLITE_HEADER:
            return "database file is not a SQLite database"
        return None
