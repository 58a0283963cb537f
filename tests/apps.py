"""Apps for the wire tests, built through the product's one factory (``create_app``) over
stores the test owns: the same wire, metrics and store threads the server runs."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette

from ratatoskr.affect.verbs import affect_plane
from ratatoskr.memory.verbs import memory_plane
from ratatoskr.server.app import LedgerSpec, create_app
from ratatoskr.server.settings import Settings
from ratatoskr.wire.keys import Keyring
from ratatoskr.wire.plane import Plane


def settings_for(key: bytes | Keyring, **overrides: Any) -> Settings:
    """Server settings around ``key``; refused tokens are answered at once (no tarpit)."""
    keyring = key if isinstance(key, Keyring) else Keyring(key, setting="heimdall_key")
    return Settings(keyring=keyring, **{"auth_tarpit_ms": 0, **overrides})


def plane_app(
    planes: list[Plane], key: bytes | Keyring, *, ledger: LedgerSpec = ":memory:", **overrides: Any
) -> Starlette:
    return create_app(settings_for(key, **overrides), planes=planes, ledger=ledger)


def memory_app(store: Any, key: bytes | Keyring, **kw: Any) -> Starlette:
    return plane_app([memory_plane(store)], key, **kw)


def affect_app(store: Any, key: bytes | Keyring, **kw: Any) -> Starlette:
    return plane_app([affect_plane(store)], key, **kw)
