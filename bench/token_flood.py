"""Token abuse at rate (docs/reliability.md): a flood of invalid tokens against 2 workers.

A separate process sends calls whose token is wrong in every way the verifier checks (other
key, expired, ``alg: none``, wrong audience, garbage, none at all), mostly on mutating verbs.
Meanwhile valid searches run as before the flood. Reported: the flood's rate and answers,
valid-call latency before and during (the bound is 2x), and the files and tables, which must
not change: an invalid token is refused before anything touches a database. The server holds
every 401 for ``RATATOSKR_AUTH_TARPIT_MS`` (250 ms) unless ``RATATOSKR_AUTH_TARPIT_MAX`` calls
are held in that worker already; those answers come at once with ``Connection: close`` and are
counted as ``closed``.

    .venv/bin/python -m bench.token_flood                # 20 s per phase (make token-flood)
    .venv/bin/python -m bench.token_flood --phase 10 --flood-concurrency 4
    .venv/bin/python -m bench.token_flood --tarpit-ms 0      # the server without the tarpit
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import random
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.reliability_common import Client, envelope, file_bytes, ms, start
from ratatoskr.wire.tokens import mint_token
from tests.server.harness import KEY

DIM = 128
CHUNKS = 2000
FILES = (
    "memory.db",
    "memory.db-wal",
    "affect.db",
    "affect.db-wal",
    "memory.jti.db",
    "memory.jti.db-wal",
)
TABLES = {
    "memory.db": ("memory_chunks", "memory_idempotency", "memory_changes"),
    "affect.db": ("affect_states", "affect_events", "affect_idempotency"),
    "memory.jti.db": ("jti_ledger",),
}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def bad_token(kind: str, body: bytes, verb: str) -> str | None:
    claims: dict[str, Any] = {
        "plane": "memory",
        "verb": verb,
        "scope": {"tenant": "acme"},
        "sub": "flood",
        "body": body,
    }
    if kind == "other-key":
        return mint_token(b"x" * 40, **claims)
    if kind == "expired":
        return mint_token(KEY.encode(), now=time.time() - 3600, **claims)
    if kind == "wrong-audience":
        return mint_token(KEY.encode(), audience="someone-else", **claims)
    if kind == "alg-none":
        head = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
        return f"{head}.{_b64(json.dumps({'sub': 'flood'}).encode())}."
    if kind == "garbage":
        return "not.a.token"
    return None  # no Authorization header at all


KINDS = ("other-key", "expired", "wrong-audience", "alg-none", "garbage", "missing")


async def flood(url: str, seconds: float, concurrency: int, rate: float) -> dict[str, Any]:
    """Invalid calls from ``concurrency`` connections; ``rate`` > 0 caps calls per second."""
    codes: Counter[str] = Counter()
    closed = 0  # answered past the tarpit's cap: at once, connection closed
    until = time.monotonic() + seconds
    gap = concurrency / rate if rate > 0 else 0.0

    # a client (one connection) per caller; they share one TLS context, which costs about
    # 30 ms to build: built per client, a thousand clients took the whole phase to start
    tls = ssl.create_default_context()

    async def one(n: int) -> None:
        nonlocal closed
        rng = random.Random(n)
        async with httpx.AsyncClient(timeout=30, verify=tls) as http:
            due = time.monotonic()
            while time.monotonic() < until:
                if gap:
                    due += gap
                    await asyncio.sleep(max(0.0, due - time.monotonic()))
                verb = rng.choice(("upsert_many", "upsert_many", "delete_many", "search"))
                body = envelope(verb, {"ids": ["x"]} if verb == "delete_many" else {})
                token = bad_token(rng.choice(KINDS), body, verb)
                headers = {"Content-Type": "application/json"}
                if token is not None:
                    headers["Authorization"] = f"Bearer {token}"
                try:
                    r = await http.post(f"{url}/bifrost/memory-call", content=body, headers=headers)
                    codes[f"{r.status_code} {r.json()['error']['code']}"] += 1
                    closed += r.headers.get("connection") == "close"
                except Exception as exc:  # counted, not fatal
                    codes[type(exc).__name__] += 1

    started = time.monotonic()
    await asyncio.gather(*(one(n) for n in range(concurrency)))
    rate = sum(codes.values()) / (time.monotonic() - started)
    return {"codes": dict(codes), "closed": closed, "rate": rate}


async def valid_latencies(url: str, seconds: float, concurrency: int) -> list[float]:
    client = Client(url)
    latencies: list[float] = []
    until = time.monotonic() + seconds

    async def one(n: int) -> None:
        rng = random.Random(n)
        while time.monotonic() < until:
            vector = [rng.uniform(-1, 1) for _ in range(DIM)]
            started = time.perf_counter()
            r = await client.call(
                "memory", "search", {"vector": vector, "top_k": 10}, {"tenant": "acme"}
            )
            latencies.append(time.perf_counter() - started)
            assert r.status_code == 200, r.text

    await asyncio.gather(*(one(n) for n in range(concurrency)))
    await client.close()
    return latencies


def snapshot(data: Path) -> dict[str, Any]:
    sizes = {name: file_bytes(data / name) for name in FILES}
    rows = {}
    for name, tables in TABLES.items():
        conn = sqlite3.connect(f"file:{data / name}?mode=ro", uri=True)
        try:
            for table in tables:
                rows[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        finally:
            conn.close()
    return {"bytes": sizes, "rows": rows}


async def seed(url: str) -> None:
    client = Client(url)
    rng = random.Random(7)
    for b in range(CHUNKS // 500):
        records = [
            {
                "id": f"c{b}-{i}",
                "embedding": [rng.uniform(-1, 1) for _ in range(DIM)],
                "scope": {"tenant": "acme", "end_user": f"u{i % 20}"},
                "distillate": "seed",
            }
            for i in range(500)
        ]
        r = await client.call(
            "memory",
            "upsert_many",
            {"records": records, "idempotency_key": f"seed-{b}"},
            {"tenant": "acme"},
        )
        assert r.status_code == 200, r.text
    await client.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="ratatoskr-flood-"))
    if args.tarpit_ms is None:
        server = start(root, DIM)
    else:
        server = start(root, DIM, RATATOSKR_AUTH_TARPIT_MS=str(args.tarpit_ms))
    data = root / "data"
    try:
        asyncio.run(seed(server.url))
        asyncio.run(valid_latencies(server.url, 3, args.concurrency))  # warm up
        before = snapshot(data)
        baseline = asyncio.run(valid_latencies(server.url, args.phase, args.concurrency))
        flooder = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.token_flood",
                "--flood-url",
                server.url,
                "--flood-seconds",
                str(args.phase + 4),
                "--flood-concurrency",
                str(args.flood_concurrency),
                "--flood-rate",
                str(args.flood_rate),
            ],
            stdout=subprocess.PIPE,
        )
        # the flood ramps up first (a benchmark's phase boundary, not a test's wait)
        time.sleep(2)
        during = asyncio.run(valid_latencies(server.url, args.phase, args.concurrency))
        out, _ = flooder.communicate(timeout=args.phase + 60)
        flood_result = json.loads(out)
        after = snapshot(data)
    finally:
        server.terminate()
        server.kill()
    return {
        "phase_s": args.phase,
        "valid_concurrency": args.concurrency,
        "flood_concurrency": args.flood_concurrency,
        "flood": flood_result,
        "baseline": {
            "calls": len(baseline),
            "p50_ms": ms(baseline, 50),
            "p95_ms": ms(baseline, 95),
        },
        "during": {"calls": len(during), "p50_ms": ms(during, 50), "p95_ms": ms(during, 95)},
        "before": before,
        "after": after,
    }


def report(r: dict[str, Any]) -> str:
    b, d = r["baseline"], r["during"]
    ratio50, ratio95 = d["p50_ms"] / b["p50_ms"], d["p95_ms"] / b["p95_ms"]
    unchanged = r["before"] == r["after"]
    return "\n".join(
        [
            f"token flood: {r['flood']['rate']:.0f} invalid calls/s from "
            f"{r['flood_concurrency']} connections for {r['phase_s']:.0f} s; answers "
            f"{r['flood']['codes']}, {r['flood']['closed']} of them closed at the tarpit's cap",
            f"valid searches ({r['valid_concurrency']} in flight): before p50 {b['p50_ms']:.1f} ms "
            f"p95 {b['p95_ms']:.1f} ms ({b['calls']} calls); during p50 {d['p50_ms']:.1f} ms "
            f"p95 {d['p95_ms']:.1f} ms ({d['calls']} calls); ratio p50 {ratio50:.2f}x, "
            f"p95 {ratio95:.2f}x",
            f"files and tables unchanged: {unchanged} (rows {r['after']['rows']}; "
            f"bytes {r['after']['bytes']})",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", type=float, default=20.0, help="seconds per phase (20)")
    parser.add_argument("--concurrency", type=int, default=2, help="valid calls in flight (2)")
    parser.add_argument("--flood-concurrency", type=int, default=8)
    parser.add_argument("--flood-rate", type=float, default=0, help="calls/s cap (0: none)")
    parser.add_argument(
        "--tarpit-ms", type=int, help="the server's RATATOSKR_AUTH_TARPIT_MS (its default: 250)"
    )
    parser.add_argument("--flood-url", help=argparse.SUPPRESS)
    parser.add_argument("--flood-seconds", type=float, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.flood_url:  # the flooding child process
        flooded = flood(args.flood_url, args.flood_seconds, args.flood_concurrency, args.flood_rate)
        print(json.dumps(asyncio.run(flooded)))
        return 0
    result = run(args)
    print(report(result))
    ok = result["before"] == result["after"] and all(
        code.startswith("401") for code in result["flood"]["codes"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
