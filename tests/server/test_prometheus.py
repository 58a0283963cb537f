"""A real Prometheus scrapes the server and sees every call, summed over both workers."""

from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.server.harness import Server, call, free_port, ok, poll

PROMETHEUS = shutil.which("prometheus")
CALLS = 48


def test_prometheus_counts_every_call_over_both_workers(server: Server, tmp_path: Path) -> None:
    assert PROMETHEUS is not None, "prometheus is missing: .ci/system-packages installs it"

    def one(i: int) -> None:
        if i % 2:
            ok(call(server.url, "memory", "health", {}))
        else:
            ok(call(server.url, "affect", "describe_store", {}))

    def both_workers_answered() -> bool | None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(one, range(16)))
        made.append(16)
        pids = {line["pid"] for line in server.log_lines() if line.get("event") == "bifrost.call"}
        return True if len(pids) >= 2 and sum(made) >= CALLS else None

    made: list[int] = []
    poll(both_workers_answered, 20, "calls answered by both workers", step=0)
    total = sum(made)
    # each worker wrote its own counter file; a scrape must add them up
    assert len(list(server.metrics_dir.glob("counter_*.db"))) >= 2

    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: ratatoskr\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{server.port}']\n"
    )
    with open(tmp_path / "prometheus.log", "wb") as log:
        prometheus = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=log,
        )
    try:

        def scraped_total() -> float | None:
            try:
                answer = httpx.get(
                    f"http://127.0.0.1:{port}/api/v1/query",
                    params={"query": "sum(ratatoskr_requests_total)"},
                    timeout=2,
                ).json()
            except (httpx.HTTPError, ValueError):
                return None
            result = answer.get("data", {}).get("result", [])
            if not result:
                return None
            value = float(result[0]["value"][1])
            return value if value >= total else None

        assert poll(scraped_total, 30, "Prometheus to scrape the calls", step=0.2) == total
        ok_calls = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/query",
            params={
                "query": 'sum(ratatoskr_requests_total{plane="memory",verb="health",code="ok"})'
            },
        ).json()["data"]["result"]
        assert float(ok_calls[0]["value"][1]) == total / 2
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=20)
