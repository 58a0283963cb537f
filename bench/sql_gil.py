"""The SQL route beside a busy Python thread: what the GIL costs a search that steps SQLite.

apsw lets go of the GIL for each step of a statement; getting it back while another thread
runs Python can take up to the interpreter's switch interval (5 ms). The mirror's worker is
such a thread during its first load, when every search runs in SQL. This benchmark times
the SQL route (a store with the mirror off) on one thread, first alone (the baseline), then
beside a thread that runs Python without pause, and prints both side by side.

    .venv/bin/python -m bench.sql_gil
"""

from __future__ import annotations

import argparse
import tempfile
import threading
from pathlib import Path

import numpy as np

from bench.memory_data import make_dataset, make_records
from bench.memory_tail import search_ms
from ratatoskr.core.context import CallContext
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store

CASES = ("end_user", "tenant")


def _busy(stop: threading.Event) -> None:
    """Python bytecode without a pause: no I/O, no call that lets go of the GIL."""
    while not stop.is_set():
        table = {i: str(i) for i in range(200)}
        del table


def _time(store: RatatoskrMemoryStore, case: str, dim: int, count: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [search_ms(store, rng, case, dim) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="chunks")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=200, help="timed searches per case")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "memory.db")
        rng = np.random.default_rng(20240607)
        ds = make_dataset(args.n, args.dim, rng)
        store = open_memory_store(path, embedding_dim=args.dim, mirror_bytes=0)
        ctx = CallContext(actor="bench")
        for lo in range(0, args.n, 500):
            batch = make_records(ds, lo, min(args.n, lo + 500), rng)
            store.upsert_many(batch, idempotency_key=f"load-{lo}", ctx=ctx)
        try:
            for case in CASES:
                _time(store, case, args.dim, 20, 1)  # warm the page cache
            alone = {case: _time(store, case, args.dim, args.queries, 2) for case in CASES}
            stop = threading.Event()
            busy = threading.Thread(target=_busy, args=(stop,), daemon=True)
            busy.start()
            try:
                beside = {case: _time(store, case, args.dim, args.queries, 2) for case in CASES}
            finally:
                stop.set()
                busy.join()
        finally:
            store.close()
    print(f"SQL route, {args.n:,} x {args.dim}, {args.queries} searches per case, top_k=10")
    print("| case | alone: p50 / max ms | beside a busy thread: p50 / max ms | ratio of p50 |")
    print("|---|---:|---:|---:|")
    for case in CASES:
        a, b = np.array(alone[case]), np.array(beside[case])
        print(
            f"| one {case} | {np.median(a):.2f} / {a.max():.1f} | "
            f"{np.median(b):.2f} / {b.max():.1f} | {np.median(b) / np.median(a):.1f}x |"
        )


if __name__ == "__main__":
    main()
