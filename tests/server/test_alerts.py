"""The alert rules: promtool accepts them and their unit tests pass, the compose Prometheus
loads them, and every metric they read is one the server exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml
from starlette.testclient import TestClient

from ratatoskr.server.app import create_app
from ratatoskr.server.settings import load_settings
from tests.server.harness import KEY

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROMTOOL = shutil.which("promtool")  # Debian's prometheus package; .ci/run installs it
CAP = 64 << 20


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None, "promtool is missing: apt-get install prometheus"
    return subprocess.run(
        [PROMTOOL, *args], cwd=DEPLOY, capture_output=True, text=True, timeout=120
    )


def test_promtool_checks_the_rules_and_their_unit_tests_pass() -> None:
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "alerts.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_compose_prometheus_loads_the_rules() -> None:
    for name in ("prometheus.yml", "prometheus-postgres.yml"):
        config = promtool("check", "config", name)
        assert config.returncode == 0, config.stdout + config.stderr
        assert "alerts.yml" in config.stdout
    compose = (ROOT / "docker-compose.yml").read_text()
    assert "./deploy/alerts.yml:/etc/prometheus/alerts.yml:ro" in compose


def _rules() -> list[dict[str, str]]:
    groups = yaml.safe_load((DEPLOY / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_every_alert_the_issue_names_is_there() -> None:
    names = {rule["alert"] for rule in _rules()}
    assert {
        "RatatoskrHigh5xxRate",
        "RatatoskrPlaneUnavailable",
        "RatatoskrPlaneDegraded",
        "RatatoskrPlaneDown",
        "RatatoskrDatabaseNearSizeCap",
        "RatatoskrAuthFailureBurst",
        "RatatoskrReplicationLag",
    } <= names


def test_the_rules_read_only_metrics_the_server_exports(tmp_path: Path) -> None:
    env = {
        "RATATOSKR_MEMORY_DB": str(tmp_path / "memory.db"),
        "RATATOSKR_AFFECT_DB": str(tmp_path / "affect.db"),
        "RATATOSKR_MEMORY_EMBEDDING_DIM": "8",
        "RATATOSKR_HEIMDALL_KEY": KEY,
        "RATATOSKR_SQLITE_MAX_DB_BYTES": str(CAP),
    }
    with TestClient(create_app(load_settings(env, cwd=tmp_path))) as client:
        text = client.get("/metrics").text
    exported = {re.sub(r"_total$", "", n) for n in re.findall(r"^# TYPE (\S+) ", text, re.M)}
    samples = set(re.findall(r"^(ratatoskr_\w+)", text, re.M))
    read = {name for rule in _rules() for name in re.findall(r"\b(ratatoskr_\w+)", rule["expr"])}
    families = {re.sub(r"_total$", "", name) for name in read}
    assert families <= exported, families - exported
    # the size cap the near-cap alert divides by is exported per plane when set
    caps = re.findall(r'^ratatoskr_db_max_bytes\{plane="(\w+)"\} (\S+)$', text, re.M)
    assert {plane: float(value) for plane, value in caps} == {"memory": CAP, "affect": CAP}
    assert "ratatoskr_db_bytes" in samples
    # and what the cap limits: the pages in use, at most the cap, not the file with its WAL
    used = re.findall(r'^ratatoskr_db_capped_bytes\{plane="(\w+)"\} (\S+)$', text, re.M)
    assert {plane for plane, _ in used} == {"memory", "affect"}
    assert all(0 < float(value) <= CAP for _, value in used)
