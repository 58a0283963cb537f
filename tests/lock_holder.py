"""Another process holding a SQLite file's write lock, for as long as the test says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# holds BEGIN IMMEDIATE from "locked" until a line (or EOF) on stdin, then says "released"
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
print("released", flush=True)
sys.stdin.read()
"""


def holding_the_lock(path: Path | str) -> subprocess.Popen[bytes]:
    """A started holder that has the lock (its stdin and stdout are pipes)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
    return holder
