"""Search and write benchmark of the memory store (docs/performance.md).

Run as ``python -m bench.memory_search [--quick] [--n N] [--dim D] [--batch B] [--out FILE]``
(``make bench``: 100k x 768; ``make bench-1m``: 1M x 384, loaded in batches of 1,000).

A file-backed store (WAL, in a temporary directory) is loaded with ``n`` seeded random chunks
through ``upsert_many`` in batches of 500, then six search cases are timed, each beside a
numpy brute-force cosine top-10 over the same float32 vectors and beside plain SQL (a
sqlite-vec ``vec0`` KNN unscoped, the store's scoped candidate statement otherwise), and with
``--peers`` beside Chroma and LanceDB (``bench/peers.py``). A few queries per case are checked
for exactness against a float64 brute force. The report goes to ``--out`` (Markdown; the
hand-written part after the marker of an existing report is kept); ``memory_report.py``
writes it.
"""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import sqlite_vec
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from bench.memory_data import (
    AGENTS,
    BATCH,
    END_USERS,
    EXACT_CHECKS,
    F32,
    F64,
    I64,
    TENANTS,
    TIE_TOLERANCE,
    TOP_K,
    WARMUP,
    Case,
    Dataset,
    LoadResult,
    Query,
    agent_name,
    console,
    make_dataset,
    make_records,
    tenant_name,
    user_name,
)
from bench.memory_report import (
    machine,
    mirror_memory,
    print_summary,
    rss_bytes,
    write_report,
)
from bench.memory_sql_path import time_sql_path
from bench.memory_tail import run_tail
from ratatoskr.core.context import CallContext
from ratatoskr.core.interpreter import settle_for_serving
from ratatoskr.memory.calls import MemoryCalls
from ratatoskr.memory.store import (
    RatatoskrMemoryStore,
    open_memory_store,
    scope_condition,
)

# -- loading -----------------------------------------------------------------------------


def load(store: MemoryCalls, ds: Dataset, rng: np.random.Generator, batch: int) -> LoadResult:
    n = len(ds.ids)
    ctx = CallContext(actor="bench")
    result = LoadResult(chunks=n, upsert_seconds=0.0, wall_seconds=0.0, batch=batch)
    started = time.perf_counter()
    with Progress(
        TextColumn("[bold]loading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("load", total=n, rate="")
        for batch_no, lo in enumerate(range(0, n, batch)):
            records = make_records(ds, lo, min(n, lo + batch), rng)
            t0 = time.perf_counter()
            reply = store.upsert_many(records, idempotency_key=f"bench-load-{batch_no}", ctx=ctx)
            spent = time.perf_counter() - t0
            assert reply["upserted"] == len(records) and not reply["replayed"]
            result.batch_seconds.append(spent)
            result.upsert_seconds += spent
            done = lo + len(records)
            progress.update(
                task, completed=done, rate=f"{done / result.upsert_seconds:,.0f} chunks/s"
            )
    result.wall_seconds = time.perf_counter() - started
    return result


# -- search cases ------------------------------------------------------------------------


def build_cases(ds: Dataset, count: int, rng: np.random.Generator) -> list[Case]:
    dim = ds.matrix.shape[1]
    everything = np.arange(len(ds.ids), dtype=np.int64)
    small_ms = 0.3 if len(ds.ids) <= 100_000 else 1.5
    cases = [
        Case("unscoped", "(a) unscoped", None, target_numpy=2.0),
        Case("end_user", "(b) one end_user (0.1 %), scope_all", small_ms),
        Case("agent", "(e) one agent_self (2 %), scope_all", None),
        Case(
            "scope_any",
            "(c) scope_any [{end_user}, {agent_self}]",
            None,
            target_branches=("end_user", "agent"),
        ),
        Case(
            "two_users",
            "(f) scope_any [{end_user}, {end_user}]",
            None,
            target_branches=("end_user",),
        ),
        Case("tenant", "(d) one tenant (10 %), scope_all", None, target_numpy=2.0),
    ]
    for _ in range(count + WARMUP):
        raw = np.asarray(rng.standard_normal(dim), dtype=np.float32)
        q: F32 = (raw / np.linalg.norm(raw)).astype(np.float32)
        u = int(rng.integers(0, END_USERS))
        u2 = (u + 1 + int(rng.integers(0, END_USERS - 1))) % END_USERS
        a = int(rng.integers(0, AGENTS))
        t = int(rng.integers(0, TENANTS))
        specs: list[tuple[dict[str, str], list[dict[str, str]], I64]] = [
            ({}, [], everything),
            ({"end_user": user_name(u)}, [], np.flatnonzero(ds.end_user == u)),
            ({"agent_self": agent_name(a)}, [], np.flatnonzero(ds.agent == a)),
            (
                {},
                [{"end_user": user_name(u)}, {"agent_self": agent_name(a)}],
                np.flatnonzero((ds.end_user == u) | (ds.agent == a)),
            ),
            (
                {},
                [{"end_user": user_name(u)}, {"end_user": user_name(u2)}],
                np.flatnonzero((ds.end_user == u) | (ds.end_user == u2)),
            ),
            ({"tenant": tenant_name(t)}, [], np.flatnonzero(ds.tenant == t)),
        ]
        for case, (s_all, s_any, rows) in zip(cases, specs, strict=True):
            case.queries.append(Query(q, q.tolist(), s_all, s_any, rows))
    return cases


def numpy_top_k(sub: F32, ids: list[str], q: F32, k: int) -> list[str]:
    """Brute-force cosine top-k: rows pre-normalised, so one float32 matvec + argpartition."""
    scores = sub @ (q / np.linalg.norm(q))
    part = np.argpartition(-scores, k)[:k] if len(scores) > k else np.arange(len(scores))
    best = part[np.argsort(-scores[part], kind="stable")]
    return [ids[i] for i in best]


def reference_scores(matrix: F32, rows: I64, q: F32) -> F64:
    """Float64 cosine of every in-scope row, in blocks (the exactness reference)."""
    q64 = q.astype(np.float64)
    out = np.empty(len(rows), dtype=np.float64)
    for lo in range(0, len(rows), 8192):
        block = matrix[rows[lo : lo + 8192]].astype(np.float64)
        out[lo : lo + 8192] = (block @ q64) / (np.linalg.norm(block, axis=1) * np.linalg.norm(q64))
    return out


def check_exact(case: Case, query: Query, got: list[str], ds: Dataset) -> None:
    """The store's ids must be the float64 top-k, order included; ties at the k-th score
    may be broken either way."""
    scores = reference_scores(ds.matrix, query.rows, query.vector)
    by_id = {ds.ids[r]: float(s) for r, s in zip(query.rows, scores, strict=True)}
    order = sorted(by_id, key=lambda cid: (-by_id[cid], cid))
    want = order[:TOP_K]
    case.exact_checked += 1
    if got == want:
        return
    kth = by_id[want[-1]] if want else 0.0
    ok = len(got) == len(want) and all(
        g == w or abs(by_id.get(g, -2.0) - by_id[w]) <= TIE_TOLERANCE
        for g, w in zip(got, want, strict=True)
    )
    ok = ok and all(by_id.get(g, -2.0) >= kth - TIE_TOLERANCE for g in got)
    if not ok:
        case.exact_failures.append(f"got {got[:3]}..., want {want[:3]}...")


@dataclass(frozen=True)
class Plain:
    """The baselines that talk to SQLite directly, on the store's own file."""

    conn: apsw.Connection

    def vec_knn(self, q: F32, k: int) -> list[str]:
        rows = self.conn.execute(
            "SELECT chunk_id, distance FROM memory_vec WHERE embedding MATCH ? AND k = ?",
            (q.tobytes(), k),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def candidate_sql(self, query: Query, k: int) -> list[str]:
        """The scoped candidate statement the store issues, alone (no fetch, no rescoring)."""
        condition, params = scope_condition(query.scope_all, query.scope_any)
        rows = self.conn.execute(
            f"SELECT chunk_id, vec_distance_cosine(embedding, ?) AS d FROM memory_chunks "
            f"WHERE {condition} ORDER BY d LIMIT ?",
            (query.vector.tobytes(), *params, k),
        ).fetchall()
        return [str(r[0]) for r in rows]


def open_plain(path: str) -> Plain:
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.execute("PRAGMA mmap_size=1073741824")
    conn.execute("PRAGMA cache_size=-65536")
    return Plain(conn)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return (time.perf_counter() - t0) * 1000.0, value


def run_case(
    case: Case,
    store: RatatoskrMemoryStore,
    plain: Plain,
    ds: Dataset,
    unit: F32,
    progress: Progress,
) -> None:
    task = progress.add_task(case.label, total=len(case.queries))
    for i, query in enumerate(case.queries):
        warm = i < WARMUP
        # numpy's input, prepared before the clock starts: the in-scope rows gathered into
        # one contiguous matrix (for the unscoped case, the full matrix itself).
        if case.key == "unscoped":
            sub, sub_ids = unit, ds.ids
        else:
            sub = np.ascontiguousarray(unit[query.rows])
            sub_ids = [ds.ids[r] for r in query.rows]

        def store_call(query: Query = query) -> list[dict[str, Any]]:
            return store.search(
                query.vector_list,
                top_k=TOP_K,
                scope_all=query.scope_all or None,
                scope_any=query.scope_any or None,
            )

        def numpy_call(query: Query = query, sub: F32 = sub, ids: list[str] = sub_ids) -> list[str]:
            return numpy_top_k(sub, ids, query.vector, TOP_K)

        def baseline_call(query: Query = query) -> list[str]:
            if case.key == "unscoped":
                return plain.vec_knn(query.vector, TOP_K)
            return plain.candidate_sql(query, TOP_K)

        ms, hits = timed(store_call)
        np_ms, _ = timed(numpy_call)
        vec_ms, _ = timed(baseline_call)
        if not warm:
            case.store_ms.append(ms)
            case.numpy_ms.append(np_ms)
            (case.vec_ms if case.key == "unscoped" else case.sql_ms).append(vec_ms)
            case.in_scope.append(len(query.rows))
            if case.exact_checked < EXACT_CHECKS:
                check_exact(case, query, [h["chunk_id"] for h in hits], ds)
        progress.advance(task)


def time_peers(ds: Dataset, cases: list[Case]) -> list[Any]:
    """Chroma and LanceDB on the same vectors and queries (bench/peers.py)."""
    try:
        from bench.peers import run_peers
    except ImportError as exc:  # the peers extra is not installed
        console.print(f"peers skipped: {exc}")
        return []
    scopes = [
        {
            "tenant": tenant_name(int(t)),
            "end_user": user_name(int(u)),
            "agent_self": agent_name(int(a)),
        }
        for t, u, a in zip(ds.tenant, ds.end_user, ds.agent, strict=True)
    ]

    def exact_top(query: Query) -> list[str]:
        scores = reference_scores(ds.matrix, query.rows, query.vector)
        best = np.argsort(-scores, kind="stable")[:TOP_K]
        return [ds.ids[int(query.rows[i])] for i in best]

    return run_peers(ds.ids, ds.matrix, scopes, cases, exact_top, console.print)


# -- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_search", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10,000 chunks instead of 100,000")
    parser.add_argument("--n", type=int, default=None, help="number of chunks")
    parser.add_argument("--dim", type=int, default=768, help="embedding dimension")
    parser.add_argument("--queries", type=int, default=100, help="timed queries per case")
    parser.add_argument(
        "--batch", type=int, default=BATCH, help="records per upsert_many (1..1000)"
    )
    parser.add_argument("--seed", type=int, default=20240607)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the report (default docs/performance.md; bench-quick.md with --quick, so a "
        "quick run never overwrites the committed report)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database directory")
    parser.add_argument(
        "--peers", action="store_true", help="also time Chroma and LanceDB (the peers extra)"
    )
    parser.add_argument(
        "--sql-path",
        type=int,
        default=20,
        help="queries per case timed on the SQL path, the mirror off (0: skip)",
    )
    parser.add_argument(
        "--tail",
        type=float,
        default=0.0,
        help="seconds of searches while a client writes (bench/memory_tail.py; 0: skip)",
    )
    parser.add_argument(
        "--tail-budget",
        type=int,
        default=None,
        help="the mirror's byte budget in the tail benchmark (default: the environment's)",
    )
    args = parser.parse_args(argv)
    if args.n is None:
        args.n = 10_000 if args.quick else 100_000
    if args.out is None:
        args.out = Path("bench-quick.md" if args.quick else "docs/performance.md")
    if args.n < TOP_K or args.dim < 1 or args.queries < 1 or not 1 <= args.batch <= 1000:
        parser.error("--n must be >= 10, --dim and --queries >= 1, --batch 1..1000")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    settle_for_serving()  # as a server's worker does once it has imported the app
    args = shlex.join(list(argv if argv is not None else sys.argv[1:]))
    command = ".venv/bin/python -m bench.memory_search" + (f" {args}" if args else "")
    started = time.perf_counter()
    loadavg_start = os.getloadavg()
    rng = np.random.default_rng(cfg.seed)
    console.print(f"generating {cfg.n:,} x {cfg.dim} chunks (seed {cfg.seed})")
    ds = make_dataset(cfg.n, cfg.dim, rng)
    unit: F32 = ds.matrix / np.linalg.norm(ds.matrix, axis=1, keepdims=True)
    workdir = tempfile.mkdtemp(prefix="ratatoskr-bench-")
    path = os.path.join(workdir, "memory.db")
    store = open_memory_store(path, embedding_dim=cfg.dim)
    try:
        loaded = load(store, ds, rng, cfg.batch)  # its mirror worker follows the writes
        console.print(
            f"loaded {cfg.n:,} chunks: {loaded.chunks_per_s:,.0f} chunks/s inside upsert_many"
        )
        # Fold the WAL into the main file before timing reads.
        store.db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        db_bytes = os.path.getsize(path)
        store.close()
        gc.collect()
        rss_before = rss_bytes()
        t0 = time.perf_counter()
        store = open_memory_store(path, embedding_dim=cfg.dim)  # a restart: the worker loads
        assert store.engine.wait_until(lambda m: m.ready, 3600), "the mirror did not load"
        cfg.mirror_load_s = time.perf_counter() - t0
        cfg.mirror_rss = rss_bytes() - rss_before
        cfg.mirror = mirror_memory(store)
        plain = open_plain(path)
        cases = build_cases(ds, cfg.queries, rng)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            for case in cases:
                run_case(case, store, plain, ds, unit, progress)
        plain.conn.close()
        info = machine(store)
        store.close()
        if cfg.sql_path:
            console.print(f"the SQL path: {cfg.sql_path} queries per case, mirror off")
            cfg.sql_path = time_sql_path(path, cfg.dim, cases, cfg.sql_path)
        if cfg.tail:
            console.print(f"searches while a client writes: {cfg.tail:g} s")
            cfg.tail_result = run_tail(
                path, cfg.dim, cfg.n, cfg.tail, cfg.seed, mirror_bytes=cfg.tail_budget
            )
        cfg.peer_results = time_peers(ds, cases) if cfg.peers else []
    finally:
        store.close()
        if cfg.keep:
            console.print(f"kept the database at {path}")
        else:
            for name in os.listdir(workdir):
                os.remove(os.path.join(workdir, name))
            os.rmdir(workdir)
    print_summary(cases, loaded)
    elapsed = time.perf_counter() - started
    write_report(
        cfg.out,
        command,
        info,
        cfg,
        loaded,
        cases,
        db_bytes,
        (loadavg_start, os.getloadavg()),
        elapsed,
    )
    console.print(f"wrote {cfg.out}")
    return 0 if all(not c.exact_failures for c in cases) else 1


if __name__ == "__main__":
    raise SystemExit(main())
