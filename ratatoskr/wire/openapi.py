"""The OpenAPI description of the wire, generated from the verb tables it serves.

Generated rather than hand-written so it cannot drift from what the endpoint accepts;
``docs/openapi.json`` is this document for the shipped planes (a test keeps them equal).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratatoskr import __version__
from ratatoskr.wire.envelope import MAX_REQUEST_ID_CHARS, WIRE_VERSION
from ratatoskr.wire.plane import VerbTable

ERROR_STATUSES = {
    "400": "malformed envelope, unsupported version, invalid arguments or filter",
    "401": "missing, invalid, mismatched or replayed token",
    "403": "the call names or writes a scope outside the token's scope",
    "404": "unknown verb or plane",
    "409": "idempotency, revision or event conflict",
    "413": "body over the size limit",
    "415": "content type is not application/json",
    "500": "internal error",
    "501": "a verb the wire defines but this store does not advertise",
    "503": "the store cannot serve now",
}

_REQUEST_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_REQUEST_ID_CHARS,
    "pattern": "^[ -~]+$",
}


def _envelope(verb: str, args_schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "wire": {"type": "string", "enum": [WIRE_VERSION]},
            "verb": {"type": "string", "enum": [verb]},
            "args": args_schema,
            "request_id": _REQUEST_ID,
        },
        "required": ["wire", "verb", "args"],
        "additionalProperties": False,
    }


def _responses(result: dict[str, Any]) -> dict[str, Any]:
    header = {"X-Request-ID": {"schema": {"type": "string"}}}
    responses: dict[str, Any] = {
        "200": {
            "description": "the verb's result",
            "headers": header,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "ok": {"type": "boolean", "enum": [True]},
                            "result": result,
                            "request_id": {"type": "string"},
                        },
                        "required": ["ok", "result", "request_id"],
                        "additionalProperties": False,
                    }
                }
            },
        }
    }
    for status, description in ERROR_STATUSES.items():
        responses[status] = {
            "description": description,
            "headers": header,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return responses


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean", "enum": [False]},
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "retryable": {"type": "boolean"},
                "details": {"type": "object"},
            },
            "required": ["code", "message", "retryable"],
            "additionalProperties": False,
        },
        "request_id": {"type": "string"},
    },
    "required": ["ok", "error", "request_id"],
    "additionalProperties": False,
}

HANDSHAKE_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "wire": {"type": "string"},
        "consumer_id": {"type": "string"},
        "server": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
            "required": ["name", "version"],
        },
        "planes": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "verbs": {"type": "array", "items": {"type": "string"}},
                    "capabilities": {"type": "object"},
                    "limits": {"type": "object"},
                },
                "required": ["verbs", "capabilities", "limits"],
            },
        },
    },
    "required": ["wire", "consumer_id", "server", "planes"],
}


def _plane_path(table: VerbTable) -> dict[str, Any]:
    envelopes = [_envelope(v.name, dict(v.args_schema)) for v in table.verbs]
    return {
        "post": {
            "operationId": f"{table.plane}_call",
            "summary": f"one verb on the {table.plane} plane",
            "description": "The token must be minted for this plane, the envelope's verb and "
            "the exact body bytes (body_sha256). Verbs: " + ", ".join(table.verb_names) + ".",
            "security": [{"heimdall": []}],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"oneOf": envelopes}}},
            },
            "responses": _responses({}),
        }
    }


def _probe(description: str, statuses: Sequence[str]) -> dict[str, Any]:
    return {
        "get": {
            "summary": description,
            "responses": {
                s: {
                    "description": description,
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
                for s in statuses
            },
        }
    }


def openapi_document(tables: Sequence[VerbTable], version: str = __version__) -> dict[str, Any]:
    """The OpenAPI 3.0 document of an app serving ``tables``."""
    paths: dict[str, Any] = {
        "/bifrost/handshake": {
            "post": {
                "operationId": "handshake",
                "summary": "capability negotiation for every plane the app serves",
                "security": [{"heimdall": []}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _envelope(
                                "handshake",
                                {
                                    "type": "object",
                                    "properties": {
                                        "planes": {"type": "array", "items": {"type": "string"}}
                                    },
                                    "additionalProperties": False,
                                },
                            )
                        }
                    },
                },
                "responses": _responses(HANDSHAKE_RESULT),
            }
        }
    }
    for table in tables:
        paths[f"/bifrost/{table.plane}-call"] = _plane_path(table)
    paths["/healthz"] = _probe("liveness: the process answers", ["200"])
    paths["/readyz"] = _probe("readiness of every plane", ["200", "503"])
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "ratatoskr: Bifrost wire v" + WIRE_VERSION,
            "version": version,
            "description": "Per-dispatch HS256 tokens from Heimdall, bound to plane, verb and "
            "body. See docs/contracts/bifrost_wire.md.",
        },
        "paths": paths,
        "components": {
            "schemas": {"Error": ERROR_SCHEMA},
            "securitySchemes": {
                "heimdall": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
        },
    }
