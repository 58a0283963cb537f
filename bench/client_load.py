"""The client and the HTTP path, against ``python -m ratatoskr serve`` from another process.

Starts the real server (gunicorn, ``--workers``) over a temporary directory and measures, in
one run:

1. ``upsert_many`` of ``--chunks`` chunks in batches of ``--batch`` x ``--dim`` through
   ``Client`` (one caller, float32 numpy vectors): chunks/s end to end, and each batch's
   server time from the server's own call log (``duration_ms`` of its ``bifrost.call`` line);
2. each batch again in this process right after it was sent: the body's ``orjson.loads``
   and SHA-256 (the decode and hash of a plain JSON server) and the store's own
   ``upsert_many`` on a file of its own, so the server time is set beside ``decode + hash +
   store`` and beside the store alone; and the steps of the server's path one by one (its
   decode, its argument checks on the packed vectors, the write);
3. scoped searches (one ``end_user`` of 1,000: 100 rows of 100,000): the p50 through
   ``Client`` at concurrency 1 beside ``bench.http_load``'s raw-socket round trip, and
   searches/s through ``AsyncClient`` at ``--concurrency`` beside the raw sockets at the
   same concurrency. ``--rounds`` rounds, raw sockets first in one, the clients in the next.

    .venv/bin/python -m bench.client_load            # make bench-client
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.http_load import free_port, run_load, search_requests
from ratatoskr.client import AsyncClient, Client
from ratatoskr.client.encoding import batch_args, envelope
from ratatoskr.core.context import CallContext
from ratatoskr.memory import rules
from ratatoskr.memory.body import split_upsert
from ratatoskr.memory.store import open_memory_store
from ratatoskr.wire.plane import decode_split

TENANTS = 10
USERS = 1000


def batch_records(index: int, size: int, dim: int) -> tuple[str, list[dict[str, Any]]]:
    """Batch ``index``: its tenant and its records, the same every time it is asked for.
    Chunk ``i`` lies in tenant ``i % 10`` and end_user ``i % 1000``, as in bench.http_load."""
    rng = np.random.default_rng(index)
    tenant = index % TENANTS
    first = (index // TENANTS) * size
    vectors = rng.standard_normal((size, dim)).astype(np.float32)
    records = []
    for j in range(size):
        i = tenant + TENANTS * (first + j)
        records.append(
            {
                "id": f"c{i}",
                "embedding": vectors[j],
                "scope": {"tenant": f"t{tenant}", "end_user": f"u{i % USERS}"},
                "distillate": f"chunk {i}",
            }
        )
    return f"t{tenant}", records


def as_lists(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "embedding": r["embedding"].tolist()} for r in records]


def start_server(port: int, args: argparse.Namespace, data: str, key: str, log: Path) -> Any:
    env = {
        **os.environ,
        "RATATOSKR_MEMORY_DB": os.path.join(data, "memory.db"),
        "RATATOSKR_AFFECT_DB": os.path.join(data, "affect.db"),
        "RATATOSKR_MEMORY_EMBEDDING_DIM": str(args.dim),
        "RATATOSKR_HEIMDALL_KEY": key,
        "RATATOSKR_LOG_LEVEL": "info",
    }
    cmd = [sys.executable, "-m", "ratatoskr", "serve", "--port", str(port)]
    with open(log, "wb") as out:
        return subprocess.Popen(
            [*cmd, "--workers", str(args.workers)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_ready(url: str, deadline: float) -> None:
    import httpx

    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the server did not become ready")


def server_times(log: Path, prefix: str) -> dict[str, float]:
    """Request id to ``duration_ms`` of the server's call lines for our upserts."""
    times = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and prefix in line:
            entry = orjson.loads(line)
            if entry.get("event") == "bifrost.call" and entry.get("outcome") == "ok":
                times[entry["request_id"]] = float(entry["duration_ms"])
    return times


# -- 1 and 2. each batch over HTTP, then in this process -----------------------------------


def upserts(
    client: Client, args: argparse.Namespace, data: str
) -> tuple[float, list[str], dict[str, list[float]]]:
    """Every batch through the client as its tenant, then at once the same batch here (so
    both see the machine as it is at that moment): the plain JSON decode and the hash of its
    body, the store's own upsert_many of its lists, and the server's steps (its decode, its
    checks, its write) on files of their own. Client chunks/s, the request ids, the times."""
    clients = {f"t{t}": client.with_scope({"tenant": f"t{t}"}) for t in range(TENANTS)}
    own = open_memory_store(os.path.join(data, "own.db"), embedding_dim=args.dim)
    steps = open_memory_store(os.path.join(data, "steps.db"), embedding_dim=args.dim)
    times: dict[str, list[float]] = {
        k: [] for k in ("loads", "sha256", "store", "decode_packed", "check_packed", "write")
    }
    ids = []
    spent = 0.0
    for index in range(args.chunks // args.batch):
        tenant, records = batch_records(index, args.batch, args.dim)
        request_id = f"bench-upsert-{index}"
        started = time.perf_counter()
        wire_args = batch_args(records, f"load-{index}", None, None)
        clients[tenant].call("memory", "upsert_many", wire_args, request_id=request_id)
        spent += time.perf_counter() - started
        ids.append(request_id)
        ctx = CallContext(actor="bench", scope={"tenant": tenant})
        body = envelope("upsert_many", batch_args(records, f"own-{index}", None, None))
        lists = as_lists(records)
        del records, wire_args
        gc.collect()
        timed(times["sha256"], lambda body=body: hashlib.sha256(body).hexdigest())
        timed(times["loads"], lambda body=body: orjson.loads(body))
        timed(
            times["store"],
            lambda lists=lists, index=index, ctx=ctx: own.upsert_many(
                lists, idempotency_key=f"own-{index}", ctx=ctx
            ),
        )
        decoded = timed(times["decode_packed"], lambda body=body: decode_split(body, split_upsert))
        a = decoded["args"]

        def check(a: dict[str, Any] = a, ctx: CallContext = ctx) -> rules.UpsertCall:
            call = rules.parse_upsert(a["records"], a["idempotency_key"], None, None, args.dim)
            rules.confine_writes(call.chunks, ctx.scope)
            return call

        call = timed(times["check_packed"], check)
        timed(times["write"], lambda call=call, ctx=ctx: steps.upsert_parsed(call, ctx))
    own.close()
    steps.close()
    return args.chunks / spent, ids, times


def timed(into: list[float], step: Any) -> Any:
    started = time.perf_counter()
    result = step()
    into.append((time.perf_counter() - started) * 1000)
    return result


# -- 3. searches ------------------------------------------------------------------------------


def queries(dim: int, count: int = 512) -> Iterator[tuple[str, np.ndarray[Any, Any], str]]:
    rng = np.random.default_rng(99)
    for _ in range(count):
        user = int(rng.integers(0, USERS))
        yield f"t{user % TENANTS}", rng.standard_normal(dim).astype(np.float32), f"u{user}"


def client_p50(client: Client, dim: int, duration: float) -> list[float]:
    clients = {f"t{t}": client.with_scope({"tenant": f"t{t}"}) for t in range(TENANTS)}
    asked = list(queries(dim))
    latencies = []
    stop = time.perf_counter() + duration
    i = 0
    while time.perf_counter() < stop:
        tenant, vector, user = asked[i % len(asked)]
        started = time.perf_counter()
        clients[tenant].memory.search(
            vector, top_k=10, scope_all={"end_user": user}, include={"embedding": False}
        )
        latencies.append(time.perf_counter() - started)
        i += 1
    return latencies


async def async_rate(url: str, key: str, dim: int, duration: float, concurrency: int) -> int:
    asked = list(queries(dim))
    done = 0
    async with AsyncClient(url, key=key, scope={"tenant": "t0"}) as base:
        await base.handshake()
        clients = {f"t{t}": base.with_scope({"tenant": f"t{t}"}) for t in range(TENANTS)}
        stop = time.perf_counter() + duration

        async def caller(n: int) -> None:
            nonlocal done
            i = n
            while time.perf_counter() < stop:
                tenant, vector, user = asked[i % len(asked)]
                await clients[tenant].memory.search(
                    vector, top_k=10, scope_all={"end_user": user}, include={"embedding": False}
                )
                done += 1
                i += concurrency

        await asyncio.gather(*(caller(n) for n in range(concurrency)))
    return done


def ms(values: Sequence[float]) -> float:
    return statistics.median(values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per search run")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    key = secrets.token_hex(32)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="ratatoskr-client-bench-") as data:
        log = Path(data) / "server.log"
        server = start_server(port, args, data, key, log)
        try:
            wait_ready(url, time.monotonic() + 60)
            with Client(url, key=key, scope={"tenant": "t0"}) as client:
                rate, request_ids, steps = upserts(client, args, data)
                served = server_times(log, "bench-upsert-")
                server_ms = [served[r] for r in request_ids if r in served]
                print(f"loaded {args.chunks:,} chunks through Client at {rate:,.0f} chunks/s")
                rng = np.random.default_rng(7)
                requests = search_requests(key.encode(), port, args.dim, rng)
                asyncio.run(run_load(port, requests, 3, args.concurrency))  # warm both workers
                client_p50(client, args.dim, 2)
                raw1: list[float] = []
                through1: list[float] = []
                raw8 = through8 = 0
                cpu = {"raw": 0.0, "client": 0.0}
                for round_ in range(args.rounds):
                    # tokens minted afresh each round: a raw request's lives 300 s
                    requests = search_requests(key.encode(), port, args.dim, rng)
                    # raw first in one round, the client first in the next: a machine
                    # whose load drifts during a run weighs on both alike
                    for side in ("raw", "client") if round_ % 2 == 0 else ("client", "raw"):
                        started = used_cpu()
                        if side == "raw":
                            raw1 += asyncio.run(run_load(port, requests, args.duration, 1))[0]
                            raw = asyncio.run(
                                run_load(port, requests, args.duration, args.concurrency)
                            )
                            raw8 += len(raw[0])
                        else:
                            through1 += client_p50(client, args.dim, args.duration)
                            through8 += asyncio.run(
                                async_rate(url, key, args.dim, args.duration, args.concurrency)
                            )
                        cpu[side] += used_cpu() - started
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
    floor = [
        a + b + c for a, b, c in zip(steps["loads"], steps["sha256"], steps["store"], strict=True)
    ]
    seconds = args.duration * args.rounds
    report(args, rate, server_ms, floor, steps, raw1, through1, raw8 / seconds, through8 / seconds)
    calls = {"client": through8 + len(through1), "raw": raw8 + len(raw1)}
    print(
        "this process's CPU per search: the clients "
        f"{cpu['client'] / max(1, calls['client']) * 1e6:.0f} us, raw sockets "
        f"{cpu['raw'] / max(1, calls['raw']) * 1e6:.0f} us (their tokens minted beforehand)"
    )
    return 0


def used_cpu() -> float:
    times = os.times()
    return times.user + times.system


def report(
    args: argparse.Namespace,
    rate: float,
    server_ms: list[float],
    floor: list[float],
    steps: dict[str, list[float]],
    raw1: list[float],
    through1: list[float],
    raw8: float,
    through8: float,
) -> None:
    served = ms(server_ms)
    shape = f"{args.batch} x {args.dim}"
    raw_p50, client_p50_ = ms(raw1) * 1000, ms(through1) * 1000
    print(
        f"\n| what ({args.chunks:,} chunks, {args.workers} workers) | measured |\n"
        "| --- | --- |\n"
        f"| `upsert_many` {shape} over HTTP, server time per batch (call log, median) "
        f"| {served:.1f} ms |\n"
        f"| decode + hash + store in this run (`orjson.loads` {ms(steps['loads']):.1f} + "
        f"SHA-256 {ms(steps['sha256']):.1f} + the store's `upsert_many` {ms(steps['store']):.1f})"
        f" | {ms(floor):.1f} ms: server time {served / ms(floor):.2f}x |\n"
        f"| the store's own `upsert_many`, same batches | {ms(steps['store']):.1f} ms: server "
        f"time {served / ms(steps['store']):.2f}x |\n"
        f"| the same end to end through `Client`, one caller | {rate:,.0f} chunks/s |\n"
        f"| scoped search p50, concurrency 1: `Client` / raw socket | {client_p50_:.2f} ms / "
        f"{raw_p50:.2f} ms (+{client_p50_ - raw_p50:.2f} ms) |\n"
        f"| searches/s at concurrency {args.concurrency}: `AsyncClient` / raw socket "
        f"| {through8:,.0f} / {raw8:,.0f} ({through8 / raw8:.0%}) |\n"
        "\nthe server's steps on the same bodies, in this process (median ms per batch): "
        f"decode with the vectors read into float32 {ms(steps['decode_packed']):.1f} "
        f"(orjson: {ms(steps['loads']):.1f}), checks on the packed vectors "
        f"{ms(steps['check_packed']):.1f}, write {ms(steps['write']):.1f}; SHA-256 "
        f"{ms(steps['sha256']):.1f} (on another thread beside the decode)\n"
        f"load average at the end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
