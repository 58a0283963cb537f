"""Read-your-writes across two real gunicorn workers, each with its own search mirror: a
search sees every write acknowledged before it was sent, whichever worker answers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.server.harness import Server, envelope, ok, poll, post, token, vec


def memory_call(url: str, verb: str, args: dict[str, Any], request_id: str) -> Any:
    body = envelope(verb, args, request_id=request_id)
    return ok(post(url, "/bifrost/memory-call", body, token(body, "memory", verb)))


def test_alternating_writes_and_searches_on_two_workers(any_server: Server) -> None:
    server = any_server
    url = server.url
    written: list[str] = []
    rounds = 0

    def one_round() -> int | None:
        nonlocal rounds
        i = rounds
        rounds += 1
        chunk_id = f"m{i}"
        record = {
            "id": chunk_id,
            "embedding": vec(1, (i % 7) + 1, i % 3),
            "scope": {"tenant": "acme", "end_user": f"u{i % 2}"},
            "distillate": f"turn {i}",
        }
        args = {"records": [record], "idempotency_key": f"ryw-{i}"}
        memory_call(url, "upsert_many", args, f"ryw-write-{i}")
        written.append(chunk_id)
        if i % 5 == 4:  # a delete, acknowledged before the searches below are sent
            doomed = written.pop(0)
            memory_call(url, "delete_many", {"ids": [doomed]}, f"ryw-delete-{i}")
        search = {"vector": vec(1, 1), "top_k": 1000, "scope_all": {"tenant": "acme"}}

        def ask(n: int) -> list[str]:
            hits = memory_call(url, "search", search, f"ryw-search-{i}-{n}")
            return sorted(h["chunk_id"] for h in hits)

        with ThreadPoolExecutor(max_workers=4) as pool:  # spread over both workers
            answers = list(pool.map(ask, range(4)))
        for answer in answers:
            assert answer == sorted(written), f"round {i}"
        return cross_worker_rounds(server) if rounds >= 10 else None

    def cross_worker_rounds(srv: Server) -> int | None:
        pid_of = {
            line["request_id"]: line["pid"]
            for line in srv.log_lines()
            if str(line.get("request_id", "")).startswith("ryw-")
        }
        crossed = 0
        for i in range(rounds):
            writer = pid_of.get(f"ryw-write-{i}")
            readers = {pid_of.get(f"ryw-search-{i}-{n}") for n in range(4)}
            crossed += writer is not None and any(r not in (None, writer) for r in readers)
        return crossed if crossed >= 5 else None

    crossed = poll(one_round, 60, "searches answered by the worker that did not write", step=0)
    assert crossed >= 5
