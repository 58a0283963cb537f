"""A worker process for the replay test: its own app over the shared files, one request.

Usage: python -m tests.wire.replay_worker DB LEDGER; the body and token come on stdin as
JSON; prints the HTTP status and the error code (or ``ok``).
"""

from __future__ import annotations

import sys

import orjson
from starlette.testclient import TestClient

from ratatoskr.memory.store import open_memory_store
from tests.apps import memory_app
from tests.wire.helpers import DIM, KEY, post


def main() -> None:
    db, ledger = sys.argv[1], sys.argv[2]
    job = orjson.loads(sys.stdin.buffer.read())
    store = open_memory_store(db, embedding_dim=DIM)
    with TestClient(memory_app(store, KEY, ledger=ledger)) as client:
        response = post(client, job["body"].encode(), job["token"])
    body = response.json()
    print(response.status_code, "ok" if body["ok"] else body["error"]["code"])


if __name__ == "__main__":
    main()
