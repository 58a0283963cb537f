"""The SQL route (a store without a mirror, or one still loading) answers exactly as the
reference store, to the last bit: crowded cuts widened, unscoped searches through ``vec0``,
embeddings sent in float64 given back as sent. And each of its statements returns one row,
so a search gives the GIL away once per statement rather than once per row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ratatoskr.memory.reference import ReferenceMemoryStore
from ratatoskr.memory.store import open_memory_store
from tests.memory.helpers import CTX, DIM, chunk
from tests.memory.test_search_fast import FILTERS, exactly

USERS = ["u0", "u1", "u2"]


@st.composite
def records(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chunks over a few scopes, with vectors from a small grid (exact ties, duplicates:
    crowded cuts) or spread (sent in float64: not float32-exact), or spread at magnitudes
    from 1e-40 to 1e37 (sqlite-vec's float32 distance says nothing of the rows at either
    end: their partial index makes them candidates)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    grid = draw(st.booleans())
    magnitudes = not grid and draw(st.booleans())
    out = []
    for i in range(draw(st.integers(1, 120))):
        if grid:
            vector = rng.integers(-1, 2, size=DIM).astype(float)
            vector[0] = 1.0  # never all zero
        else:
            vector = rng.standard_normal(DIM)
            if magnitudes:
                vector *= 10.0 ** int(rng.integers(-40, 38))
                vector[0] = vector[0] or 1.0  # not all zero once in float32
        scope = {"tenant": f"t{i % 2}", "end_user": USERS[int(rng.integers(0, len(USERS)))]}
        out.append(chunk(f"c{i:04d}", vector.tolist(), scope=scope))
    return out


@settings(max_examples=30)
@given(records(), st.integers(0, 2**32 - 1))
def test_the_sql_route_is_the_reference_to_the_last_bit(
    tmp_path_factory: Any, batch: list[dict[str, Any]], seed: int
) -> None:
    path = str(tmp_path_factory.mktemp("sql") / "m.db")
    ours = open_memory_store(path, embedding_dim=DIM, mirror_bytes=0)
    ref = ReferenceMemoryStore(DIM)
    rng = np.random.default_rng(seed)
    try:
        for store in (ours, ref):
            store.upsert_many(batch, idempotency_key="k", ctx=CTX)
        for flt in FILTERS:
            query = rng.integers(-1, 2, size=DIM).astype(float)
            query[0] = query[0] or 1.0
            for top_k in (1, 4, 25):
                for include in (None, {"embedding": False}):
                    args = {"top_k": top_k, "include": include, **flt}
                    expected = exactly(ref.search(query.tolist(), **args))
                    assert exactly(ours.search(query.tolist(), **args)) == expected, args
        assert ours.engine.routes["sql"] > 0
    finally:
        ours.close()


def test_each_statement_of_a_search_returns_one_row(tmp_path: Path) -> None:
    """Forty candidates and a crowded cut (every vector equal), scoped and not: the search
    steps each statement once for its one row, however many rows it ranks."""
    store = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM, mirror_bytes=0)
    try:
        same = [1.0] + [0.0] * (DIM - 1)
        batch = [chunk(f"c{i:02d}", same, scope={"end_user": "u0"}) for i in range(40)]
        store.upsert_many(batch, idempotency_key="k", ctx=CTX)
        conn = store.db.connection()
        rows: list[tuple[Any, ...]] = []

        def traced(cursor: apsw.Cursor, row: tuple[Any, ...]) -> tuple[Any, ...]:
            rows.append(row)
            return row

        conn.row_trace = traced
        scopes: list[dict[str, Any]] = [{}, {"scope_all": {"end_user": "u0"}}]
        for scope in scopes:
            rows.clear()
            hits = store.search(same, top_k=30, **scope)
            assert [h["chunk_id"] for h in hits] == [f"c{i:02d}" for i in range(30)]
            # the far-norm rows' ids (none), the candidates, then the crowded cut's
            # widening: one row each
            assert len(rows) == 3, scope
    finally:
        store.close()
