"""Replay protection: a jti runs one mutating call, across processes; reads record nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from starlette.testclient import TestClient

from ratatoskr.memory.store import RatatoskrMemoryStore
from ratatoskr.sqlite.jti import JtiLedger
from tests.wire.helpers import call, envelope, error_code, ok, post, record, token_for, vec

ROOT = Path(__file__).resolve().parents[2]


def _worker(location: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.wire.replay_worker", location],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_replay_across_two_processes_sharing_the_ledger(
    store: RatatoskrMemoryStore, ledger: JtiLedger, location: str
) -> None:
    """Each process opens the store and the ledger beside it (created once by the
    ``ledger`` fixture, as the server's start would)."""
    args = {"records": [record("a", vec(1))], "idempotency_key": "k"}
    body = envelope("upsert_many", args)
    token = token_for(body, verb="upsert_many")
    job = orjson.dumps({"body": body.decode(), "token": token})
    workers = [_worker(location) for _ in range(2)]
    outputs = []
    for worker in workers:
        out, err = worker.communicate(job, timeout=60)
        assert worker.returncode == 0, err.decode()
        outputs.append(out.decode().strip())
    assert sorted(outputs) == ["200 ok", "401 auth.token_replayed"]
    assert store.get("a") is not None


def test_read_verbs_do_not_record_the_jti(client: TestClient, ledger: JtiLedger) -> None:
    for verb, args in (
        ("search", {"vector": vec(1), "top_k": 3}),
        ("get", {"chunk_id": "a"}),
        ("get_many", {"ids": ["a"]}),
        ("describe_store", {}),
        ("health", {}),
    ):
        body = envelope(verb, args)
        token = token_for(body, verb=verb)
        ok(post(client, body, token))
        ok(post(client, body, token))
    assert ledger.count() == 0


def test_mutating_verbs_record_their_jti(client: TestClient, ledger: JtiLedger) -> None:
    ok(call(client, "upsert_many", {"records": [record("a", vec(1))], "idempotency_key": "k"}))
    ok(call(client, "delete_many", {"ids": ["a"]}))
    assert ledger.count() == 2


def test_a_retry_is_a_new_token_with_the_same_idempotency_key(client: TestClient) -> None:
    args = {"records": [record("a", vec(1))], "idempotency_key": "k"}
    body = envelope("upsert_many", args)
    token = token_for(body, verb="upsert_many")
    assert ok(post(client, body, token))["replayed"] is False
    assert error_code(post(client, body, token)) == "auth.token_replayed"
    assert ok(post(client, body, token_for(body, verb="upsert_many")))["replayed"] is True


def test_the_ledger_prunes_expired_entries(tmp_path: Path) -> None:
    now = [1000.0]
    guard = JtiLedger(str(tmp_path / "l.db"), clock=lambda: now[0])
    assert guard.claim("a", 1010.0) is True
    assert guard.claim("a", 1010.0) is False
    now[0] = 1011.0
    assert guard.claim("b", 1020.0) is True
    assert guard.prune() == 1
    assert guard.count() == 1
    assert guard.claim("a", 1030.0) is True  # an expired jti cannot verify; reuse is harmless
    guard.close()
