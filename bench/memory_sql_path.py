"""What a search costs on the exact SQL path: while a worker's mirror is still loading (a
cold start, every deploy), with the mirror off (``RATATOSKR_MEMORY_MIRROR_BYTES=0``) or
over its budget. Run by ``bench.memory_search --sql-path N`` on the file it loaded: the
first ``N`` queries of each case through a store opened with the mirror off.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bench.memory_data import TOP_K, Case
from ratatoskr.memory.store import open_memory_store


def time_sql_path(path: str, dim: int, cases: list[Case], count: int) -> dict[str, list[float]]:
    """Milliseconds per query of each case (by key) through the SQL path."""
    store = open_memory_store(path, embedding_dim=dim, mirror_bytes=0)
    timings: dict[str, list[float]] = {}
    try:
        for case in cases:
            timings[case.key] = []
            for query in case.queries[:count]:
                started = time.perf_counter()
                store.search(
                    query.vector_list,
                    top_k=TOP_K,
                    scope_all=query.scope_all or None,
                    scope_any=query.scope_any or None,
                )
                timings[case.key].append((time.perf_counter() - started) * 1000.0)
    finally:
        store.close()
    return timings


def sql_path_lines(cfg: Any, cases: list[Case]) -> list[str]:
    timings: dict[str, list[float]] = getattr(cfg, "sql_path", {}) or {}
    if not timings:
        return []
    lines = [
        "## The SQL path (before the mirror loads, or without it)",
        "",
        "Until a worker's mirror has loaded (seconds after a start; see *Searches while a "
        "client writes*), with `RATATOSKR_MEMORY_MIRROR_BYTES=0`, or over that budget, a "
        "search runs exact SQL: `vec0` KNN unscoped, `WHERE scope ORDER BY "
        "vec_distance_cosine` scoped, the candidates rescored in float64. Same queries as "
        f"above (the first {len(next(iter(timings.values())))} of each case), through a store "
        "opened with the mirror off:",
        "",
        "| case | SQL path median ms | p95 ms | max ms | mirror median ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for case in cases:
        xs = timings.get(case.key)
        if not xs:
            continue
        lines.append(
            f"| {case.label} | {np.median(xs):,.2f} | {np.percentile(xs, 95):,.2f} | "
            f"{max(xs):,.1f} | {np.median(case.store_ms):,.2f} |"
        )
    return lines
