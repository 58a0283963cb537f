"""Disaster recovery, measured: the recovery point of replication and the restore time.

1. The drill of ``tests/reliability/test_replica_drill.py``, ``--drills`` times at each
   ``--sync-ms``: a ``ratatoskr serve`` replicating to a ``file://`` replica takes writes
   from four clients on both planes; server, supervisor and Litestream are SIGKILLed
   together; the data directory goes; ``admin restore``; the server starts again. Reported:
   the acknowledged time lost (how long before the kill the earliest acknowledged write the
   restore lacks was acknowledged: the recovery point), the acknowledged writes lost, and
   the restore's time.
2. ``--chunks`` chunks of ``--dim`` written through the memory store in batches of 1,000
   (as ``admin import`` writes) beside a server whose Litestream replicates them as they
   come; the server stops (Litestream syncs what is left); the data directory goes;
   ``admin restore`` is timed: Litestream's part per file, and the whole command with its
   ``admin check`` (SQLite's ``integrity_check`` over every page).

    .venv/bin/python -m bench.restore_drill            # make bench-restore
    .venv/bin/python -m bench.restore_drill --drills 1 --chunks 10000
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import orjson

from bench.memory_data import make_dataset, make_records
from ratatoskr.core.context import CallContext
from ratatoskr.memory.store import open_memory_store
from ratatoskr.sqlite.database import DatabaseSettings
from ratatoskr.sqlite.replica import read_state
from tests.reliability.replica_drill import (
    AckLog,
    admin,
    found_revisions,
    kill_everything,
    replica_env,
    summary,
    wait_replicated,
)
from tests.server.harness import Server, poll

BATCH = 1000


def drill(root: Path, sync_ms: int, write_for: float) -> dict[str, float]:
    env = replica_env(root / "replica", sync_ms)
    server = Server(root, env=env)
    logs: list[AckLog] = []
    try:
        server.start()
        wait_replicated(root)
        logs = [
            AckLog(server.url, plane, f"{plane[0]}{n}").start()
            for plane in ("memory", "affect")
            for n in range(2)
        ]
        started = time.monotonic()
        poll(lambda: time.monotonic() - started > write_for or None, write_for + 60, "writes")
        killed_at = kill_everything(server)
    finally:
        for log in logs:
            log.stop.set()
        server.kill()
    for log in logs:
        log.join()
    shutil.rmtree(root / "data")
    began = time.perf_counter()
    restored = admin(root, server.env, "restore", "--json")
    restore_s = time.perf_counter() - began
    if restored.returncode != 0:
        raise SystemExit(f"admin restore failed: {restored.stderr}")
    again = Server(root, env=env)
    try:
        found = found_revisions(again.start().url, logs)
    finally:
        again.kill()
    lost = max(log.lost_seconds(found[log.plane], killed_at) for log in logs)
    missing = sum(
        1
        for log in logs
        for _, revs in log.acks
        if any(found[log.plane].get(x, 0) < r for x, r in revs.items() if x not in log.uncertain)
    )
    return {"lost_s": lost, "lost_calls": missing, "restore_s": restore_s, **summary(logs)}


def restore_time(root: Path, chunks: int, dim: int) -> dict[str, float]:
    env = {**replica_env(root / "replica", 2000), "RATATOSKR_MEMORY_EMBEDDING_DIM": str(dim)}
    server = Server(root, env=env)
    try:
        server.start()
        wait_replicated(root)
        memory_db = str(root / "data" / "memory.db")
        store = open_memory_store(
            memory_db, embedding_dim=dim, settings=DatabaseSettings(app_checkpoints=False)
        )
        rng = np.random.default_rng(7)
        data = make_dataset(chunks, dim, rng)
        ctx = CallContext(actor="bench")
        began = time.perf_counter()
        for lo in range(0, chunks, BATCH):
            batch = make_records(data, lo, min(chunks, lo + BATCH), rng)
            store.upsert_many(batch, idempotency_key=f"bench-{lo}", ctx=ctx)
        load_s = time.perf_counter() - began
        store.close()
        written = time.time()

        def caught_up() -> bool | None:
            state = read_state(memory_db)
            return (state is not None and (state.last_sync_at or 0) > written + 1) or None

        poll(caught_up, 600, "the replica to catch up", step=0.5)
        assert server.terminate() == 0
    finally:
        server.kill()
    db_bytes = (root / "data" / "memory.db").stat().st_size
    shutil.rmtree(root / "data")
    began = time.perf_counter()
    restored = admin(root, server.env, "restore", "--json")
    total_s = time.perf_counter() - began
    if restored.returncode != 0:
        raise SystemExit(f"admin restore failed: {restored.stderr}")
    report = orjson.loads(restored.stdout)
    litestream_s = sum(info["seconds"] for info in report["files"].values())
    return {
        "load_s": load_s,
        "db_mib": db_bytes / (1 << 20),
        "replica_mib": sum(f.stat().st_size for f in (root / "replica").rglob("*.ltx")) / (1 << 20),
        "litestream_s": litestream_s,
        "memory_s": report["files"]["memory"]["seconds"],
        "total_s": total_s,
        "check_ok": float(report["check"]["ok"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--drills", type=int, default=5, help="drills per sync interval")
    parser.add_argument("--sync-ms", default="500,2000", help="sync intervals to drill")
    parser.add_argument("--write-for", type=float, default=5.0, help="seconds of writes")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    args = parser.parse_args(argv)
    intervals = [int(x) for x in args.sync_ms.split(",") if x] if args.drills else []
    for sync_ms in intervals:
        runs = []
        for _ in range(args.drills):
            with tempfile.TemporaryDirectory(prefix="ratatoskr-drill-") as tmp:
                runs.append(drill(Path(tmp), sync_ms, args.write_for))
        lost = [r["lost_s"] for r in runs]
        print(
            f"drill, sync interval {sync_ms} ms, {len(runs)} runs: acknowledged time lost "
            f"max {max(lost):.3f} s (runs: {', '.join(f'{x:.3f}' for x in lost)}); "
            f"acknowledged calls lost {', '.join(str(int(r['lost_calls'])) for r in runs)} "
            f"of {', '.join(str(int(r['calls'])) for r in runs)}; admin restore "
            f"{max(r['restore_s'] for r in runs):.2f} s at most",
            flush=True,
        )
    if args.chunks:
        with tempfile.TemporaryDirectory(prefix="ratatoskr-restore-") as tmp:
            r = restore_time(Path(tmp), args.chunks, args.dim)
        print(
            f"restore of {args.chunks:,} chunks x {args.dim} (memory file {r['db_mib']:,.0f} "
            f"MiB, replica {r['replica_mib']:,.0f} MiB, loaded in {r['load_s']:.1f} s): "
            f"litestream restore {r['litestream_s']:.1f} s (memory {r['memory_s']:.1f} s), "
            f"admin restore with its check {r['total_s']:.1f} s, check "
            f"{'passed' if r['check_ok'] else 'FAILED'}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
