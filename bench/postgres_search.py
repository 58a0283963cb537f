"""SQLite and PostgreSQL side by side, beside pgvector's own exact query.

    .venv/bin/python -m bench.postgres_search            # make bench-postgres: 100k x 768

The same seeded chunks (``bench.memory_data``) are loaded through ``upsert_many`` in batches
of 500 into a SQLite file and into PostgreSQL (a cluster of its own from the ``pgtest``
extra's binaries, ``tests/pgserver.py``, with its durability settings left at PostgreSQL's
defaults), then the same queries run on both stores. Beside the PostgreSQL store's search,
pgvector's own exact query on the same table and filter (``WHERE <scope> ORDER BY (embedding
<=> q) + 0 LIMIT 10``) is timed: the store adds its candidate margin, the rows of the hits
and the float64 rescoring to it. A few queries per case are checked for exactness against a
float64 brute force. The table goes to the end of ``docs/performance.md`` under its own
heading (``--out``), replacing an earlier run's.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np
import psycopg

from bench.memory_data import TOP_K, WARMUP, Case, console, make_dataset
from bench.memory_report import cpu_model, ram_gib
from bench.memory_search import build_cases, check_exact, load
from ratatoskr.memory.postgres.store import PgMemoryStore
from ratatoskr.memory.store import open_memory_store
from ratatoskr.ops.locations import open_memory
from ratatoskr.postgres.scope_sql import scope_condition
from ratatoskr.postgres.vectors import Float4Array, register_types
from tests.pgserver import PostgresServer

HEADING = "## PostgreSQL beside SQLite (`make bench-postgres`)"
# a bench cluster: PostgreSQL's default durability (fsync, synchronous_commit on), memory for
# the table (100k x 768 is ~330 MB), parallel scans as shipped (2 workers per gather)
BENCH_OPTIONS = {"shared_buffers": "1GB", "max_connections": "100", "effective_cache_size": "4GB"}
DATABASE = "bench"


def median(xs: list[float]) -> float:
    return float(np.median(np.asarray(xs))) if xs else float("nan")


def pgvector_exact(conn: Any, query: Any) -> list[str]:
    """pgvector's exact top 10 under the same filter: no margin, no rows, no rescoring."""
    condition, params = scope_condition(query.scope_all, query.scope_any)
    rows = conn.execute(
        f"SELECT chunk_id FROM memory_chunks WHERE {condition} "
        "ORDER BY (embedding <=> (SELECT %s::real[]::vector)) + 0 LIMIT %s",
        (*params, Float4Array(query.vector), TOP_K),
    ).fetchall()
    return [bytes(r[0]).decode() for r in rows]


def _search(store: Any, query: Any) -> list[str]:
    hits = store.search(
        query.vector_list,
        top_k=TOP_K,
        scope_all=query.scope_all or None,
        scope_any=query.scope_any or None,
        include={"embedding": False},
    )
    return [h["chunk_id"] for h in hits]


def time_case(case: Case, stores: dict[str, Any], raw: Any, ds: Any) -> dict[str, list[float]]:
    """Each query on every store and then pgvector's own query, in turn (so a change of
    load on this shared machine weighs on all three alike); the first ``WARMUP`` untimed."""
    times: dict[str, list[float]] = {"sqlite": [], "postgresql": [], "pgvector": []}
    for i, query in enumerate(case.queries):
        calls: dict[str, Callable[[], list[str]]] = {
            name: partial(_search, store, query) for name, store in stores.items()
        }
        calls["pgvector"] = partial(pgvector_exact, raw, query)
        for name, call in calls.items():
            t0 = time.perf_counter()
            got = call()
            spent = (time.perf_counter() - t0) * 1000
            if i < WARMUP:
                continue
            times[name].append(spent)
            if name != "pgvector" and case.exact_checked < 6:
                check_exact(case, query, got, ds)
    return times


def run(cfg: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(cfg.seed)
    console.print(f"generating {cfg.n:,} x {cfg.dim} chunks (seed {cfg.seed})")
    ds = make_dataset(cfg.n, cfg.dim, rng)
    cases = build_cases(ds, cfg.queries, np.random.default_rng(cfg.seed + 1))
    out: dict[str, Any] = {"cases": {}, "load": {}}
    workdir = tempfile.mkdtemp(prefix="ratatoskr-bench-pg-")
    lite = open_memory_store(os.path.join(workdir, "memory.db"), embedding_dim=cfg.dim)
    server = PostgresServer(BENCH_OPTIONS).start()
    try:
        server.create_database(DATABASE)
        pg = cast(PgMemoryStore, open_memory(server.url(DATABASE), embedding_dim=cfg.dim))
        for name, store in (("sqlite", lite), ("postgresql", pg)):
            console.print(f"loading {name}")
            loaded = load(store, ds, np.random.default_rng(cfg.seed + 2), 500)
            out["load"][name] = loaded.chunks_per_s
            console.print(f"  {loaded.chunks_per_s:,.0f} chunks/s inside upsert_many")
            if name == "sqlite":  # its WAL folded back now, not by its checkpoint thread later
                lite.db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        with psycopg.connect(server.dsn(DATABASE), autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE memory_chunks")
            row = conn.execute("SELECT pg_total_relation_size('memory_chunks')").fetchone()
            out["pg_bytes"] = int(row[0]) if row else 0
        lite.search(ds.matrix[0].tolist(), top_k=TOP_K)  # the SQLite mirror loads
        raw = psycopg.connect(server.dsn(DATABASE), autocommit=True)
        register_types(raw)
        for case in cases:
            console.print(f"  {case.label}")
            timings = time_case(case, {"sqlite": lite, "postgresql": pg}, raw, ds)
            out["cases"][case.key] = {
                "label": case.label,
                "in_scope": int(np.median([len(q.rows) for q in case.queries])),
                **{k: median(v) for k, v in timings.items()},
                "exact": not case.exact_failures,
            }
        raw.close()
        pg.close()
    finally:
        lite.close()
        server.stop()
        for name in os.listdir(workdir):
            os.remove(os.path.join(workdir, name))
        os.rmdir(workdir)
    return out


def report(cfg: argparse.Namespace, result: dict[str, Any], command: str, elapsed: float) -> str:
    cases = result["cases"]
    lines = [
        HEADING,
        "",
        f"`{command}` ({cfg.n:,} x {cfg.dim}, {cfg.queries} queries per case, top 10, "
        f"{elapsed / 60:.1f} min; {cpu_model()}, {os.cpu_count()} cores, {ram_gib()} RAM). "
        "Store medians in ms, each store called in process (PostgreSQL over its unix "
        "socket); *pgvector* is pgvector's own exact query on the same table and filter "
        "(`WHERE <scope> ORDER BY (embedding <=> q) + 0 LIMIT 10`), without the store's "
        "candidate margin, hit rows and float64 rescoring.",
        "",
        "| case | in scope | SQLite | PostgreSQL | pgvector exact | PostgreSQL / pgvector "
        "| exact |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for case in cases.values():
        ratio = case["postgresql"] / case["pgvector"] if case["pgvector"] else float("nan")
        lines.append(
            f"| {case['label']} | {case['in_scope']:,} | {case['sqlite']:.2f} | "
            f"{case['postgresql']:.2f} | {case['pgvector']:.2f} | {ratio:.2f}x | "
            f"{'yes' if case['exact'] else 'NO'} |"
        )
    # two points, one tenant (many rows) and one end_user (few): a line through them
    wide, narrow = cases["tenant"], cases["end_user"]
    per_row = (wide["postgresql"] - narrow["postgresql"]) / max(
        1, wide["in_scope"] - narrow["in_scope"]
    )
    fixed = narrow["postgresql"] - per_row * narrow["in_scope"]
    per_row *= 1000
    lines += [
        "",
        f"`upsert_many` (batches of 500): SQLite {result['load']['sqlite']:,.0f} chunks/s, "
        f"PostgreSQL {result['load']['postgresql']:,.0f} chunks/s (binary COPY, committed "
        "durably). The PostgreSQL table with its indexes: "
        f"{result['pg_bytes'] / 1e6:,.0f} MB ({result['pg_bytes'] / cfg.n:,.0f} bytes a chunk). "
        f"An exact scoped search on PostgreSQL costs about {per_row:.2f} µs per row in scope "
        f"at dim {cfg.dim} plus a fixed {fixed:.2f} ms (the line through the end_user and "
        "tenant medians): size a deployment by the rows its largest scopes hold "
        "(docs/scaling.md).",
        "",
    ]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else ""
    head = text.split(HEADING, 1)[0].rstrip()
    path.write_text((head + "\n\n" if head else "") + section)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.postgres_search", description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20240607)
    parser.add_argument("--out", type=Path, default=Path("docs/performance.md"))
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    args = shlex.join(list(argv if argv is not None else sys.argv[1:]))
    command = ".venv/bin/python -m bench.postgres_search" + (f" {args}" if args else "")
    started = time.perf_counter()
    result = run(cfg)
    section = report(cfg, result, command, time.perf_counter() - started)
    print(section)
    write_section(cfg.out, section)
    console.print(f"wrote {cfg.out}")
    return 0 if all(c["exact"] for c in result["cases"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
