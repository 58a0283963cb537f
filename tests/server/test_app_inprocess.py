"""The composite app in one process (as under plain uvicorn): metrics labels, the observer
seam, one-plane apps, and the log formatter's redaction."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from ratatoskr.server.app import create_app
from ratatoskr.server.logs import formatter
from ratatoskr.server.settings import load_settings
from ratatoskr.wire.calllog import CallRecord
from tests.server.harness import KEY, envelope, token, vec

SECRET = "zq-SECRET-in-process"


@pytest.fixture
def settings_env(tmp_path: Path) -> dict[str, str]:
    return {
        "RATATOSKR_MEMORY_DB": str(tmp_path / "memory.db"),
        "RATATOSKR_AFFECT_DB": str(tmp_path / "affect.db"),
        "RATATOSKR_MEMORY_EMBEDDING_DIM": "8",
        "RATATOSKR_HEIMDALL_KEY": KEY,
        "RATATOSKR_AUTH_TARPIT_MS": "0",  # many 401s; the tarpit has its own tests
    }


@pytest.fixture
def client(settings_env: dict[str, str], tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(load_settings(settings_env, cwd=tmp_path))) as c:
        yield c


def _call(client: TestClient, plane: str, verb: str, args: dict[str, object], **kw: object) -> int:
    body = envelope(verb, args)
    bearer = kw.pop("bearer", None) or token(body, plane, verb, **kw)
    response = client.post(
        f"/bifrost/{plane}-call",
        content=body,
        headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"},
    )
    return response.status_code


def test_metrics_label_calls_by_plane_verb_and_outcome(client: TestClient) -> None:
    record = {"id": "c1", "embedding": vec(1), "scope": {"tenant": "acme"}, "distillate": SECRET}
    args: dict[str, object] = {"records": [record], "idempotency_key": "k"}
    assert _call(client, "memory", "upsert_many", args) == 200
    assert _call(client, "memory", "upsert_many", args) == 200
    assert _call(client, "memory", SECRET, {}) == 404
    assert _call(client, "affect", "health", {}, bearer="not-a-token") == 401
    text = client.get("/metrics").text
    assert 'ratatoskr_requests_total{code="ok",plane="memory",verb="upsert_many"} 2.0' in text
    assert (
        'ratatoskr_requests_total{code="memory.unknown_verb",plane="memory",verb="unknown"}' in text
    )
    assert 'ratatoskr_auth_failures_total{reason="invalid_token"} 1.0' in text
    assert 'ratatoskr_idempotent_replays_total{plane="memory",verb="upsert_many"} 1.0' in text
    assert 'ratatoskr_store_records{kind="chunks",plane="memory"} 1.0' in text
    assert 'ratatoskr_plane_health{plane="affect"} 2.0' in text
    assert 'ratatoskr_db_bytes{plane="memory"}' in text
    assert SECRET not in text and "worldtree" not in text and "c1" not in text


def test_a_failing_observer_never_changes_the_answer(client: TestClient) -> None:
    class Broken:
        def call_finished(self, record: CallRecord, duration_seconds: float) -> None:
            raise RuntimeError(SECRET)

    client.app.state.wire.observer = Broken()  # type: ignore[attr-defined]
    assert _call(client, "memory", "health", {}) == 200


def test_a_one_plane_app_refuses_the_other_plane(
    settings_env: dict[str, str], tmp_path: Path
) -> None:
    app = create_app(load_settings(settings_env, cwd=tmp_path), planes=("affect",))
    with TestClient(app) as c:
        assert _call(c, "affect", "health", {}) == 200
        assert _call(c, "memory", "health", {}) == 404
    assert not (tmp_path / "memory.db").exists()


def _format(record: logging.LogRecord) -> dict[str, object]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter("json"))
    handler.emit(record)
    text = stream.getvalue()
    assert SECRET not in text
    result: dict[str, object] = orjson.loads(text)
    return result


def test_unknown_keys_are_dropped_not_printed() -> None:
    record = logging.LogRecord("ratatoskr.x", logging.INFO, __file__, 1, "hello", None, None)
    record.payload = SECRET
    record.bifrost = {"request_id": "r1", "plane": "memory", "records": 3, "note": SECRET}
    line = _format(record)
    assert line["event"] == "bifrost.call"
    assert line["request_id"] == "r1" and line["counts"] == {"records": 3}
    assert "payload" not in line


def test_access_lines_lose_their_query_string() -> None:
    args = ("1.2.3.4:5", "GET", f"/readyz?token={SECRET}", "1.1", 200)
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, "%s %s %s %s %d", args, None
    )
    line = _format(record)
    assert (line["method"], line["path"], line["status"]) == ("GET", "/readyz", 200)
    other = ("1.2.3.4:5", "GET", f"/{SECRET}", "1.1", 404)
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, "%s %s %s %s %d", other, None
    )
    assert _format(record)["path"] == "<other>"


def test_a_record_that_cannot_be_formatted_prints_nothing_of_it() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s", (SECRET, SECRET), None)
    assert _format(record)["event"] == "unformattable log record"


def test_tracebacks_keep_frames_not_messages_or_locals() -> None:
    def explode(content: str) -> None:
        raise ValueError(content)

    try:
        explode(SECRET)
    except ValueError:
        import sys

        record = logging.LogRecord(
            "uvicorn.error", logging.ERROR, __file__, 1, "boom", None, sys.exc_info()
        )
    line = _format(record)
    exception = line["exception"]
    assert isinstance(exception, dict) and exception["type"] == "ValueError"
    assert any("explode" in frame for frame in exception["frames"])


def test_the_wire_answers_a_wrong_method_or_path_in_its_envelope(client: TestClient) -> None:
    """The composite app mounts the wire once its stores are open: its /bifrost answers are
    still the wire's, never Starlette's plain text."""
    wrong_method = client.get("/bifrost/affect-call")
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    body = wrong_method.json()
    assert body["error"]["code"] == "wire.method_not_allowed"
    assert wrong_method.headers["x-request-id"] == body["request_id"]
    unknown = client.post("/bifrost/nothing-here", content=b"{}")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "wire.unknown_route"
