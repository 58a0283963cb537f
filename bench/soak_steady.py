"""The steady soak's data: a fixed set of ids filled once, then only rewritten.

A soak over data that keeps growing cannot tell a leak from a bigger store. Here, after the
fill, every write lands on an id that already exists, so each table keeps its size:

- memory chunks and affect states: ``IDS_PER_USER`` ids per (tenant, user), rewritten with
  records of the same size;
- affect events: a fixed pool of ``EVENTS_PER_USER`` event ids per user, each with a fixed
  time, appended again and again: the store skips an event it already holds unchanged, so the
  call still runs its write transaction but the log does not grow;
- the memory change log: the store keeps its newest ``CHANGES_KEPT`` rows; the fill rewrites
  every chunk until the log is past that, so it stays at the cap afterwards;
- idempotency entries: one per write call, kept 24 h by the contract (``ratatoskr admin
  prune`` drops expired ones). The soak drops entries older than ``horizon`` seconds every
  ``PRUNE_EVERY`` seconds, as that prune would with a short TTL, so the tables hold a moving
  window of a fixed length;
- the jti ledger: the server drops a jti once its token has expired (60 s here).
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.reliability_common import Client, file_bytes
from ratatoskr.core.idempotency import CLASS_TTL_SECONDS
from ratatoskr.memory.store import CHANGES_KEPT

IDS_PER_USER = 100  # 5 tenants x 50 users x 100: 25,000 chunks and 25,000 states
EVENTS_PER_USER = 20
PRUNE_EVERY = 10.0  # seconds between two idempotency prunes
DEFAULT_HORIZON = 60.0  # seconds an idempotency entry is kept by the soak
BATCH = 500
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
FILES = ("memory.db", "memory.db-wal", "affect.db", "affect.db-wal", "memory.jti.db")
TABLES = {
    "memory.db": ("memory_chunks", "memory_changes", "memory_idempotency"),
    "affect.db": ("affect_states", "affect_events", "affect_idempotency"),
    "memory.jti.db": ("jti_ledger",),
}
IDEMPOTENCY = {"memory.db": "memory_idempotency", "affect.db": "affect_idempotency"}


def chunk_id(tenant: str, user: str, n: int) -> str:
    return f"{tenant}-{user}-{n}"


def event(tenant: str, user: str, n: int) -> dict[str, Any]:
    """Event ``n`` of a user: always the same content, so appending it again changes nothing."""
    return {
        "id": f"e-{tenant}-{user}-{n}",
        "scope": {"tenant": tenant, "end_user": user},
        "at": (EPOCH + timedelta(minutes=n)).isoformat(),
        "kind": "turn",
    }


def fill_passes(chunks: int) -> int:
    """Rewrites of every chunk that push the change log past its cap."""
    return CHANGES_KEPT // chunks + 1


async def fill(
    base: str, tenants: list[str], users: list[str], dim: int, vector_of: Any
) -> dict[str, int]:
    """Write every id once (chunks as often as the change log needs); the counts written."""
    client = Client(base, connections=1)
    rng = random.Random(11)
    written = {"chunks": 0, "states": 0, "events": 0}
    passes = fill_passes(len(tenants) * len(users) * IDS_PER_USER)
    try:
        for p in range(passes):
            for tenant in tenants:
                records = [
                    {
                        "id": chunk_id(tenant, user, n),
                        "embedding": vector_of(rng),
                        "scope": {"tenant": tenant, "end_user": user},
                        "distillate": "s" * 400,
                    }
                    for user in users
                    for n in range(IDS_PER_USER)
                ]
                for i in range(0, len(records), BATCH):
                    args = {
                        "records": records[i : i + BATCH],
                        "idempotency_key": f"fill-{tenant}-{p}-{i}",
                    }
                    await _ok(client, "memory", "upsert_many", args, tenant)
                    written["chunks"] += len(args["records"])
        for tenant in tenants:
            states = [
                {"id": chunk_id(tenant, user, n), "scope": {"tenant": tenant, "end_user": user}}
                for user in users
                for n in range(IDS_PER_USER)
            ]
            for i in range(0, len(states), BATCH):
                args = {"records": states[i : i + BATCH], "idempotency_key": f"fill-s-{tenant}-{i}"}
                await _ok(client, "affect", "put_many", args, tenant)
                written["states"] += len(args["records"])
            events = [event(tenant, u, n) for u in users for n in range(EVENTS_PER_USER)]
            for i in range(0, len(events), BATCH):
                args = {"events": events[i : i + BATCH], "idempotency_key": f"fill-e-{tenant}-{i}"}
                await _ok(client, "affect", "append_events", args, tenant)
                written["events"] += len(args["events"])
    finally:
        await client.close()
    return written


async def _ok(client: Client, plane: str, verb: str, args: dict[str, Any], tenant: str) -> None:
    response = await client.call(plane, verb, args, {"tenant": tenant})
    if response.status_code != 200:
        raise RuntimeError(f"fill: {plane}.{verb} answered {response.status_code}")


def prune_idempotency(data: Path, horizon: float) -> int:
    """Drop idempotency entries written more than ``horizon`` seconds ago; rows dropped."""
    ttl = CLASS_TTL_SECONDS["default"]
    dropped = 0
    for name, table in IDEMPOTENCY.items():
        conn = sqlite3.connect(data / name, timeout=5)
        try:
            with conn:
                cut = time.time() + ttl - horizon
                dropped += conn.execute(
                    f"DELETE FROM {table} WHERE expires_at <= ?", (cut,)
                ).rowcount
        finally:
            conn.close()
    return dropped


def snapshot(data: Path) -> dict[str, Any]:
    """File sizes (MiB) and row counts: what must stop growing."""
    rows: dict[str, int] = {}
    for name, tables in TABLES.items():
        conn = sqlite3.connect(f"file:{data / name}?mode=ro", uri=True, timeout=5)
        try:
            for table in tables:
                rows[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        finally:
            conn.close()
    return {"mib": {name: file_bytes(data / name) / (1 << 20) for name in FILES}, "rows": rows}


def process_counts(pid: int) -> dict[str, int]:
    """Open descriptors and threads of a worker: each SQLite connection holds descriptors."""
    threads = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            threads = int(line.split()[1])
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": threads}
