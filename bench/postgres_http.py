"""HTTP searches/s against one and then two ``ratatoskr serve`` over one PostgreSQL.

    .venv/bin/python -m bench.postgres_http --chunks 20000 --duration 30

A PostgreSQL of its own (``tests/pgserver.py``, default durability) holds both planes; the
first server (2 workers) loads the chunks over HTTP (``bench.http_load``'s data), then
``--concurrency`` keep-alive connections send scoped searches (one end_user) for
``--duration`` seconds, first all to the one server, then spread over it and a second
server started on the same database. Everything shares this machine's cores (printed), so
the second server measures what statelessness costs, not what a second machine would add.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.http_load import (
    Client,
    free_port,
    load,
    percentile,
    search_requests,
    spread_load,
    wait_ready,
)
from tests.pgserver import PostgresServer

DATABASE = "bench"
HEADING = "### HTTP over PostgreSQL (`make bench-postgres`)"


def start(url: str, port: int, workers: int, dim: int, key: bytes) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RATATOSKR_MEMORY_DB": url,
        "RATATOSKR_AFFECT_DB": url,
        "RATATOSKR_MEMORY_EMBEDDING_DIM": str(dim),
        "RATATOSKR_HEIMDALL_KEY": key.decode(),
        "RATATOSKR_LOG_LEVEL": "warning",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    cmd = [sys.executable, "-m", "ratatoskr", "serve", "--port", str(port)]
    return subprocess.Popen(
        [*cmd, "--workers", str(workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


async def main_async(args: argparse.Namespace) -> int:
    key = secrets.token_hex(32).encode()
    rng = np.random.default_rng(7)
    pg = PostgresServer({"shared_buffers": "512MB", "max_connections": "100"}).start()
    servers: list[subprocess.Popen[bytes]] = []
    lines = [f"machine: {os.cpu_count()} cores, shared by PostgreSQL, the servers and the client"]
    failed = False
    try:
        pg.create_database(DATABASE)
        url = pg.url(DATABASE)
        ports = [free_port(), free_port()]
        servers.append(start(url, ports[0], args.workers, args.dim, key))
        await wait_ready(f"http://127.0.0.1:{ports[0]}", time.monotonic() + 60)
        client = Client(f"http://127.0.0.1:{ports[0]}", key)
        rate = await load(client, args.chunks, args.dim, rng)
        await client.http.aclose()
        lines.append(f"loaded {args.chunks:,} x {args.dim} chunks over HTTP at {rate:,.0f}/s")
        for count in (1, 2):
            if count == 2:
                servers.append(start(url, ports[1], args.workers, args.dim, key))
                await wait_ready(f"http://127.0.0.1:{ports[1]}", time.monotonic() + 60)
            targets = [(p, search_requests(key, p, args.dim, rng)) for p in ports[:count]]
            await spread_load(targets, 3, args.concurrency)  # warm every worker
            latencies, errors = await spread_load(targets, args.duration, args.concurrency)
            n = len(latencies)
            failed = failed or errors > 0 or n == 0
            lines.append(
                f"{count} server(s) x {args.workers} workers, concurrency {args.concurrency}: "
                f"{n / args.duration:,.0f} searches/s, p50 {percentile(latencies, 50):.2f} ms, "
                f"p99 {percentile(latencies, 99):.2f} ms, errors {errors}"
                if n
                else f"{count} server(s): no search succeeded ({errors} errors)"
            )
    finally:
        for server in servers:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
        pg.stop()
    print("\n".join(lines))
    if args.out is not None:
        command = ".venv/bin/python -m bench.postgres_http " + shlex.join(args.argv)
        block = [HEADING, "", f"`{command}`:", ""] + [f"- {line}" for line in lines]
        text = args.out.read_text() if args.out.exists() else ""
        head = text.split(HEADING, 1)[0].rstrip()
        args.out.write_text((head + "\n\n" if head else "") + "\n".join(block) + "\n")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument(
        "--out", type=Path, default=Path("docs/performance.md"), help="the report to append to"
    )
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
