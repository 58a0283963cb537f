"""HTTP load test: scoped searches against ``python -m ratatoskr serve`` from another process.

Starts the real server (gunicorn, 2 workers by default) on a free port over a temporary data
directory, loads chunks over HTTP with ``upsert_many``, then keeps ``--concurrency`` searches
in flight for ``--duration`` seconds, each with its own freshly minted token, and reports
throughput and p50/p95/p99 latency as seen by the client. The searches go over keep-alive
connections as pre-built HTTP/1.1 requests (tokens minted before the clock starts), so the
load generator, which shares the machine's cores with the server, stays cheap.

    .venv/bin/python -m bench.http_load --chunks 20000 --duration 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import orjson

from ratatoskr.wire.tokens import mint_token

TENANTS = 10
USERS = 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def envelope(verb: str, args: dict[str, Any]) -> bytes:
    return orjson.dumps({"wire": "0.6", "verb": verb, "args": args})


class Client:
    def __init__(self, base: str, key: bytes) -> None:
        self.base = base
        self.key = key
        self.http = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64))

    async def call(self, plane: str, verb: str, args: dict[str, Any], scope: dict[str, str]) -> Any:
        body = envelope(verb, args)
        token = mint_token(self.key, plane=plane, verb=verb, scope=scope, sub="bench", body=body)
        response = await self.http.post(
            f"{self.base}/bifrost/{plane}-call",
            content=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        data = response.json()
        if not data.get("ok"):
            raise RuntimeError(f"{verb} failed: {data['error']['code']}")
        return data["result"]


def start_server(
    port: int, workers: int, dim: int, data: str, key: bytes
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RATATOSKR_MEMORY_DB": os.path.join(data, "memory.db"),
        "RATATOSKR_AFFECT_DB": os.path.join(data, "affect.db"),
        "RATATOSKR_MEMORY_EMBEDDING_DIM": str(dim),
        "RATATOSKR_HEIMDALL_KEY": key.decode(),
        "RATATOSKR_LOG_LEVEL": "warning",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ratatoskr",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


async def wait_ready(base: str, deadline: float) -> None:
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            try:
                if (await http.get(f"{base}/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("the server did not become ready")


async def load(client: Client, chunks: int, dim: int, rng: np.random.Generator) -> float:
    """Upsert every chunk, a tenant's chunks per batch under a token scoped to that tenant."""
    start = time.perf_counter()
    batch = 200
    for tenant in range(TENANTS):
        ids = list(range(tenant, chunks, TENANTS))
        for lo in range(0, len(ids), batch):
            records = [
                {
                    "id": f"c{i}",
                    "embedding": rng.standard_normal(dim).astype(np.float32).tolist(),
                    "scope": {"tenant": f"t{tenant}", "end_user": f"u{i % USERS}"},
                    "distillate": f"chunk {i}",
                }
                for i in ids[lo : lo + batch]
            ]
            args = {"records": records, "idempotency_key": f"load-{tenant}-{lo}"}
            await client.call("memory", "upsert_many", args, {"tenant": f"t{tenant}"})
    return chunks / (time.perf_counter() - start)


def search_requests(
    key: bytes, port: int, dim: int, rng: np.random.Generator, count: int = 512
) -> list[bytes]:
    """Ready-to-send HTTP/1.1 requests: scoped searches, each with its token minted up front
    (a search is not mutating, so its token may be sent again until it expires: 300 s), so
    the load generator spends its CPU on sending, not on signing."""
    requests = []
    for _ in range(count):
        user = int(rng.integers(0, USERS))
        args = {
            "vector": rng.standard_normal(dim).astype(np.float32).tolist(),
            "top_k": 10,
            "scope_all": {"end_user": f"u{user}"},
            "include": {"embedding": False},
        }
        body = envelope("search", args)
        scope = {"tenant": f"t{user % TENANTS}"}
        token = mint_token(
            key, plane="memory", verb="search", scope=scope, sub="bench", body=body, lifetime=300
        )
        head = (
            f"POST /bifrost/memory-call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        requests.append(head.encode() + body)
    return requests


async def run_load(
    port: int, requests: list[bytes], duration: float, concurrency: int
) -> tuple[list[float], int]:
    """``concurrency`` keep-alive connections, each sending one request at a time."""
    return await spread_load([(port, requests)], duration, concurrency)


async def spread_load(
    targets: list[tuple[int, list[bytes]]], duration: float, concurrency: int
) -> tuple[list[float], int]:
    """``concurrency`` keep-alive connections, dealt round-robin over ``targets``."""
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + duration

    async def connection(n: int) -> None:
        nonlocal errors
        port, requests = targets[n % len(targets)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        i = n
        try:
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                writer.write(requests[i % len(requests)])
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = await reader.readexactly(length)
                if head.startswith(b"HTTP/1.1 200") and body.startswith(b'{"ok":true'):
                    latencies.append(time.perf_counter() - t0)
                else:
                    errors += 1
                i += concurrency
        finally:
            writer.close()

    await asyncio.gather(*(connection(n) for n in range(concurrency)))
    return latencies, errors


def server_cpu_seconds(master: int) -> dict[int, float]:
    """User + system CPU seconds of each server process: the gunicorn master and workers."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if int(entry) == master or int(fields[1]) == master:
            found[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def percentile(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) * 1000


async def main_async(args: argparse.Namespace) -> int:
    key = secrets.token_hex(32).encode()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="ratatoskr-load-") as data:
        server = start_server(port, args.workers, args.dim, data, key)
        try:
            await wait_ready(base, time.monotonic() + 60)
            client = Client(base, key)
            rate = await load(client, args.chunks, args.dim, rng)
            print(f"loaded {args.chunks:,} chunks over HTTP at {rate:,.0f} chunks/s")
            await client.http.aclose()
            requests = search_requests(key, port, args.dim, rng)
            await run_load(port, requests, 3, args.concurrency)  # warm both workers
            cpu0 = os.times()
            server0 = server_cpu_seconds(server.pid)
            latencies, errors = await run_load(port, requests, args.duration, args.concurrency)
            server1 = server_cpu_seconds(server.pid)
            cpu1 = os.times()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
    n = len(latencies)
    if not n:
        print(
            f"no search succeeded in {args.duration:.0f} s ({errors:,} errors): see the "
            "server's log above",
            file=sys.stderr,
        )
        return 1
    spent = {pid: server1.get(pid, 0.0) - server0.get(pid, 0.0) for pid in server1}
    used = sum(spent.values())
    shares = ", ".join(f"{s / args.duration:.0%}" for s in sorted(spent.values(), reverse=True))
    print(
        f"scoped search (one end_user of {USERS}, dim {args.dim}, {args.chunks:,} chunks, "
        f"{args.workers} workers, concurrency {args.concurrency}, {args.duration:.0f} s):\n"
        f"  {n:,} calls, {n / args.duration:,.0f} searches/s, errors {errors}\n"
        f"  p50 {percentile(latencies, 50):.2f} ms  p95 {percentile(latencies, 95):.2f} ms  "
        f"p99 {percentile(latencies, 99):.2f} ms\n"
        f"  server CPU per search: {used / max(1, n) * 1000:.3f} ms (master and workers); "
        f"CPU share by process: {shares}\n"
        f"  load generator CPU: {(cpu1.user + cpu1.system - cpu0.user - cpu0.system):.1f} s "
        f"of {args.duration:.0f} s; load average at the end: "
        f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    return 0 if errors == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=60.0)
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
