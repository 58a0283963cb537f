"""The memory plane's chunks hash-partitioned by tenant (``RATATOSKR_PG_TENANT_PARTITIONS``).

The store suites run on this layout too (the ``postgresql-partitioned`` backend); these tests
add what only it has: a tenant's search reads one partition, and a chunk id stays unique
across the partitions although no index can say so (writers lock the ids they touch), also
when two writers race on one new id from two tenants.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import InvalidArguments, RevisionMismatch
from ratatoskr.core.filters import Filter
from ratatoskr.memory import rules
from ratatoskr.memory.postgres.search import _select
from ratatoskr.ops.locations import open_memory
from ratatoskr.postgres.database import PgSettings
from ratatoskr.postgres.scope_sql import scope_condition
from ratatoskr.postgres.vectors import Float4Array, register_types
from tests.backends import postgres_schema
from tests.memory.helpers import CTX, DIM, chunk, vec

PARTITIONS = PgSettings(tenant_partitions=4)


@pytest.fixture
def partitioned() -> Iterator[tuple[Any, str]]:
    url = postgres_schema("parts")
    store = open_memory(url, embedding_dim=DIM, pool=PARTITIONS)
    yield store, url
    store.close()


def test_a_tenants_search_reads_one_partition(partitioned: tuple[Any, str]) -> None:
    store, url = partitioned
    records = [
        chunk(f"c{i}", vec(1, i % 7), scope={"tenant": f"t{i % 8}", "end_user": f"u{i % 5}"})
        for i in range(200)
    ] + [chunk("no-tenant", vec(1, 2), scope={"end_user": "u1"})]
    store.upsert_many(records, idempotency_key="fill", ctx=CTX)
    call = rules.parse_search(vec(1, 1), 5, {"tenant": "t3"}, None, None, None, None, DIM)
    condition, params = scope_condition(call.scope_all, call.scope_any)
    with psycopg.connect(url, autocommit=True) as conn:
        register_types(conn)
        conn.execute("ANALYZE memory_chunks")
        plan = [
            r[0]
            for r in conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF) "
                + _select(condition, False, bounded=False, partitioned=True),
                (*params, Float4Array(call.vector), *params, 13),
            ).fetchall()
        ]
    # the scan that ranks the tenant's rows reads t3's partition alone (pruned at planning);
    # the hits' rows are then fetched by key (tenant, chunk_id)
    start = next(i for i, line in enumerate(plan) if "Subquery Scan on c" in line)
    depth = len(plan[start]) - len(plan[start].lstrip())
    ranking = [plan[start]]
    for line in plan[start + 1 :]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        ranking.append(line)
    read = {w for line in ranking for w in line.split() if w.startswith("memory_chunks_p")}
    assert len(read) == 1, "\n".join(plan)
    hits = store.search(vec(1, 1), top_k=100, scope_all={"tenant": "t3"})
    assert len(hits) == 25 and all(h["chunk"]["scope"]["tenant"] == "t3" for h in hits)
    assert store.get("no-tenant")["scope"] == {"end_user": "u1"}
    counts = store.count_by(Filter(), "tenant")
    assert counts.missing == 1 and counts.total == 201


def _ids_stored(url: str, chunk_id: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memory_chunks WHERE chunk_id = %s", (chunk_id.encode(),)
        ).fetchone()
    return int(row[0]) if row else 0


def test_one_new_id_written_from_two_tenants_at_once_is_stored_once(
    partitioned: tuple[Any, str],
) -> None:
    store, url = partitioned
    for round_ in range(15):
        cid = f"race-{round_}"
        start = threading.Barrier(2)
        errors: list[BaseException] = []

        def write(
            tenant: str,
            cid: str = cid,
            start: threading.Barrier = start,
            errors: list[BaseException] = errors,
        ) -> None:
            record = chunk(cid, vec(1, len(tenant)), scope={"tenant": tenant})
            start.wait()
            try:
                store.upsert_many([record], idempotency_key=f"{cid}-{tenant}", ctx=CTX)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(t,)) for t in ("alpha", "beta-gamma")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []
        assert _ids_stored(url, cid) == 1
        assert store.get(cid)["revision"] == 2  # the second write rewrote the first


def test_an_expected_revisions_race_on_a_new_id_has_one_winner(
    partitioned: tuple[Any, str],
) -> None:
    store, url = partitioned
    outcomes: list[str] = []
    start = threading.Barrier(4)

    def write(n: int) -> None:
        record = chunk("contended", vec(1, n), scope={"tenant": f"t{n}"})
        start.wait()
        try:
            store.upsert_many(
                [record],
                idempotency_key=f"k{n}",
                ctx=CallContext(actor=f"a{n}"),
                expected_revisions={"contended": 0},
            )
            outcomes.append("won")
        except RevisionMismatch:
            outcomes.append("lost")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["lost", "lost", "lost", "won"]
    assert _ids_stored(url, "contended") == 1


def test_an_id_and_tenant_past_the_partitioned_keys_limit_are_invalid_not_unavailable(
    partitioned: tuple[Any, str],
) -> None:
    """The primary key is (tenant, chunk_id): 256 + 512 characters of 4-byte UTF-8 are over
    PostgreSQL's 2,704-byte index row. The call is refused as the caller's, not retryable,
    and never reported as PostgreSQL out of reach."""
    store, _ = partitioned
    wide = "".join(chr(0x20000 + (i * 7919) % 40000) for i in range(768))
    record = chunk(wide[:512], vec(1), scope={"tenant": wide[512:]})
    with pytest.raises(InvalidArguments, match="too large for PostgreSQL") as raised:
        store.upsert_many([record], idempotency_key="wide", ctx=CTX)
    assert not raised.value.retryable
    assert store.health()["status"] == "ok"
