"""Two ``ratatoskr serve`` processes, no shared local files, over one PostgreSQL.

Each server runs from a directory of its own (its own key file path, metrics directory and
no plane file at all): whatever one server must know of the other's calls (the records, the
jti ledger, the idempotency entries, the cursor secret) can only reach it through the
database. One server is SIGKILLed under write load: nothing it acknowledged is lost, and no
batch is half written.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.backends import postgres_schema
from tests.server.harness import (
    TENANT,
    Server,
    call,
    envelope,
    ok,
    poll,
    post,
    token,
    vec,
)


def pg_server(root: Path, url: str) -> Server:
    root.mkdir()
    return Server(
        root,
        workers=1,
        env={"RATATOSKR_MEMORY_DB": url, "RATATOSKR_AFFECT_DB": url},
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    """Two servers over one fresh schema (module scope: they boot once)."""
    url = postgres_schema("multi")
    base = tmp_path_factory.mktemp("multi")
    a, b = pg_server(base / "a", url), pg_server(base / "b", url)
    try:
        yield a.start(), b.start()
    finally:
        a.kill()
        b.kill()


def chunk(cid: str, *head: float, **extra: Any) -> dict[str, Any]:
    return {"id": cid, "embedding": vec(*head), "scope": TENANT, "distillate": cid, **extra}


def upsert(url: str, records: list[dict[str, Any]], key: str, **args: Any) -> httpx.Response:
    return call(url, "memory", "upsert_many", {"records": records, "idempotency_key": key, **args})


def test_a_write_on_one_server_is_read_at_once_on_the_other(pair: tuple[Server, Server]) -> None:
    a, b = pair
    ok(upsert(a.url, [chunk("ryw-1", 1, 0.5)], "ryw-1"))
    got = ok(call(b.url, "memory", "get", {"chunk_id": "ryw-1"}))
    assert got["revision"] == 1 and got["distillate"] == "ryw-1"
    hits = ok(call(b.url, "memory", "search", {"vector": vec(1, 0.5), "top_k": 1}))
    assert [h["chunk_id"] for h in hits] == ["ryw-1"]
    ok(upsert(b.url, [chunk("ryw-1", 0, 1)], "ryw-2"))
    assert ok(call(a.url, "memory", "get", {"chunk_id": "ryw-1"}))["revision"] == 2

    state = {"id": "mood-1", "scope": TENANT, "valence": 0.25}
    ok(call(a.url, "affect", "put_many", {"records": [state], "idempotency_key": "p1"}))
    assert ok(call(b.url, "affect", "get", {"id": "mood-1"}))["valence"] == 0.25
    events = [{"id": f"ev-{i}", "scope": TENANT, "at": f"2026-01-01T00:00:0{i}Z"} for i in range(3)]
    ok(call(b.url, "affect", "append_events", {"events": events, "idempotency_key": "e1"}))
    page = ok(call(a.url, "affect", "read_events", {"limit": 2}))
    rest = ok(call(b.url, "affect", "read_events", {"limit": 2, "cursor": page["next_cursor"]}))
    assert [e["id"] for e in page["events"] + rest["events"]] == ["ev-0", "ev-1", "ev-2"]


def test_metrics_count_the_shared_records_and_the_pools(pair: tuple[Server, Server]) -> None:
    a, b = pair
    ok(upsert(a.url, [chunk("metric-1", 1, 1)], "metric-1"))
    for server in (a, b):
        text = httpx.get(server.url + "/metrics", timeout=30).text
        samples = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line and not line.startswith("#")
        }
        assert samples['ratatoskr_store_records{kind="chunks",plane="memory"}'] >= 1
        assert samples['ratatoskr_plane_health{plane="memory"}'] == 2
        assert samples['ratatoskr_db_bytes{plane="affect"}'] > 0
        assert samples['ratatoskr_pg_pool_connections{plane="memory",state="open"}'] >= 1


def test_a_token_used_on_one_server_is_refused_on_the_other(pair: tuple[Server, Server]) -> None:
    a, b = pair
    body = envelope("upsert_many", {"records": [chunk("replay-1", 1)], "idempotency_key": "r"})
    bearer = token(body, "memory", "upsert_many")
    assert post(a.url, "/bifrost/memory-call", body, bearer).status_code == 200
    again = post(b.url, "/bifrost/memory-call", body, bearer)
    assert again.status_code == 401
    assert again.json()["error"]["code"] == "auth.token_replayed"


def test_idempotency_replays_and_conflicts_across_servers(pair: tuple[Server, Server]) -> None:
    a, b = pair
    records = [chunk("idem-1", 1, 2), chunk("idem-2", 2, 1)]
    assert ok(upsert(a.url, records, "same-key"))["replayed"] is False
    assert ok(upsert(b.url, records, "same-key")) == {"upserted": 2, "replayed": True}
    conflict = upsert(b.url, [chunk("idem-1", 9)], "same-key")
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "memory.idempotency_conflict"
    assert ok(call(a.url, "memory", "get", {"chunk_id": "idem-1"}))["revision"] == 1


def test_an_optimistic_locking_race_across_servers_has_one_winner(
    pair: tuple[Server, Server],
) -> None:
    a, b = pair
    ok(upsert(a.url, [chunk("race-1", 1)], "race-seed"))
    contenders = 8

    def attempt(i: int) -> httpx.Response:
        url = (a, b)[i % 2].url
        return upsert(url, [chunk("race-1", 1, i)], f"race-{i}", expected_revisions={"race-1": 1})

    with ThreadPoolExecutor(contenders) as pool:
        answers = list(pool.map(attempt, range(contenders)))
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] + [409] * (contenders - 1), [r.json() for r in answers]
    losers = [r.json()["error"]["code"] for r in answers if r.status_code == 409]
    assert set(losers) == {"memory.revision_mismatch"}
    winner = next(i for i, r in enumerate(answers) if r.status_code == 200)
    stored = ok(call(b.url, "memory", "get", {"chunk_id": "race-1"}))
    assert stored["revision"] == 2 and stored["embedding"] == vec(1, winner)


def test_a_server_killed_under_write_load_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    url = postgres_schema("kill")
    victim, survivor = pg_server(tmp_path / "a", url), pg_server(tmp_path / "b", url)
    try:
        victim.start()
        survivor.start()
        acknowledged: list[int] = []
        sent: list[int] = []
        lock = threading.Lock()
        stop = threading.Event()
        batch = 20

        def writer(first: int) -> None:
            n = first
            while not stop.is_set() and n < first + 10_000:
                records = [chunk(f"k-{n}-{j}", 1, n, j) for j in range(batch)]
                with lock:
                    sent.append(n)
                try:
                    response = upsert(victim.url, records, f"kill-{n}")
                except httpx.HTTPError:
                    return  # the server is gone
                if response.status_code == 200:
                    with lock:
                        acknowledged.append(n)
                n += 4

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        poll(lambda: True if len(acknowledged) >= 20 else None, 60, "writes to be acknowledged")
        assert victim.process is not None
        os.killpg(victim.process.pid, signal.SIGKILL)
        victim.process.wait(10)
        stop.set()
        for t in threads:
            t.join(30)
        assert acknowledged
        for n in sent:
            ids = [f"k-{n}-{j}" for j in range(batch)]
            found = ok(call(survivor.url, "memory", "get_many", {"ids": ids}))
            if n in acknowledged:
                assert len(found) == batch, f"batch {n} was acknowledged but is not all there"
            else:
                assert len(found) in (0, batch), f"batch {n} is half written"
    finally:
        victim.kill()
        survivor.kill()
