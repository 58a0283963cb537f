"""A worker process for the replay test: its own app over the shared store, one request.

Usage: python -m tests.wire.replay_worker LOCATION (a file or a postgresql:// URL; the jti
ledger is the one beside it); the body and token come on stdin as JSON; prints the HTTP
status and the error code (or ``ok``).
"""

from __future__ import annotations

import sys

import orjson
from starlette.testclient import TestClient

from ratatoskr.ops.locations import open_ledger, open_memory
from tests.apps import memory_app
from tests.wire.helpers import DIM, KEY, post


def main() -> None:
    location = sys.argv[1]
    job = orjson.loads(sys.stdin.buffer.read())
    store = open_memory(location, embedding_dim=DIM)
    with TestClient(memory_app(store, KEY, ledger=open_ledger(location))) as client:
        response = post(client, job["body"].encode(), job["token"])
    body = response.json()
    print(response.status_code, "ok" if body["ok"] else body["error"]["code"])


if __name__ == "__main__":
    main()
