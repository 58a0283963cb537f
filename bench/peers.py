"""Chroma and LanceDB on the benchmark's data, in the same run (``--peers``).

Optional: needs the ``peers`` extra (``pip install -e '.[peers]'``); never part of
``make test``. Each peer gets the same vectors and scopes, is queried with the same query
vectors and filters (scopes as metadata ``where`` filters), and is timed per call. Chroma
ranks with its HNSW index (approximate), LanceDB without an index (a flat, exact scan), so
each row reports recall@10 against the exact top 10 beside the latency.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # the ``peers`` extra: imported where used, when it is installed
    from lancedb.query import LanceVectorQueryBuilder

F32 = npt.NDArray[np.float32]


@dataclass
class PeerResult:
    name: str
    load_s: float = 0.0
    error: str = ""
    ms: dict[str, list[float]] = field(default_factory=dict)
    recall: dict[str, list[float]] = field(default_factory=dict)


def _conjunction(scope: dict[str, str]) -> dict[str, Any]:
    terms = [{axis: value} for axis, value in sorted(scope.items())]
    return terms[0] if len(terms) == 1 else {"$and": terms}


def chroma_where(scope_all: dict[str, str], scope_any: list[dict[str, str]]) -> Any:
    parts = [_conjunction(scope_all)] if scope_all else []
    if scope_any:
        parts.append({"$or": [_conjunction(e) for e in scope_any]})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def lance_where(scope_all: dict[str, str], scope_any: list[dict[str, str]]) -> str | None:
    def conj(scope: dict[str, str]) -> str:
        return " AND ".join(f"{axis} = '{value}'" for axis, value in sorted(scope.items()))

    parts = [conj(scope_all)] if scope_all else []
    if scope_any:
        parts.append("(" + " OR ".join(f"({conj(e)})" for e in scope_any) + ")")
    return " AND ".join(parts) or None


def run_peers(
    ids: list[str],
    matrix: F32,
    scopes: list[dict[str, str]],
    cases: Sequence[Any],
    exact_top: Callable[[Any], list[str]],
    log: Callable[[str], None],
) -> list[PeerResult]:
    """Load both peers and time every case's queries; a peer that fails is reported."""
    results = []
    for name, runner in (("Chroma", _chroma), ("LanceDB", _lance)):
        result = PeerResult(name)
        try:
            runner(result, ids, matrix, scopes, cases, exact_top, log)
        except Exception as exc:  # a missing or broken peer is a finding, not a crash
            result.error = f"{type(exc).__name__}: {str(exc)[:200]}"
            log(f"{name} failed: {result.error}")
        results.append(result)
    return results


def _time_cases(
    result: PeerResult,
    cases: Sequence[Any],
    exact_top: Callable[[Any], list[str]],
    ask: Callable[[Any], list[str]],
) -> None:
    for case in cases:
        times: list[float] = []
        recalls: list[float] = []
        for i, query in enumerate(case.queries):
            t0 = time.perf_counter()
            got = ask(query)
            spent = (time.perf_counter() - t0) * 1000.0
            if i < 5:
                continue  # warm-up, as for the store
            times.append(spent)
            if len(recalls) < 20:
                want = exact_top(query)
                recalls.append(len(set(got) & set(want)) / max(1, len(want)))
        result.ms[case.key] = times
        result.recall[case.key] = recalls


def _chroma(
    result: PeerResult,
    ids: list[str],
    matrix: F32,
    scopes: list[dict[str, str]],
    cases: Sequence[Any],
    exact_top: Callable[[Any], list[str]],
    log: Callable[[str], None],
) -> None:
    import chromadb

    workdir = tempfile.mkdtemp(prefix="ratatoskr-chroma-")
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    client = chromadb.PersistentClient(path=workdir)
    collection = client.create_collection("bench", metadata={"hnsw:space": "cosine"})
    t0 = time.perf_counter()
    step = 5000
    for lo in range(0, len(ids), step):
        collection.add(
            ids=ids[lo : lo + step],
            embeddings=matrix[lo : lo + step],
            metadatas=scopes[lo : lo + step],  # type: ignore[arg-type]
        )
    result.load_s = time.perf_counter() - t0
    log(f"Chroma loaded in {result.load_s:,.1f} s")

    def ask(query: Any) -> list[str]:
        where = chroma_where(query.scope_all, query.scope_any)
        found = collection.query(query_embeddings=[query.vector], n_results=10, where=where)
        return list(found["ids"][0])

    _time_cases(result, cases, exact_top, ask)


def _lance(
    result: PeerResult,
    ids: list[str],
    matrix: F32,
    scopes: list[dict[str, str]],
    cases: Sequence[Any],
    exact_top: Callable[[Any], list[str]],
    log: Callable[[str], None],
) -> None:
    import lancedb
    import pyarrow as pa

    workdir = tempfile.mkdtemp(prefix="ratatoskr-lance-")
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    db = lancedb.connect(workdir)
    dim = matrix.shape[1]
    t0 = time.perf_counter()
    table = None
    step = 50_000
    for lo in range(0, len(ids), step):
        part = slice(lo, lo + step)
        batch = pa.table(
            {
                "id": ids[part],
                "tenant": [s["tenant"] for s in scopes[part]],
                "end_user": [s["end_user"] for s in scopes[part]],
                "agent_self": [s["agent_self"] for s in scopes[part]],
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(matrix[part].reshape(-1)), dim
                ),
            }
        )
        if table is None:
            table = db.create_table("bench", batch)
        else:
            table.add(batch)
    assert table is not None
    result.load_s = time.perf_counter() - t0
    log(f"LanceDB loaded in {result.load_s:,.1f} s")

    def ask(query: Any) -> list[str]:
        vectors = cast("LanceVectorQueryBuilder", table.search(query.vector))  # a vector query
        search = vectors.metric("cosine").limit(10)
        where = lance_where(query.scope_all, query.scope_any)
        if where:
            search = search.where(where, prefilter=True)
        return [str(x) for x in search.to_arrow()["id"].to_pylist()]

    _time_cases(result, cases, exact_top, ask)
