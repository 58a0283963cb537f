"""The search tail under a writer: no search waits for the mirror to load or regroup.

Run by ``bench.memory_search --tail SECONDS`` on the file it loaded (``make bench`` and
``make bench-1m``). One client process writes batches of 500 new chunks as fast as it can,
each followed by a delete of the 500 oldest (so the store keeps its size while its mirror's
tail and dead rows grow and it regroups, again and again). Meanwhile this process opens a
store on the file (a worker starting, as after a deploy) and searches on one thread,
alternating one end_user (0.1 %) and one tenant (10 %):

- first, as a baseline, ``FIRST`` searches through a store with the mirror off: the SQL
  path's cost under this writer (what a cold start's searches cost at best);
- the first ``FIRST`` searches after the store opened: answered in exact SQL until the
  worker's first load is complete, then from the mirror;
- then ``SECONDS`` of searches on the loaded mirror: p50, p99 and the maximum per case,
  and how many were answered from SQL (none should be);
- last, as the other baseline, ``SECONDS`` more with the same writer on a copy of the file
  (nothing for the mirror to follow): what this load on the machine alone does to the
  searches, beside what following the writes adds.

Reported beside them: the writer's rate, the worker's regroups and its longest hold of the
mirror's lock, and the load average (the machine is shared).
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event

import apsw
import numpy as np

from bench.memory_data import AGENTS, END_USERS, TENANTS, agent_name, tenant_name, user_name
from ratatoskr.core.context import CallContext
from ratatoskr.memory.search.build import copy_bytes
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store

WRITE_BATCH = 500
FIRST = 100
WARM_BATCHES = 3  # the writer's batches before the store opens
CASES = ("end_user", "tenant")
P99_MS = 3.0  # the end_user target
# what each route does, for the report (``engine.py``)
ROUTES = {
    "current": "no read transaction: the file unchanged since this thread's last snapshot, "
    "and the mirror at its log head or where the changes noted then begin",
    "mirror": "a read transaction; the mirror at the log's head",
    "overlay-shared": "the log ahead of the mirror; its changes as an earlier search or the "
    "worker read them at this head",
    "overlay": "the log ahead of the mirror; the first search at this head reads its changes",
    "sql": "exact SQL",
}


@dataclass
class Timed:
    """Searches of one case: milliseconds and the route that answered each."""

    ms: list[float] = field(default_factory=list)
    routes: Counter[str] = field(default_factory=Counter)
    route_of: list[str] = field(default_factory=list)

    def add(self, ms: float, route: str) -> None:
        self.ms.append(ms)
        self.routes[route] += 1
        self.route_of.append(route)

    def slowest(self) -> Counter[str]:
        """The routes of the searches above the 99th percentile."""
        bound = self.pct(99)
        return Counter(r for ms, r in zip(self.ms, self.route_of, strict=True) if ms > bound)

    def pct(self, q: float) -> float:
        return float(np.percentile(self.ms, q)) if self.ms else float("nan")

    def slower(self, bound_ms: float) -> int:
        """How many of the searches took longer than ``bound_ms``."""
        return sum(ms > bound_ms for ms in self.ms)

    def over(self, bound_ms: float) -> float:
        """The share of the searches slower than ``bound_ms``, percent (p99 ≤ bound needs
        it under 1)."""
        return 100.0 * self.slower(bound_ms) / len(self.ms) if self.ms else 0.0

    def by_route(self) -> dict[str, Timed]:
        """The searches split by the route that answered them."""
        parts: dict[str, Timed] = {}
        for ms, route in zip(self.ms, self.route_of, strict=True):
            parts.setdefault(route, Timed()).add(ms, route)
        return parts


@dataclass
class Control:
    """Searches while the same writer writes to a copy of the file: the original, which
    nothing changes, is searched; the machine is as loaded, and the mirror has nothing to
    follow."""

    steady: dict[str, Timed]
    written_per_s: float


@dataclass
class TailResult:
    seconds: float
    sql_only: dict[str, Timed]  # the SQL path under the writer, mirror off
    first: dict[str, Timed]
    steady: dict[str, Timed]
    load_s: float  # store opened -> mirror ready, under the writer
    written_per_s: float  # chunks upserted per second during the steady phase
    regroups: int
    in_place: bool  # the budget left no room for a copy beside the mirror
    reloads: int
    max_pause_ms: float
    inplace_pause_ms: float  # the longest hold of the lock by a step of an in-place regroup
    failures: int
    control: Control  # the same writer on a copy of the file
    worker_cpu: float  # the worker thread's CPU time over the timed searches, share of a core
    worker_phases: dict[str, float]  # the same by phase of its work (``work_clock.py``)
    here_phases: dict[str, float]  # the follows on the tenant searches' thread, by phase
    gc_ms: float  # the longest collection of Python's cyclic GC in this process
    loadavg: tuple[tuple[float, ...], tuple[float, ...]]


def _writer(
    path: str,
    dim: int,
    n: int,
    seed: int,
    stop: Event,
    batches: Synchronized[int],
    done: int = 0,
) -> None:
    """The client: 500 new chunks, then the 500 oldest deleted, until ``stop``; ``done``:
    the chunks an earlier writer wrote (and deleted) in this file already."""
    store = open_memory_store(path, embedding_dim=dim, mirror_bytes=0)
    rng = np.random.default_rng(seed)
    ctx = CallContext(actor="tail-writer")
    oldest = done  # the loaded chunks go first, then the writers' own
    written = done
    while not stop.is_set():
        vectors = rng.standard_normal((WRITE_BATCH, dim), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        users = rng.integers(0, END_USERS, size=WRITE_BATCH)
        agents = rng.integers(0, AGENTS, size=WRITE_BATCH)
        records = [
            {
                "id": f"tail-{written + i:08d}",
                "embedding": vectors[i].tolist(),
                "scope": {
                    "tenant": tenant_name(int(users[i]) % TENANTS),
                    "end_user": user_name(int(users[i])),
                    "agent_self": agent_name(int(agents[i])),
                },
                "distillate": "written during the tail benchmark",
            }
            for i in range(WRITE_BATCH)
        ]
        store.upsert_many(records, idempotency_key=f"tail-{written}", ctx=ctx)
        written += WRITE_BATCH
        doomed = [_name(i, n) for i in range(oldest, oldest + WRITE_BATCH)]
        store.delete_many(doomed)
        oldest += WRITE_BATCH
        batches.value += 1
    store.close()


def tail_written(conn: apsw.Connection) -> int:
    """The chunks the writers of earlier runs on this file wrote, read from the newest id
    (they may have deleted their own oldest too): a later run's writer goes on from there
    (new ids and idempotency keys; the next chunks in ``_name``'s order deleted)."""
    rows = conn.execute(
        "SELECT max(chunk_id) FROM memory_chunks WHERE chunk_id >= 'tail-' AND chunk_id < 'tail.'"
    ).fetchall()
    newest = rows[0][0]
    return 0 if newest is None else int(newest.removeprefix("tail-")) + 1


def _name(i: int, n: int) -> str:
    """The i-th chunk in the order the writer deletes: the loaded ones, then its own."""
    return f"chunk-{i:07d}" if i < n else f"tail-{i - n:08d}"


def _route(before: Counter[str], after: Counter[str]) -> str:
    changed = [k for k in after if after[k] != before.get(k, 0)]
    return changed[0] if changed else "?"


def search_ms(store: RatatoskrMemoryStore, rng: np.random.Generator, case: str, dim: int) -> float:
    """One search of a random unit query in a random scope of ``case``: its wall time, ms."""
    raw = rng.standard_normal(dim)
    query = (raw / np.linalg.norm(raw)).tolist()
    if case == "end_user":
        scope = {"end_user": user_name(int(rng.integers(0, END_USERS)))}
    else:
        scope = {"tenant": tenant_name(int(rng.integers(0, TENANTS)))}
    started = time.perf_counter()
    store.search(query, top_k=10, scope_all=scope)
    return (time.perf_counter() - started) * 1000.0


def _search_for(
    store: RatatoskrMemoryStore,
    rng: np.random.Generator,
    dim: int,
    seconds: float,
    timed: dict[str, Timed],
) -> float:
    """Search for ``seconds``, the cases in turn, each search noted in ``timed`` with its
    route; the seconds it took."""
    routes = store.engine.routes
    started = time.perf_counter()
    i = 0
    while time.perf_counter() - started < seconds:
        case = CASES[i % 2]
        before = Counter(routes)
        ms = search_ms(store, rng, case, dim)
        timed[case].add(ms, _route(before, routes))
        i += 1
    return time.perf_counter() - started


def _started(writer: mp.process.BaseProcess, batches: Synchronized[int]) -> None:
    """Wait until ``writer`` has written ``WARM_BATCHES`` batches."""
    while batches.value < WARM_BATCHES:
        if not writer.is_alive():
            raise RuntimeError("the tail benchmark's writer died")
        time.sleep(0.05)


def _control(
    store: RatatoskrMemoryStore, dim: int, n: int, seconds: float, seed: int, done: int
) -> Control:
    """``seconds`` of searches on ``store`` while a writer like the first one writes to a
    copy of its file (``done``: the chunks the first writer wrote there)."""
    path = store.db.path
    copy = f"{path}.control"
    copy_file(path, copy)
    context = mp.get_context("spawn")
    stop = context.Event()
    batches: Synchronized[int] = context.Value("i", 0)  # type: ignore[assignment]
    args = (copy, dim, n, seed, stop, batches, done)
    writer = context.Process(target=_writer, args=args)
    writer.start()
    rng = np.random.default_rng(seed + 1)
    steady = {case: Timed() for case in CASES}
    try:
        _started(writer, batches)
        written = batches.value
        elapsed = _search_for(store, rng, dim, seconds, steady)
        written = batches.value - written
    finally:
        stop.set()
        writer.join(60)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(copy + suffix):
                os.remove(copy + suffix)
    return Control(steady, written * WRITE_BATCH / elapsed)


def copy_file(source: str, target: str) -> None:
    """Copy the store file ``source`` (its WAL included) to ``target`` in one snapshot,
    through SQLite's backup; ``source`` is only read."""
    src = apsw.Connection(source, flags=apsw.SQLITE_OPEN_READONLY)
    dst = apsw.Connection(target)
    try:
        with dst.backup("main", src, "main") as backup:
            backup.step(-1)
    finally:
        dst.close()
        src.close()


def _sql_path(path: str, dim: int, rng: np.random.Generator) -> dict[str, Timed]:
    """``FIRST`` searches, the cases in turn, through a store with the mirror off."""
    timed = {case: Timed() for case in CASES}
    store = open_memory_store(path, embedding_dim=dim, mirror_bytes=0)
    try:
        for i in range(FIRST):
            case = CASES[i % 2]
            timed[case].add(search_ms(store, rng, case, dim), "sql")
    finally:
        store.close()
    return timed


class GcWatch:
    """The longest collection of Python's cyclic garbage collector while it is installed."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.longest = max(self.longest, time.perf_counter() - self._started)


def run_tail(
    path: str,
    dim: int,
    n: int,
    seconds: float,
    seed: int,
    mirror_bytes: int | None = None,
    done: int = 0,
) -> TailResult:
    """The benchmark on the loaded file at ``path`` (``n`` chunks); see the docstring.
    ``mirror_bytes``: the store's budget (default: the environment's); ``done``: the chunks
    an earlier run's writer wrote (and deleted) in this file already (``tail_written``)."""
    loadavg_start = os.getloadavg()
    context = mp.get_context("spawn")
    stop = context.Event()
    batches: Synchronized[int] = context.Value("i", 0)  # type: ignore[assignment]
    writer = context.Process(target=_writer, args=(path, dim, n, seed, stop, batches, done))
    writer.start()
    rng = np.random.default_rng(seed + 1)
    try:
        _started(writer, batches)
        sql_only = _sql_path(path, dim, rng)
        opened = time.perf_counter()
        store = open_memory_store(path, embedding_dim=dim, mirror_bytes=mirror_bytes)
        first = {case: Timed() for case in CASES}
        steady = {case: Timed() for case in CASES}
        load_s = float("nan")
        try:
            routes = store.engine.routes
            mirror = store.mirror
            i = 0
            while i < FIRST or mirror is None or not mirror.ready:
                case = CASES[i % 2]
                before = Counter(routes)
                ms = search_ms(store, rng, case, dim)
                if i < FIRST:
                    first[case].add(ms, _route(before, routes))
                if mirror is not None and mirror.ready and load_s != load_s:
                    load_s = time.perf_counter() - opened
                i += 1
            if load_s != load_s:
                load_s = time.perf_counter() - opened
            worker = store.engine.worker
            assert mirror is not None and worker is not None
            regroups, reloads, failures = mirror.regroups, mirror.reloads, worker.failures
            worker.max_pause = worker.max_inplace_pause = 0.0
            watch = GcWatch()
            gc.callbacks.append(watch)
            written = batches.value
            cpu_before, phases_before = worker.cpu_seconds(), worker.cpu_by_phase()
            here_before = worker.here_by_phase()
            elapsed = _search_for(store, rng, dim, seconds, steady)
            cpu_after, phases_after = worker.cpu_seconds(), worker.cpu_by_phase()
            here_after = worker.here_by_phase()
            gc.callbacks.remove(watch)
            written = batches.value - written
            stop.set()
            writer.join(60)
            control = _control(store, dim, n, seconds, seed + 2, done + batches.value * WRITE_BATCH)
            result = TailResult(
                seconds=elapsed,
                sql_only=sql_only,
                first=first,
                steady=steady,
                load_s=load_s,
                written_per_s=written * WRITE_BATCH / elapsed,
                regroups=mirror.regroups - regroups,
                in_place=mirror.used_bytes() + copy_bytes(mirror) > mirror.max_bytes,
                reloads=mirror.reloads - reloads,
                max_pause_ms=worker.max_pause * 1000.0,
                inplace_pause_ms=worker.max_inplace_pause * 1000.0,
                failures=worker.failures - failures,
                control=control,
                worker_cpu=(
                    (cpu_after - cpu_before) / elapsed
                    if cpu_before is not None and cpu_after is not None
                    else float("nan")
                ),
                worker_phases=_shares(phases_before, phases_after, elapsed),
                here_phases=_shares(here_before, here_after, elapsed),
                gc_ms=watch.longest * 1000.0,
                loadavg=(loadavg_start, os.getloadavg()),
            )
        finally:
            store.close()
    finally:
        stop.set()
        writer.join(60)
    return result


def _beside_sql(r: TailResult, case: str) -> str:
    """How the first searches after the store opened compare with the SQL path alone under
    the same writer: the worker's load runs beside them, sharing the cores and, between its
    steps, the GIL; a search that waited for the load would take seconds."""
    bound = max(r.sql_only[case].ms, default=float("nan"))
    slowest = max(r.first[case].ms, default=float("nan"))
    return (
        f"slowest {slowest / bound:.1f} x the SQL path's slowest under the writer ({bound:,.1f} ms)"
    )


def tail_lines(
    result: TailResult | None, sql_bounds: dict[str, float], seconds: float
) -> list[str]:
    """The report's section (``sql_bounds``: the SQL path's median ms per case key)."""
    if result is None:
        return []
    r = result

    def row(label: str, timed: Timed, extra: str) -> str:
        return (
            f"| {label} | {len(timed.ms):,} | {timed.pct(50):,.2f} | {timed.pct(99):,.2f} | "
            f"{max(timed.ms, default=float('nan')):,.1f} | {timed.routes['sql']:,} | {extra} |"
        )

    avg = " / ".join(f"{x:.2f}" for x in r.loadavg[0])
    avg_end = " / ".join(f"{x:.2f}" for x in r.loadavg[1])
    lines = [
        "## Searches while a client writes",
        "",
        f"`bench/memory_tail.py` (`--tail {seconds:g}`): one client process writes batches of "
        f"{WRITE_BATCH} new chunks as fast as it can, each followed by a delete of the "
        f"{WRITE_BATCH} oldest ({r.written_per_s:,.0f} chunks/s written during the timed "
        "searches); this process first searches through a store with the mirror off (the SQL "
        f"path under this writer, {FIRST} searches), then opens a store on the file (a worker "
        "starting) and searches on one thread, one end_user and one tenant in turn, "
        "`top_k=10`. Last, the same writer writes to a copy of the file "
        f"({r.control.written_per_s:,.0f} chunks/s) while the searches go on on the original, "
        "which nothing changes: the load on the machine alone, beside what following the "
        "writes adds. Load average at the "
        f"start {avg}, at the end {avg_end}.",
        "",
        "| searches | count | p50 ms | p99 ms | max ms | answered from SQL | |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for case in CASES:
        idle = sql_bounds.get(case)
        extra = f"idle: SQL path median {idle:,.2f} ms" if idle is not None else ""
        lines.append(row(f"SQL path under the writer, mirror off: {case}", r.sql_only[case], extra))
    for case in CASES:
        lines.append(
            row(
                f"first {FIRST} after the store opened: {case}", r.first[case], _beside_sql(r, case)
            )
        )
    targets = {"end_user": "target max ≤ 50 ms, p99 ≤ 3 ms", "tenant": "target max ≤ 50 ms"}
    for case in CASES:
        timed = r.steady[case]
        met = max(timed.ms, default=0.0) <= 50 and (case != "end_user" or timed.pct(99) <= 3)
        verdict = f"{targets[case]}: {'met' if met else '**missed**'}"
        lines.append(row(f"{r.seconds:,.0f} s on the loaded mirror: {case}", timed, verdict))
    for case in CASES:
        timed = r.control.steady[case]
        beside = r.steady[case]
        if case == "end_user":
            extra = (
                f"{timed.over(P99_MS):.2f} % over {P99_MS:g} ms, against "
                f"{beside.over(P99_MS):.2f} % following the writes"
            )
        else:
            extra = f"p99 against {beside.pct(99):,.2f} ms following the writes"
        label = f"the same writer on a copy of the file (nothing to follow): {case}"
        lines.append(row(label, timed, extra))
    lines += route_lines(r.steady["end_user"])
    routes = sum((t.routes for t in r.steady.values()), Counter())
    slowest = sum((t.slowest() for t in r.steady.values()), Counter())
    lines += [
        "",
        f"The worker's first load under the writer took {r.load_s:,.2f} s. During the timed "
        f"searches it regrouped {r.regroups} times "
        + (
            f"(in place: no room for a copy in the budget, the longest step holding the lock "
            f"{r.inplace_pause_ms:,.1f} ms"
            if r.in_place
            else "(beside the mirror"
        )
        + f"; {r.reloads} loads from the file, "
        f"{r.failures} failed steps) and its thread used {100 * r.worker_cpu:,.1f} % of a "
        f"core ({_phases(r.worker_phases)}), and the tenant searches' thread, following the "
        f"log itself after a search, {100 * sum(r.here_phases.values()):,.1f} % "
        f"({_phases(r.here_phases)}); the longest hold of the mirror's lock was "
        f"{r.max_pause_ms:,.1f} ms, and the longest collection of Python's garbage "
        f"collector {r.gc_ms:,.1f} ms. Routes of the timed searches: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(routes.items()))
        + " (current: the file unchanged since this thread's last snapshot; mirror: at the "
        "search's snapshot; overlay: the changes since the mirror's entry read by the search "
        "and ranked beside it; overlay-shared: the same, taken from the read of an earlier "
        "search or of the worker at the same head); "
        "of the searches slower than their case's p99: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(slowest.items()))
        + ".",
    ]
    return lines


def _shares(before: dict[str, float], after: dict[str, float], elapsed: float) -> dict[str, float]:
    """CPU seconds by phase spent between two readings, as shares of a core."""
    return {name: (spent - before.get(name, 0.0)) / elapsed for name, spent in after.items()}


def _phases(shares: dict[str, float]) -> str:
    """The worker's share of a core by phase, largest first (those over 0.05 %)."""
    kept = sorted(((s, k) for k, s in shares.items() if s >= 0.0005), reverse=True)
    return ", ".join(f"{k} {100 * s:.1f} %" for s, k in kept) or "no phase over 0.05 %"


def route_lines(timed: Timed) -> list[str]:
    """The loaded mirror's end_user searches by the route that answered them: what the
    searches over the p99 target are made of."""
    slow = timed.slower(P99_MS)
    lines = [
        "",
        f"The loaded mirror's end_user searches by route: {timed.over(P99_MS):.2f} % of them "
        f"took over {P99_MS:g} ms (the p99 target needs under 1 %).",
        "",
        f"| route | searches | p50 ms | p90 ms | over {P99_MS:g} ms | share of those over "
        f"{P99_MS:g} ms | what it does |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    parts = timed.by_route()
    for route in sorted(parts, key=lambda k: -len(parts[k].ms)):
        part = parts[route]
        share = 100.0 * part.slower(P99_MS) / slow if slow else 0.0
        lines.append(
            f"| {route} | {len(part.ms):,} | {part.pct(50):,.2f} | {part.pct(90):,.2f} | "
            f"{part.over(P99_MS):.1f} % | {share:.0f} % | {ROUTES.get(route, '')} |"
        )
    return lines
