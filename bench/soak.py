"""Soak (docs/reliability.md): mixed traffic on both planes against 2 workers for 10 minutes.

Reports throughput, p50/p95/p99 per verb and overall, errors (must be 0), worker RSS at the
start and the end, the largest WAL seen, and the metric files in the multiprocess directory.

``--steady`` first fills a fixed set of ids, then only rewrites them (``soak_steady.py``), so
the files stop growing and worker RSS after the warm-up can show a leak; it reports RSS at
boot, after the fill, after the warm-up and at the end, per minute in between, and the files
and tables at the warm-up and the end.

    .venv/bin/python -m bench.soak                  # 600 s over growing data (make soak)
    .venv/bin/python -m bench.soak --steady         # 600 s over fixed data (make soak-steady)
    .venv/bin/python -m bench.soak --duration 120
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import soak_steady
from bench.reliability_common import (
    MIB,
    Client,
    file_bytes,
    metric_files,
    ms,
    start,
    worker_rss_mib,
)

DIM = 128
TENANTS = [f"t{n}" for n in range(5)]
USERS = [f"u{n}" for n in range(50)]
# verb and weight: reads dominate, as in a conversation turn
MIX = [
    (("memory", "search"), 35),
    (("memory", "upsert_many"), 15),
    (("memory", "get_many"), 10),
    (("affect", "put_many"), 10),
    (("affect", "append_events"), 10),
    (("affect", "list"), 10),
    (("affect", "read_events"), 5),
    (("memory", "health"), 5),
]


def vector_of(rng: random.Random) -> list[float]:
    v = [rng.uniform(-1, 1) for _ in range(DIM)]
    v[0] += 0.01
    return v


class Traffic:
    """One call of the mix at a time, with ids that grow and get rewritten; ``steady``: only
    rewritten (the fixed ids of ``soak_steady``, events from its fixed pool)."""

    def __init__(self, seed: int, steady: bool = False) -> None:
        self.rng = random.Random(seed)
        self.seq = 0
        self.tag = uuid.uuid4().hex[:12]  # idempotency keys never repeat across runs
        self.steady = steady
        self.ids_per_user = soak_steady.IDS_PER_USER if steady else 400

    def vector(self) -> list[float]:
        return vector_of(self.rng)

    def next(self) -> tuple[str, str, dict[str, Any], dict[str, str]]:
        ((plane, verb),) = self.rng.choices([m[0] for m in MIX], [m[1] for m in MIX])
        tenant, user = self.rng.choice(TENANTS), self.rng.choice(USERS)
        scope = {"tenant": tenant}
        self.seq += 1
        ids = [f"{tenant}-{user}-{self.rng.randrange(self.ids_per_user)}" for _ in range(4)]
        ids = list(dict.fromkeys(ids))
        rec_scope = {"tenant": tenant, "end_user": user}
        if verb == "search":
            args: dict[str, Any] = {"vector": self.vector(), "top_k": 10}
            if self.rng.random() < 0.5:
                args["scope_all"] = {"end_user": user}
        elif verb == "upsert_many":
            records: list[dict[str, Any]] = [
                {"id": i, "embedding": self.vector(), "scope": rec_scope, "distillate": "s" * 400}
                for i in ids
            ]
            args = {"records": records, "idempotency_key": f"{self.tag}-{self.seq}"}
        elif verb == "get_many":
            args = {"ids": ids}
        elif verb == "put_many":
            records = [{"id": i, "scope": rec_scope, "mood": self.rng.random()} for i in ids]
            args = {"records": records, "idempotency_key": f"{self.tag}-{self.seq}"}
        elif verb == "append_events" and self.steady:
            picks = {self.rng.randrange(soak_steady.EVENTS_PER_USER) for _ in range(3)}
            events = [soak_steady.event(tenant, user, n) for n in sorted(picks)]
            args = {"events": events, "idempotency_key": f"{self.tag}-{self.seq}"}
        elif verb == "append_events":
            events = [
                {
                    "id": f"e-{self.tag}-{self.seq}-{n}",
                    "scope": rec_scope,
                    "at": datetime.now(UTC).isoformat(),
                    "kind": "turn",
                }
                for n in range(3)
            ]
            args = {"events": events, "idempotency_key": f"{self.tag}-{self.seq}"}
        elif verb in ("list", "read_events"):
            args = {"limit": 20, "scope_all": {"end_user": user}}
        else:
            args = {}
        return plane, verb, args, scope


RECONNECT_EVERY = 200  # calls per connection: new connections spread over the workers


async def drive(
    base: str, until: float, concurrency: int, steady_mode: bool = False
) -> dict[str, Any]:
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()

    async def one(n: int) -> None:
        traffic = Traffic(n, steady_mode)
        client = Client(base, connections=1)
        while time.monotonic() < until:
            if traffic.seq % RECONNECT_EVERY == RECONNECT_EVERY - 1:
                await client.close()
                client = Client(base, connections=1)
            plane, verb, args, scope = traffic.next()
            started = time.perf_counter()
            try:
                response = await client.call(plane, verb, args, scope)
                code = "ok" if response.status_code == 200 else response.json()["error"]["code"]
            except Exception as exc:  # a benchmark counts failures, it does not stop on one
                code = type(exc).__name__
            latencies[f"{plane}.{verb}"].append(time.perf_counter() - started)
            if code != "ok":
                errors[code] += 1
        await client.close()

    await asyncio.gather(*(one(n) for n in range(concurrency)))
    return {"latencies": latencies, "errors": errors}


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="ratatoskr-soak-"))
    server = start(root, DIM, workers=args.workers)
    data = root / "data"
    out: dict[str, Any] = {"steady": args.steady}
    try:
        out["rss_boot_mib"] = worker_rss_mib(server)
        if args.steady:
            filled = time.monotonic()
            out["filled"] = await soak_steady.fill(server.url, TENANTS, USERS, DIM, vector_of)
            out["fill_s"] = time.monotonic() - filled
            out["rss_filled_mib"] = worker_rss_mib(server)
        # warm up (connections, mirror, page cache) before the start figures are taken
        warmup = args.warmup if args.warmup is not None else min(10.0, args.duration / 10)
        await drive(server.url, time.monotonic() + warmup, args.concurrency, args.steady)
        out["warmup_s"] = warmup
        rss_start, metrics_start = worker_rss_mib(server), metric_files(server)
        counts_start = _counts(server)
        if args.steady:
            out["pruned"] = soak_steady.prune_idempotency(data, args.horizon)
            out["data_warm"] = soak_steady.snapshot(data)
        wal_max: dict[str, int] = {"memory": 0, "affect": 0}
        began = time.monotonic()
        end = began + args.duration
        task = asyncio.create_task(drive(server.url, end, args.concurrency, args.steady))
        rss_max = dict(rss_start)
        minutes: list[dict[int, float]] = []
        pruned_at = began
        while not task.done():
            await asyncio.wait({task}, timeout=5)
            for plane in wal_max:
                wal_max[plane] = max(wal_max[plane], file_bytes(data / f"{plane}.db-wal"))
            rss_now = worker_rss_mib(server)
            for pid, rss in rss_now.items():
                rss_max[pid] = max(rss_max.get(pid, 0.0), rss)
            if time.monotonic() - began >= 60 * (len(minutes) + 1):
                minutes.append(rss_now)
            if args.steady and time.monotonic() - pruned_at >= soak_steady.PRUNE_EVERY:
                pruned_at = time.monotonic()
                out["pruned"] += soak_steady.prune_idempotency(data, args.horizon)
        result = task.result()
        rss_end, metrics_end = worker_rss_mib(server), metric_files(server)
        out["counts_end"], out["counts_start"] = _counts(server), counts_start
        sizes = {p: file_bytes(data / f"{p}.db") / MIB for p in ("memory", "affect")}
        if args.steady:
            out["data_end"] = soak_steady.snapshot(data)
    finally:
        server.terminate()
        server.kill()
    every = [x for xs in result["latencies"].values() for x in xs]
    return {
        **out,
        "duration_s": args.duration,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "calls": len(every),
        "throughput_per_s": len(every) / args.duration,
        "p50_ms": ms(every, 50),
        "p95_ms": ms(every, 95),
        "p99_ms": ms(every, 99),
        "per_verb": {
            verb: {"calls": len(xs), "p50_ms": ms(xs, 50), "p99_ms": ms(xs, 99)}
            for verb, xs in sorted(result["latencies"].items())
        },
        "errors": dict(result["errors"]),
        "rss_start_mib": rss_start,
        "rss_end_mib": rss_end,
        "rss_max_mib": rss_max,
        "rss_minutes_mib": minutes,
        "wal_max_mib": {p: v / MIB for p, v in wal_max.items()},
        "db_mib": sizes,
        "metric_files": {"start": metrics_start, "end": metrics_end},
    }


def _counts(server: Any) -> dict[int, dict[str, int]]:
    return {pid: soak_steady.process_counts(pid) for pid in server.worker_pids()}


def report(r: dict[str, Any]) -> str:
    lines = [
        f"soak{' (steady)' if r['steady'] else ''}: {r['duration_s']:.0f} s, {r['workers']} "
        f"workers, {r['concurrency']} concurrent calls: {r['calls']} calls, "
        f"{r['throughput_per_s']:.0f}/s, p50 {r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms, "
        f"p99 {r['p99_ms']:.1f} ms, errors {sum(r['errors'].values())}"
        + (f" {r['errors']}" if r["errors"] else ""),
        "",
        "| verb | calls | p50 ms | p99 ms |",
        "| --- | --- | --- | --- |",
    ]
    for verb, v in r["per_verb"].items():
        lines.append(f"| {verb} | {v['calls']} | {v['p50_ms']:.1f} | {v['p99_ms']:.1f} |")
    lines += ["", *_rss_table(r), ""]
    if r["steady"]:
        lines += _steady_lines(r)
    lines += [
        f"largest WAL: memory {r['wal_max_mib']['memory']:.1f} MiB, affect "
        f"{r['wal_max_mib']['affect']:.1f} MiB; files at the end: memory "
        f"{r['db_mib']['memory']:.1f} MiB, affect {r['db_mib']['affect']:.1f} MiB; metric files "
        f"{r['metric_files']['start']} at the start, {r['metric_files']['end']} at the end",
    ]
    return "\n".join(lines)


def _rss_table(r: dict[str, Any]) -> list[str]:
    pids = sorted(r["rss_start_mib"])
    if not r["steady"]:
        lines = [
            "| worker | RSS start MiB | RSS max MiB | RSS end MiB |",
            "| --- | --- | --- | --- |",
        ]
        for n, pid in enumerate(pids):
            lines.append(
                f"| {n + 1} | {r['rss_start_mib'][pid]:.1f} | {r['rss_max_mib'].get(pid, 0):.1f} "
                f"| {r['rss_end_mib'].get(pid, float('nan')):.1f} |"
            )
        return lines
    lines = [
        "| worker | RSS boot MiB | after fill | after warm-up | max | end | growth after warm-up "
        "| fds warm / end | threads warm / end |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    nan = float("nan")
    for n, pid in enumerate(pids):
        warm, end = r["rss_start_mib"][pid], r["rss_end_mib"].get(pid, nan)
        c0, c1 = r["counts_start"].get(pid, {}), r["counts_end"].get(pid, {})
        lines.append(
            f"| {n + 1} | {r['rss_boot_mib'].get(pid, nan):.1f} "
            f"| {r['rss_filled_mib'].get(pid, nan):.1f} | {warm:.1f} "
            f"| {r['rss_max_mib'].get(pid, nan):.1f} | {end:.1f} | {end - warm:+.1f} "
            f"| {c0.get('fds')} / {c1.get('fds')} | {c0.get('threads')} / {c1.get('threads')} |"
        )
    lines.append("")
    for n, pid in enumerate(pids):
        series = " ".join(f"{m.get(pid, nan):.0f}" for m in r["rss_minutes_mib"])
        lines.append(f"worker {n + 1} RSS per minute (MiB): {series}")
    return lines


def _steady_lines(r: dict[str, Any]) -> list[str]:
    warm, end = r["data_warm"], r["data_end"]
    files = ", ".join(f"{k} {warm['mib'][k]:.1f} -> {end['mib'][k]:.1f}" for k in warm["mib"])
    rows = ", ".join(f"{k} {warm['rows'][k]} -> {end['rows'][k]}" for k in warm["rows"])
    filled = r["filled"]
    return [
        f"fill: {filled['chunks']} chunk writes ({len(TENANTS) * len(USERS)} users x "
        f"{soak_steady.IDS_PER_USER} ids), {filled['states']} states, {filled['events']} events "
        f"in {r['fill_s']:.0f} s; warm-up {r['warmup_s']:.0f} s",
        f"files MiB, warm-up -> end: {files}",
        f"rows, warm-up -> end: {rows}; idempotency entries pruned: {r['pruned']}",
        "",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (600)")
    parser.add_argument("--concurrency", type=int, default=8, help="calls in flight (8)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steady", action="store_true", help="fixed ids after a fill")
    parser.add_argument(
        "--warmup", type=float, help="seconds before the start figures (10; --steady: 120)"
    )
    parser.add_argument(
        "--horizon",
        type=float,
        default=soak_steady.DEFAULT_HORIZON,
        help="--steady: seconds an idempotency entry is kept (60)",
    )
    args = parser.parse_args(argv)
    if args.steady and args.warmup is None:
        args.warmup = 120.0
    result = asyncio.run(soak(args))
    print(report(result))
    errors = sum(result["errors"].values())
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
