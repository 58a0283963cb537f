r"""The tail benchmark alone (``memory_tail.py``), on a copy of a store file an earlier
run kept: two versions of the code can then be timed in turn on the same data, without
the load each time (minutes at 1M chunks). Runs of the same code move with the machine's
load, so compare versions alternated, several runs each.

    .venv/bin/python -m bench.memory_search --n 100000 --queries 5 --sql-path 0 \
        --keep --out /tmp/load.md
    .venv/bin/python -m bench.tail_on_file /tmp/ratatoskr-bench-XXXX/memory.db \
        --dim 768 --seconds 20

The kept file is read once, through SQLite's backup (its WAL included), into a temporary
directory that is removed afterwards; it is never written. A file kept from a ``--tail``
run holds that run's writes: the writer here goes on after them (``tail_written``).
Prints the section that ``make bench`` writes into docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence

import apsw

from bench.memory_tail import copy_file, run_tail, tail_lines, tail_written
from ratatoskr.core.interpreter import settle_for_serving


def chunk_counts(path: str) -> tuple[int, int]:
    """The chunks a store file holds (the writer deletes the loaded ones by their index)
    and of those, the ones earlier runs' writers wrote (a kept ``--tail`` run's file)."""
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        n = int(conn.execute("SELECT count(*) FROM memory_chunks").fetchall()[0][0])
        return n, tail_written(conn)
    finally:
        conn.close()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tail_on_file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", help="a store file kept by bench.memory_search --keep")
    parser.add_argument("--dim", type=int, required=True, help="its embedding dimension")
    parser.add_argument("--seconds", type=float, default=20.0, help="of timed searches")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--budget", type=int, default=None, help="the mirror's byte budget")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.file):
        parser.error(f"no such file: {args.file}")
    if args.dim < 1 or args.seconds <= 0:
        parser.error("--dim must be >= 1 and --seconds > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settle_for_serving()  # as a server's worker does once it has imported the app
    workdir = tempfile.mkdtemp(prefix="ratatoskr-tail-")
    try:
        path = os.path.join(workdir, "memory.db")
        copy_file(args.file, path)
        n, done = chunk_counts(path)
        print(f"copied {n:,} chunks; {args.seconds:g} s of searches while a client writes")
        result = run_tail(path, args.dim, n, args.seconds, args.seed, args.budget, done)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n".join(tail_lines(result, {}, args.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
