"""The benchmark's data: seeded chunks and their scopes, and the records of a run
(load, cases, timings), shared by ``memory_search`` and ``memory_report``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from rich.console import Console

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

TENANTS = 10
END_USERS = 1000
AGENTS = 50
BATCH = 500
UPSERT_TARGET = 20_000
TOP_K = 10
WARMUP = 5
EXACT_CHECKS = 5
TIE_TOLERANCE = 1e-12
NOTES_START = "<!-- written by hand from here to the end: kept when the report is regenerated -->"
WORDS = (
    "prefers tea over coffee asked about the trip to Bergen mentioned a deadline on Friday "
    "likes concise answers allergic to peanuts works on the billing service plays cello"
)

WORDS_LIST = WORDS.split(" ")

console = Console(stderr=True)


# -- data --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """The seeded chunks: ids, float32 vectors and the scope axes as small integers."""

    ids: list[str]
    matrix: F32
    tenant: I64
    end_user: I64
    agent: I64


def tenant_name(i: int) -> str:
    return f"tenant-{i:02d}"


def user_name(i: int) -> str:
    return f"user-{i:04d}"


def agent_name(i: int) -> str:
    return f"agent-{i:02d}"


def make_dataset(n: int, dim: int, rng: np.random.Generator) -> Dataset:
    """``n`` unit-ish vectors; an end_user belongs to one tenant (user % 10), so a tenant
    holds 10 % of the chunks and an end_user 0.1 %; agents are independent (2 % each)."""
    matrix = rng.standard_normal((n, dim), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    # "unit-ish": a small spread of norms, so cosine is not a plain dot product.
    matrix *= rng.uniform(0.9, 1.1, size=(n, 1)).astype(np.float32)
    end_user = rng.integers(0, END_USERS, size=n)
    return Dataset(
        ids=[f"chunk-{i:07d}" for i in range(n)],
        matrix=matrix,
        tenant=end_user % TENANTS,
        end_user=end_user,
        agent=rng.integers(0, AGENTS, size=n),
    )


def make_records(ds: Dataset, lo: int, hi: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for i in range(lo, hi):
        words = rng.choice(WORDS_LIST, size=8)
        records.append(
            {
                "id": ds.ids[i],
                "embedding": ds.matrix[i].tolist(),
                "scope": {
                    "tenant": tenant_name(int(ds.tenant[i])),
                    "end_user": user_name(int(ds.end_user[i])),
                    "agent_self": agent_name(int(ds.agent[i])),
                },
                "distillate": " ".join(str(w) for w in words),
                "origin": "conversation",
            }
        )
    return records


@dataclass
class LoadResult:
    chunks: int
    upsert_seconds: float
    wall_seconds: float
    batch_seconds: list[float] = field(default_factory=list)
    batch: int = BATCH

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.upsert_seconds

    def window_rate(self, first: bool) -> float:
        """Chunks/s over the first or the last tenth of the batches."""
        k = max(1, len(self.batch_seconds) // 10)
        window = self.batch_seconds[:k] if first else self.batch_seconds[-k:]
        return k * self.batch / sum(window)


@dataclass(frozen=True)
class Query:
    """One timed query: its vector, its filter and the row numbers in scope."""

    vector: F32
    vector_list: list[float]
    scope_all: dict[str, str]
    scope_any: list[dict[str, str]]
    rows: I64  # row numbers in scope (all rows when unscoped)


@dataclass
class Case:
    """One search case. Its target is an absolute median (``target_ms``), a ratio to numpy
    on the same rows (``target_numpy``), or a ratio to the slowest of other cases run alone
    (``target_branches``: a two-branch ``scope_any`` against each branch by itself)."""

    key: str
    label: str
    target_ms: float | None
    target_numpy: float | None = None
    target_branches: tuple[str, ...] = ()
    queries: list[Query] = field(default_factory=list)
    store_ms: list[float] = field(default_factory=list)
    numpy_ms: list[float] = field(default_factory=list)
    vec_ms: list[float] = field(default_factory=list)
    sql_ms: list[float] = field(default_factory=list)
    in_scope: list[int] = field(default_factory=list)
    exact_checked: int = 0
    exact_failures: list[str] = field(default_factory=list)
