"""schemathesis fuzzes /bifrost/memory-call from the served OpenAPI document.

An auth hook mints, for every generated case, a token bound to that case's exact body bytes
(and its verb), so the fuzzer gets past authentication and reaches args validation, scope
confinement and the store. No answer may be a 500, and every answer must have the shape and
status the document declares.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from requests.structures import CaseInsensitiveDict
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ratatoskr.memory.store import open_memory_store
from tests.apps import memory_app
from tests.wire.helpers import DIM, KEY, token_for


class BoundToken:
    """Serialises the body once, then signs exactly those bytes."""

    def get(self, case: schemathesis.Case[Any], context: schemathesis.AuthContext) -> str:
        return "per-case"

    def set(
        self, case: schemathesis.Case[Any], data: str, context: schemathesis.AuthContext
    ) -> None:
        body = case.body
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        verb = body.get("verb") if isinstance(body, dict) else None
        case.body = raw
        token = token_for(raw, verb=verb if isinstance(verb, str) else "health")
        headers: CaseInsensitiveDict[Any] = CaseInsensitiveDict(case.headers)
        headers["Authorization"] = f"Bearer {token}"
        case.headers = headers


def test_memory_call_never_500s_and_answers_documented_shapes(tmp_path: Path) -> None:
    store = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    app = memory_app(store, KEY)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    schema.auth(refresh_interval=None)(BoundToken)
    operation = schema["/bifrost/memory-call"]["POST"]

    @given(case=operation.as_strategy())
    @settings(
        max_examples=150,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(
            checks=[
                not_a_server_error,
                status_code_conformance,
                content_type_conformance,
                response_schema_conformance,
            ]
        )

    try:
        fuzz()
    finally:
        store.close()
