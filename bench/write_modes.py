"""What FULL costs a write, beside NORMAL: the store's write calls timed in both modes.

Through the store API on real files in a temporary directory (on this machine the same ext4
disk as the project; no HTTP, no jti claim): affect ``put_many`` of one record (p50, p99),
memory ``upsert_many`` of one record (p50, p99), and memory ``upsert_many`` of 500 x 768
(median per batch and chunks/s).
Each mode gets a fresh file; the modes alternate per round so a busy neighbour on the
machine weighs on both alike.

    .venv/bin/python -m bench.write_modes
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.memory_data import make_dataset, make_records
from ratatoskr.affect.store import open_affect_store
from ratatoskr.core.context import CallContext
from ratatoskr.memory.store import open_memory_store
from ratatoskr.sqlite.database import DatabaseSettings

MODES = ("FULL", "NORMAL")
CTX = CallContext(actor="bench")


def timed(call: Callable[[int], Any], n: int) -> list[float]:
    """Milliseconds of each of ``n`` calls ``call(i)``."""
    out = []
    for i in range(n):
        start = time.perf_counter()
        call(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def run_round(tmp: str, mode: str, args: argparse.Namespace, out: dict[str, list[float]]) -> None:
    settings = DatabaseSettings(synchronous=mode)
    tag = f"{mode}-{len(out.get(mode + ' put', []))}"
    affect = open_affect_store(os.path.join(tmp, f"affect-{tag}.db"), settings=settings)
    try:
        out.setdefault(mode + " put", []).extend(
            timed(
                lambda i: affect.put_many(
                    [{"id": f"s{i}", "scope": {"tenant": "acme"}, "mood": "calm", "n": i}],
                    idempotency_key=f"p{i}",
                    ctx=CTX,
                ),
                args.calls,
            )
        )
    finally:
        affect.close()
    rng = np.random.default_rng(7)
    data = make_dataset(args.calls + args.batches * 500, args.dim, rng)
    ones = [make_records(data, i, i + 1, rng) for i in range(args.calls)]
    lo = args.calls
    batches = [
        make_records(data, lo + b * 500, lo + (b + 1) * 500, rng) for b in range(args.batches)
    ]
    memory = open_memory_store(
        os.path.join(tmp, f"memory-{tag}.db"), embedding_dim=args.dim, settings=settings
    )
    try:
        out.setdefault(mode + " upsert1", []).extend(
            timed(
                lambda i: memory.upsert_many(ones[i], idempotency_key=f"u{i}", ctx=CTX), args.calls
            )
        )
        out.setdefault(mode + " upsert500", []).extend(
            timed(
                lambda b: memory.upsert_many(batches[b], idempotency_key=f"b{b}", ctx=CTX),
                args.batches,
            )
        )
    finally:
        memory.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000, help="one-record calls per round")
    parser.add_argument("--batches", type=int, default=20, help="500-record batches per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dim", type=int, default=768)
    args = parser.parse_args(argv)
    out: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="ratatoskr-write-modes-") as tmp:
        for _ in range(args.rounds):
            for mode in MODES:
                run_round(tmp, mode, args, out)
    print("| operation | FULL | NORMAL |")
    print("| --- | --- | --- |")
    rows = [
        ("affect `put_many`, one record, p50", "put", 50),
        ("affect `put_many`, one record, p99", "put", 99),
        ("memory `upsert_many`, one record, p50", "upsert1", 50),
        ("memory `upsert_many`, one record, p99", "upsert1", 99),
        (f"memory `upsert_many`, 500 x {args.dim}, median", "upsert500", 50),
    ]
    for label, kind, q in rows:
        cells = [f"{percentile(out[f'{m} {kind}'], q):.2f} ms" for m in MODES]
        print(f"| {label} | {' | '.join(cells)} |")
    rates = [f"{500 / percentile(out[f'{m} upsert500'], 50) * 1000:,.0f}" for m in MODES]
    print(
        f"| memory `upsert_many`, 500 x {args.dim}, chunks/s (median batch) | {' | '.join(rates)} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
