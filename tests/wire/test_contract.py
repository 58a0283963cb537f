"""The seed contract's TESTS for build_memory_provider_app: builds_app and bad_key."""

from __future__ import annotations

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from ratatoskr.memory.reference import ReferenceMemoryStore
from ratatoskr.provider.memory_store import RatatoskrMemoryStore, build_memory_provider_app
from tests.wire.helpers import DIM, KEY, call, envelope, error_code, ok, post, token_for


def _post_routes(app: object) -> set[str]:
    return {
        r.path
        for r in app.routes  # type: ignore[attr-defined]
        if isinstance(r, Route) and r.methods is not None and "POST" in r.methods
    }


def test_builds_app(store: RatatoskrMemoryStore) -> None:
    app = build_memory_provider_app(store, KEY)
    assert {"/bifrost/handshake", "/bifrost/memory-call"} <= _post_routes(app)
    with TestClient(app) as client:
        result = ok(call(client, "handshake", {}, plane="*"))
        assert result["consumer_id"] == "ratatoskr"
        assert ok(call(client, "describe_store", {}))["optimistic_locking_supported"] is True


def test_builds_app_over_the_reference_store() -> None:
    app = build_memory_provider_app(ReferenceMemoryStore(DIM), KEY, consumer_id="other")  # type: ignore[arg-type]
    with TestClient(app) as client:
        assert ok(call(client, "handshake", {}, plane="*", audience="other"))["consumer_id"] == (
            "other"
        )


def test_builds_app_puts_the_jti_ledger_beside_the_database(
    store: RatatoskrMemoryStore,
) -> None:
    """Two apps over one store (two worker processes, say) share its ledger: beside the
    file, or in the PostgreSQL database, so a mutating token is used once across them."""
    body = envelope("delete_many", {"ids": ["x"]})
    bearer = token_for(body, verb="delete_many")
    with TestClient(build_memory_provider_app(store, KEY)) as first:
        assert post(first, body, bearer).status_code == 200
    with TestClient(build_memory_provider_app(store, KEY)) as second:
        assert error_code(post(second, body, bearer)) == "auth.token_replayed"


def test_bad_key(store: RatatoskrMemoryStore) -> None:
    with pytest.raises(ValueError, match="heimdall_key"):
        build_memory_provider_app(store, b"")


def test_short_key_is_refused_without_showing_it(store: RatatoskrMemoryStore) -> None:
    short = b"s3cr3t-but-short"
    with pytest.raises(ValueError) as info:
        build_memory_provider_app(store, short)
    assert "heimdall_key" in str(info.value)
    assert short.decode() not in str(info.value)


def test_store_must_describe_itself() -> None:
    class NoDescriptor:
        def describe_store(self) -> None:
            return None

    with pytest.raises(ValueError, match="describe_store"):
        build_memory_provider_app(NoDescriptor(), KEY)  # type: ignore[arg-type]


def test_store_module_does_not_import_http_at_import_time() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ratatoskr.provider.memory_store;"
        "print(any(m.startswith(('starlette', 'ratatoskr.server', 'ratatoskr.wire'))"
        " for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
