"""What the reliability benchmarks share: a server, a client that mints tokens, figures.

The server is the test harness's (``python -m ratatoskr serve``, gunicorn, 2 workers, real
files under a temporary directory); the benchmark itself is a separate process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

from ratatoskr.wire.tokens import mint_token
from tests.server.harness import KEY, Server, rss_bytes

MIB = 1 << 20


def start(root: Path, dim: int, workers: int = 2, **env: str) -> Server:
    settings = {"RATATOSKR_MEMORY_EMBEDDING_DIM": str(dim), **env}
    server = Server(root, workers=workers, env=settings)
    try:
        return server.start()
    except BaseException:
        server.kill()  # a server that never came up still has a process tree
        raise


def envelope(verb: str, args: dict[str, Any]) -> bytes:
    return orjson.dumps({"wire": "0.6", "verb": verb, "args": args})


class Client:
    """An async client minting a fresh token per call, as Heimdall would."""

    def __init__(self, base: str, connections: int = 64) -> None:
        self.base = base
        limits = httpx.Limits(max_connections=connections)
        self.http = httpx.AsyncClient(timeout=60, limits=limits)

    async def call(
        self, plane: str, verb: str, args: dict[str, Any], scope: dict[str, str]
    ) -> httpx.Response:
        body = envelope(verb, args)
        token = mint_token(
            KEY.encode(), plane=plane, verb=verb, scope=scope, sub="bench", body=body
        )
        return await self.http.post(
            f"{self.base}/bifrost/{plane}-call",
            content=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )

    async def close(self) -> None:
        await self.http.aclose()


def ms(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) * 1000 if xs else float("nan")


def worker_rss_mib(server: Server) -> dict[int, float]:
    return {pid: rss_bytes(pid) / MIB for pid in server.worker_pids()}


def file_bytes(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def metric_files(server: Server) -> int:
    return len(os.listdir(server.metrics_dir)) if server.metrics_dir.exists() else 0
