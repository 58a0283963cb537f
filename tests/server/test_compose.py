"""The compose file validates, and its stop grace period outlasts gunicorn's graceful timeout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ratatoskr.server.replication import SUPERVISOR_STOP_SECONDS
from ratatoskr.sqlite.replica import CREDENTIAL_ENV

ROOT = Path(__file__).resolve().parents[2]
DOCKER_COMPOSE = shutil.which("docker-compose")
NAMES = ("worker_class", "max_requests", "control_socket_disable", "graceful_timeout", "timeout")


def gunicorn_settings() -> dict[str, Any]:
    """The packaged gunicorn config, read in a child: importing it sets the metrics variable."""
    code = (
        "import json, ratatoskr.server.gunicorn_conf as c; "
        f"print(json.dumps({{n: getattr(c, n) for n in {NAMES!r}}}))"
    )
    with tempfile.TemporaryDirectory() as metrics:
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_docker_compose_config_validates() -> None:
    assert DOCKER_COMPOSE is not None, "docker-compose is missing: .ci/system-packages installs it"
    done = subprocess.run(
        [DOCKER_COMPOSE, "-f", "docker-compose.yml", "config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    import yaml

    # the ratatoskr service's own (other services, such as postgres, come first in the output)
    service = yaml.safe_load(done.stdout)["services"]["ratatoskr"]
    grace = re.fullmatch(r"(\d+)s", str(service["stop_grace_period"]))
    assert grace is not None
    # the workers' graceful stop, then Litestream's final sync (the supervisor's wait)
    last_sync = SUPERVISOR_STOP_SECONDS + 2
    assert int(grace.group(1)) > gunicorn_settings()["graceful_timeout"] + last_sync
    assert "heimdall_key" in done.stdout and "ratatoskr-data" in done.stdout
    for setting in ("RATATOSKR_REPLICA_URL", "RATATOSKR_REPLICA_MAX_LAG", "ratatoskr-backups"):
        assert setting in done.stdout
    # every credential variable Litestream reads for the documented replica kinds
    for credential in (
        *CREDENTIAL_ENV[:5],
        "LITESTREAM_AZURE_ACCOUNT_KEY",
        "LITESTREAM_SFTP_PASSWORD",
    ):
        assert credential in service["environment"], credential
    assert "GOOGLE_APPLICATION_CREDENTIALS" in service["environment"]


def test_gunicorn_settings_are_the_production_ones() -> None:
    conf = gunicorn_settings()
    assert conf["worker_class"] == "ratatoskr.server.gunicorn_worker.ServeWorker"
    assert conf["max_requests"] == 0
    assert conf["control_socket_disable"] is True
    assert conf["graceful_timeout"] < conf["timeout"]
    deploy = (ROOT / "deploy" / "gunicorn.conf.py").read_text()
    assert "from ratatoskr.server.gunicorn_conf import *" in deploy


def test_the_dockerfile_runs_what_the_tests_run() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["python", "-m", "ratatoskr", "serve"]' in dockerfile
    assert "USER ratatoskr" in dockerfile and "/healthz" in dockerfile
    assert 'VOLUME ["/data"]' in dockerfile


def test_the_postgres_profile_runs_two_stateless_servers_over_pgvector() -> None:
    import yaml

    assert DOCKER_COMPOSE is not None, "docker-compose is missing: .ci/system-packages installs it"
    done = subprocess.run(
        [DOCKER_COMPOSE, "-f", "docker-compose.yml", "--profile", "postgres", "config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    assert "profiles" not in services["ratatoskr"]  # the default stays one SQLite server
    ports = set()
    for name in ("ratatoskr-a", "ratatoskr-b"):
        server = services[name]
        assert server["profiles"] == ["postgres"]
        env = server["environment"]
        for setting in ("RATATOSKR_MEMORY_DB", "RATATOSKR_AFFECT_DB"):
            assert env[setting].startswith("postgresql://ratatoskr@postgres:5432/")
        assert "volumes" not in server  # nothing local: stateless
        assert server["depends_on"]["postgres"]["condition"] == "service_healthy"
        ports.add(
            server["ports"][0]["published"]
            if isinstance(server["ports"][0], dict)
            else server["ports"][0]
        )
    assert len(ports) == 2
    # with the postgres profile's Prometheus config, all three servers are scraped
    chosen = subprocess.run(
        [DOCKER_COMPOSE, "-f", "docker-compose.yml", "--profile", "postgres", "config"],
        cwd=ROOT,
        env={**os.environ, "PROMETHEUS_CONFIG": "prometheus-postgres.yml"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    prometheus = yaml.safe_load(chosen.stdout)["services"]["prometheus"]
    assert "--config.file=/etc/prometheus/prometheus-postgres.yml" in prometheus["command"]
    scraped = yaml.safe_load((ROOT / "deploy" / "prometheus-postgres.yml").read_text())
    targets = scraped["scrape_configs"][0]["static_configs"][0]["targets"]
    assert set(targets) == {"ratatoskr:8000", "ratatoskr-a:8000", "ratatoskr-b:8000"}
