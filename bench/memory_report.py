"""The Markdown report of ``memory_search``: machine, results, baselines, peers, memory."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
from collections.abc import Sequence
from pathlib import Path

import apsw
import numpy as np
from rich.table import Table

from bench.memory_data import (
    AGENTS,
    END_USERS,
    EXACT_CHECKS,
    NOTES_START,
    TENANTS,
    TIE_TOLERANCE,
    TOP_K,
    UPSERT_TARGET,
    WARMUP,
    Case,
    LoadResult,
    console,
)
from bench.memory_sql_path import sql_path_lines
from bench.memory_tail import tail_lines
from ratatoskr.memory.store import RatatoskrMemoryStore


def median(xs: Sequence[float]) -> float:
    return float(np.median(xs))


def p95(xs: Sequence[float]) -> float:
    return float(np.percentile(xs, 95))


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    found = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return found.group(1).strip() if found else platform.processor() or "unknown"


def cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    found = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    have = set(found.group(1).split()) if found else set()
    return " ".join(f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f") if f in have) or "none"


def ram_gib() -> str:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return "unknown"
    found = re.search(r"^MemTotal:\s*(\d+) kB", text, re.MULTILINE)
    return f"{int(found.group(1)) / 1024 / 1024:.1f} GiB" if found else "unknown"


def machine(store: RatatoskrMemoryStore) -> dict[str, str]:
    with store.db.read() as conn:
        vec_version = str(conn.execute("SELECT vec_version()").fetchall()[0][0])
        debug = str(conn.execute("SELECT vec_debug()").fetchall()[0][0])
    found = re.search(r"Build flags:(.*)", debug)
    vec_flags = (found.group(1).strip() if found else "") or "none (scalar distance code)"
    return {
        "CPU": cpu_model(),
        "CPU SIMD flags": cpu_flags(),
        "cores (os.cpu_count)": str(os.cpu_count()),
        "RAM": ram_gib(),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "SQLite (apsw)": f"{apsw.sqlite_lib_version()} (apsw {apsw.apsw_version()})",
        "sqlite-vec": f"{vec_version}, build flags: {vec_flags}",
        "numpy": np.__version__,
    }


def fmt(x: float) -> str:
    return f"{x:,.2f}" if x < 100 else f"{x:,.0f}"


def verdict(case: Case, cases: Sequence[Case] = ()) -> tuple[str, str]:
    m = median(case.store_ms)
    if case.target_ms is not None:
        return f"median ≤ {case.target_ms:g} ms", "yes" if m <= case.target_ms else "**no**"
    if case.target_numpy is not None:
        met = m <= case.target_numpy * median(case.numpy_ms)
        return f"≤ {case.target_numpy:g}× numpy", "yes" if met else "**no**"
    branches = [c for c in cases if c.key in case.target_branches]
    if branches:
        slowest = max(median(c.store_ms) for c in branches)
        names = " / ".join(c.label.split(" ")[0] for c in branches)
        met = m <= 2.0 * slowest
        return f"≤ 2× one branch {names} ({fmt(slowest)} ms)", "yes" if met else "**no**"
    return "report only", "–"


def exact_text(case: Case) -> str:
    if not case.exact_checked:
        return "–"
    return "yes" if not case.exact_failures else f"**no** ({len(case.exact_failures)} failed)"


def kept_text(out: Path) -> str:
    """Everything after the marker in an existing report: the part written by hand (the
    sections other measurements append at the end included), kept as it is."""
    if not out.exists():
        return ""
    text = out.read_text()
    start = text.find(NOTES_START)
    if start < 0:
        return ""
    return text[start + len(NOTES_START) :].strip("\n")


def peer_lines(cfg: argparse.Namespace, cases: list[Case]) -> list[str]:
    results = getattr(cfg, "peer_results", [])
    if not results:
        return []
    lines = [
        "## Beside the peers (same data, same queries, same run)",
        "",
        "Median ms per query (recall@10 against the exact top 10 in brackets). Chroma answers "
        "from its HNSW index (approximate), LanceDB from a flat scan without an index "
        "(exact up to its float32 arithmetic); scopes are metadata filters (`where`, LanceDB "
        "with `prefilter=True`). Command: the one above with `--peers` "
        "(needs `pip install -e '.[peers]'`).",
        "",
        "| case | ratatoskr | numpy | plain sqlite-vec / candidate SQL | "
        + " | ".join(r.name for r in results)
        + " |",
        "|---|---:|---:|---:|" + "---:|" * len(results),
    ]
    for case in cases:
        base = case.vec_ms if case.key == "unscoped" else case.sql_ms
        cells = []
        for r in results:
            if r.error or case.key not in r.ms:
                cells.append("failed")
            else:
                cells.append(f"{fmt(median(r.ms[case.key]))} ({np.mean(r.recall[case.key]):.2f})")
        lines.append(
            f"| {case.label} | {fmt(median(case.store_ms))} | {fmt(median(case.numpy_ms))} | "
            f"{fmt(median(base))} | " + " | ".join(cells) + " |"
        )
    lines.append("")
    for r in results:
        if r.error:
            lines.append(f"- {r.name} did not run: `{r.error}`")
        else:
            lines.append(f"- {r.name} loaded {cfg.n:,} chunks in {r.load_s:,.1f} s.")
    return lines


def mirror_memory(store: RatatoskrMemoryStore) -> tuple[int, int, int]:
    """(live rows, numpy bytes held, estimated total bytes) of the store's mirror."""
    mirror = store.mirror
    if mirror is None or mirror.over_budget:
        return 0, 0, 0
    arrays = (
        mirror.matrix.nbytes
        + mirror.inv_norms.nbytes
        + mirror.codes.nbytes
        + mirror.alive.nbytes
        + mirror.norms.nbytes
        + mirror.wide.nbytes
        + sum(a.nbytes for a in mirror._by_code + mirror._sorted_codes)
    )
    live = mirror.n - mirror.dead
    return live, arrays, mirror.used_bytes()


def sql_medians(cfg: argparse.Namespace) -> dict[str, float]:
    """The SQL path's median ms per case key (``memory_sql_path``), for the tail section."""
    timings = getattr(cfg, "sql_path", None) or {}
    return {key: float(np.median(xs)) for key, xs in timings.items() if xs}


def rss_bytes() -> int:
    """Anonymous resident memory (``RssAnon``): the mirror's arrays and Python objects, not
    the pages of the memory-mapped database file the load reads (shared and reclaimable)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^RssAnon:\s*(\d+) kB", text, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else 0


def memory_lines(cfg: argparse.Namespace) -> list[str]:
    live, arrays, estimate = cfg.mirror
    if not live:
        return ["## Memory", "", "The mirror was off or over its budget in this run."]
    return [
        "## Memory",
        "",
        f"Each worker's mirror of {live:,} chunks at dimension {cfg.dim}: numpy arrays "
        f"{arrays / 1e6:,.0f} MB ({arrays / live:,.0f} B per chunk: the float32 vector, its "
        "inverse norm and float64 norm, four int32 axis codes, two flags, the id's hash, per "
        "axis the rows in code order and their codes, plus growth headroom when rows were "
        "appended), "
        f"{estimate / live:,.0f} B per chunk as the budget counts it (adding ~240 B of Python "
        "bookkeeping per id and the record JSON the mirror holds). The process's anonymous "
        "resident memory (`RssAnon`, which leaves out the memory-mapped database pages the "
        "load reads) grew by "
        f"{cfg.mirror_rss / 1e6:,.0f} MB ({cfg.mirror_rss / live:,.0f} B per chunk) when a "
        "store opened on the file and its worker loaded the mirror (and, the budget holding "
        "a regroup's copy too, wrote the pages of the arrays its first regroup builds in), "
        f"which took "
        f"{cfg.mirror_load_s:,.2f} s (searches meanwhile run the SQL path). "
        "`RATATOSKR_MEMORY_MIRROR_BYTES` caps it (default 4 GiB; `0` = SQL search only).",
    ]


def result_lines(cfg: argparse.Namespace, loaded: LoadResult, cases: list[Case]) -> list[str]:
    """The results table: each case against its target, then the load's write rate."""
    lines = [
        "## Results",
        "",
        "| case | in-scope rows (mean) | ratatoskr median ms | p95 ms | numpy median ms | "
        "ratio (store / numpy) | target | met? | exact |",
        "|---|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for case in cases:
        target, met = verdict(case, cases)
        ratio = median(case.store_ms) / median(case.numpy_ms)
        lines.append(
            f"| {case.label} | {np.mean(case.in_scope):,.0f} | {fmt(median(case.store_ms))} | "
            f"{fmt(p95(case.store_ms))} | {fmt(median(case.numpy_ms))} | {ratio:,.1f}× | "
            f"{target} | {met} | {exact_text(case)} |"
        )
    upsert_met = loaded.chunks_per_s >= UPSERT_TARGET
    lines.append(
        f"| upsert_many, batches of {cfg.batch} (the load) | – | "
        f"**{loaded.chunks_per_s:,.0f} chunks/s** | – | – | – | ≥ {UPSERT_TARGET:,} chunks/s | "
        f"{'yes' if upsert_met else '**no**'} | – |"
    )
    return lines


def missed_lines(loaded: LoadResult, cases: list[Case]) -> list[str]:
    """The targets this run missed, each with what numpy took on the same rows."""
    lines = ["## Targets missed", ""]
    for case in cases:
        target, met = verdict(case, cases)
        if met != "**no**":
            continue
        lines.append(
            f"- {case.label}: median {fmt(median(case.store_ms))} ms against {target}; numpy "
            f"ranks the same {np.mean(case.in_scope):,.0f} rows (gathered beforehand) in "
            f"{fmt(median(case.numpy_ms))} ms."
        )
    if loaded.chunks_per_s < UPSERT_TARGET:
        lines.append(
            f"- upsert_many: {loaded.chunks_per_s:,.0f} chunks/s against ≥ "
            f"{UPSERT_TARGET:,} chunks/s ({loaded.chunks_per_s / UPSERT_TARGET:.0%} of the target)."
        )
    if len(lines) == 2:
        lines.append("None.")
    return lines


def baseline_lines(cfg: argparse.Namespace, loaded: LoadResult, cases: list[Case]) -> list[str]:
    """Each case beside plain SQL, and the load's batches."""
    lines = [
        "## Beside plain SQL",
        "",
        "| case | ratatoskr median ms | baseline | baseline median ms | p95 ms |",
        "|---|---:|---|---:|---:|",
    ]
    for case in cases:
        if case.key == "unscoped":
            name, xs = "plain sqlite-vec: `vec0` KNN k=10 over the whole table", case.vec_ms
        else:
            name = "the store's candidate SQL alone (`WHERE scope ORDER BY vec_distance_cosine`)"
            xs = case.sql_ms
        lines.append(
            f"| {case.label} | {fmt(median(case.store_ms))} | {name} | {fmt(median(xs))} | "
            f"{fmt(p95(xs))} |"
        )
    per_batch = [s * 1000 for s in loaded.batch_seconds]
    lines += [
        "",
        f"Load: {cfg.n:,} chunks in {len(loaded.batch_seconds)} `upsert_many` calls of "
        f"{cfg.batch}; {loaded.upsert_seconds:,.1f} s inside `upsert_many` "
        f"(**{loaded.chunks_per_s:,.0f} chunks/s**; batch median {median(per_batch):,.0f} ms, "
        f"p95 {p95(per_batch):,.0f} ms), {loaded.wall_seconds:,.1f} s wall including building "
        "the JSON-ready dicts client-side. First tenth of the batches: "
        f"{loaded.window_rate(True):,.0f} chunks/s; last tenth: "
        f"{loaded.window_rate(False):,.0f} chunks/s.",
    ]
    return lines


def method_lines(cfg: argparse.Namespace) -> list[str]:
    """How the figures above were taken."""
    return [
        "## Data and method",
        "",
        f"- {cfg.n:,} chunks, each with scope `{{tenant, end_user, agent_self}}`: {TENANTS} "
        f"tenants (a tenant holds 10 %), {END_USERS:,} end users (0.1 % each, every user "
        f"inside one tenant), {AGENTS} agents (2 % each, independent of the user); a short "
        "`distillate` string and a random float32 embedding with norm in [0.9, 1.1], "
        f"seeded (seed {cfg.seed}), loaded through `upsert_many` into a file-backed store "
        "(WAL, 64 KiB pages, a temporary directory).",
        f"- {cfg.queries} random unit query vectors per case (after {WARMUP} untimed warm-up "
        f"queries), `top_k={TOP_K}`, a fresh random end_user / agent / tenant per query. "
        "Times are wall-clock per call (`time.perf_counter`), through the public "
        "`RatatoskrMemoryStore.search(vector: list[float], ...)`, so they include argument "
        "validation and building the hits (the record JSON is parsed back, embedding "
        "included).",
        "- **numpy** column: brute-force cosine top-10 over the same float32 vectors, "
        "rows pre-normalised, as one float32 mat-vec plus `argpartition`. For the scoped "
        "cases numpy runs on **the in-scope rows gathered into a matrix slice beforehand** "
        "(the slice preparation is not timed), so it measures only the ranking work the "
        "store's filter has to do on top of finding the rows. numpy's BLAS is held to one "
        "thread (`OPENBLAS_NUM_THREADS=1`), as in every process the server starts "
        "(`ratatoskr/core/blas.py`): the store answers a query on one thread.",
        "- **ratios**: each query is timed against the store, numpy and the SQL baseline back "
        "to back, and a ratio is the store's median over numpy's median for the same case in "
        "the same run, so both sides ran under the same load. A two-branch `scope_any` is "
        "compared with the slower of its branches run alone.",
        f"- **exact**: for the first {EXACT_CHECKS} timed queries of each case the store's "
        "ids are compared, in order, with a float64 numpy brute force over the in-scope rows "
        f"(ties at equal scores allowed within {TIE_TOLERANCE:g}).",
    ]


def machine_lines(
    info: dict[str, str], loadavg: tuple[tuple[float, ...], tuple[float, ...]]
) -> list[str]:
    """The machine the run took place on, and how loaded it was."""
    return [
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in info.items()],
        f"| load average (1/5/15 min) at start | {' / '.join(f'{x:.2f}' for x in loadavg[0])} |",
        f"| load average at end | {' / '.join(f'{x:.2f}' for x in loadavg[1])} |",
        "",
        "A shared machine (other work runs beside the benchmark) makes absolute times noisy; "
        "the ratios, taken within one run, are the figures to compare.",
    ]


def write_report(
    out: Path,
    command: str,
    info: dict[str, str],
    cfg: argparse.Namespace,
    loaded: LoadResult,
    cases: list[Case],
    db_bytes: int,
    loadavg: tuple[tuple[float, ...], tuple[float, ...]],
    elapsed_s: float,
) -> None:
    """The report: the generated part, then the marker and the hand-written part of the
    report already at ``out``, kept as it is."""
    lines = [
        "# Memory store performance",
        "",
        f"`RatatoskrMemoryStore.search` and `upsert_many` on a store holding **{cfg.n:,} "
        f"chunks at dimension {cfg.dim}**, run on "
        f"{dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')} with:",
        "",
        "```",
        command,
        "```",
        "",
        f"The run took {elapsed_s / 60:.1f} min; the database file after the load held "
        f"{db_bytes / 1e6:,.0f} MB. Everything before the hand-written marker below is "
        "written by that command (`bench/memory_search.py`); everything after it is written "
        "by hand and kept when the command runs again.",
    ]
    sections = [
        result_lines(cfg, loaded, cases),
        missed_lines(loaded, cases),
        baseline_lines(cfg, loaded, cases),
        peer_lines(cfg, cases),
        sql_path_lines(cfg, cases),
        tail_lines(getattr(cfg, "tail_result", None), sql_medians(cfg), cfg.tail),
        memory_lines(cfg),
        method_lines(cfg),
        machine_lines(info, loadavg),
        [NOTES_START, *filter(None, [kept_text(out)])],
    ]
    for section in sections:
        if section:
            lines += ["", *section]
    lines.append("")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))


def print_summary(cases: list[Case], loaded: LoadResult) -> None:
    table = Table(title="memory store search")
    for col in ("case", "store med ms", "p95", "numpy med ms", "ratio", "baseline ms", "met?"):
        table.add_column(col)
    for case in cases:
        base = case.vec_ms if case.key == "unscoped" else case.sql_ms
        table.add_row(
            case.key,
            fmt(median(case.store_ms)),
            fmt(p95(case.store_ms)),
            fmt(median(case.numpy_ms)),
            f"{median(case.store_ms) / median(case.numpy_ms):,.1f}x",
            fmt(median(base)),
            verdict(case, cases)[1].strip("*")
            + (" exact" if not case.exact_failures else " INEXACT"),
        )
    table.add_row("upsert_many", f"{loaded.chunks_per_s:,.0f}/s", "", "", "", "", "")
    console.print(table)
