"""``upsert_many`` from several processes into one file: what two gunicorn workers can write.

Each writer process builds its own seeded chunks (its own ids), opens the store on the same
file and, once all are ready, writes them in batches of ``--batch`` through
``RatatoskrMemoryStore.upsert_many``. SQLite serialises the writes; the validation, the
digest and the canonical JSON run in each process at once, and each process checkpoints
the WAL on its own thread. Reported: chunks per second
for all writers together (the total over the slowest writer's time).

    .venv/bin/python -m bench.upsert_writers --writers 1
    .venv/bin/python -m bench.upsert_writers --writers 2
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import tempfile
import time
from collections.abc import Sequence
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

import numpy as np

from bench.memory_data import make_dataset, make_records
from ratatoskr.core.context import CallContext
from ratatoskr.memory.store import open_memory_store


def writer(
    path: str, index: int, args: argparse.Namespace, ready: Barrier, out: Queue[float]
) -> None:
    rng = np.random.default_rng(1000 + index)
    data = make_dataset(args.n, args.dim, rng)
    data.ids[:] = [f"w{index}-{i:07d}" for i in range(args.n)]
    batches = [
        make_records(data, lo, min(args.n, lo + args.batch), rng)
        for lo in range(0, args.n, args.batch)
    ]
    # The prebuilt batches (40 at the default size) are moved out of the collector's sight:
    # a server holds one request body at a time, and a full collection walking 15 million
    # list items of batches still to come would be a cost of this bench, not of the store.
    gc.freeze()
    store = open_memory_store(path, embedding_dim=args.dim)
    ctx = CallContext(actor=f"writer-{index}")
    ready.wait()
    start = time.perf_counter()
    for i, batch in enumerate(batches):
        store.upsert_many(batch, idempotency_key=f"w{index}-{i}", ctx=ctx)
    out.put(time.perf_counter() - start)
    store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--n", type=int, default=20_000, help="chunks per writer")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ratatoskr-writers-") as tmp:
        path = os.path.join(tmp, "memory.db")
        open_memory_store(path, embedding_dim=args.dim).close()  # schema made once, up front
        ready = mp.Barrier(args.writers)
        out: Queue[float] = mp.Queue()
        procs = [
            mp.Process(target=writer, args=(path, i, args, ready, out)) for i in range(args.writers)
        ]
        for proc in procs:
            proc.start()
        seconds = [out.get() for _ in procs]
        for proc in procs:
            proc.join()
    total = args.n * args.writers
    print(
        f"{args.writers} writer process(es), {total:,} chunks x {args.dim} in batches of "
        f"{args.batch}: {total / max(seconds):,.0f} chunks/s together"
    )
    return 0 if all(p.exitcode == 0 for p in procs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
