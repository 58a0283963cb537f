"""The client's tokens verify with the server's own verifier, bound to the call, and its
key is found where ``ratatoskr call`` finds it; the key never shows."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ratatoskr.client import Client, KeyMinter
from ratatoskr.client.base import url_from_env
from ratatoskr.client.tokens import key_from_env
from ratatoskr.core.errors import BindingMismatch
from ratatoskr.wire.keys import Keyring
from ratatoskr.wire.tokens import TokenVerifier

KEY = b"t" * 40
BODY = orjson.dumps({"wire": "0.6", "verb": "search", "args": {}})


def test_a_minted_token_verifies_and_binds_the_call() -> None:
    minter = KeyMinter(KEY, scope={"tenant": "acme"}, actor="worldtree", lifetime=30)
    token = minter("memory", "search", BODY)
    verified = TokenVerifier(Keyring(KEY)).verify(token)
    assert (verified.plane, verified.verb, verified.actor) == ("memory", "search", "worldtree")
    assert verified.scope == {"tenant": "acme"}
    TokenVerifier.check_body(verified, BODY)
    with pytest.raises(BindingMismatch):
        TokenVerifier.check_body(verified, BODY + b" ")
    assert TokenVerifier(Keyring(KEY)).verify(minter("memory", "search", BODY)).jti != verified.jti
    other = minter.with_scope({"tenant": "other"}, actor="someone")
    assert TokenVerifier(Keyring(KEY)).verify(other("*", "handshake", b"{}")).actor == "someone"


def test_a_kid_picks_the_key_of_a_keyring() -> None:
    minter = KeyMinter(KEY, scope={"tenant": "acme"}, kid="2026-12")
    ring = Keyring(None, {"2026-12": KEY})
    assert TokenVerifier(ring).verify(minter("affect", "list", BODY)).plane == "affect"


def test_a_short_key_is_refused_and_the_key_never_shows() -> None:
    with pytest.raises(ValueError, match="32 bytes") as caught:
        KeyMinter(b"tiny-secret", scope={})
    assert "tiny-secret" not in str(caught.value)
    minter = KeyMinter(KEY, scope={"tenant": "acme"})
    assert KEY.decode() not in repr(minter)
    client = Client("http://127.0.0.1:9", key=KEY, scope={"tenant": "acme"})
    assert KEY.decode() not in repr(client) and KEY.decode() not in repr(vars(client))
    client.close()


def test_the_key_is_found_as_ratatoskr_call_finds_it(tmp_path: Path) -> None:
    assert key_from_env({"RATATOSKR_HEIMDALL_KEY": KEY.decode()}) == KEY
    keys = tmp_path / "keys.json"
    keys.write_bytes(orjson.dumps({"a": "a" * 40, "b": "b" * 40}))
    env = {"RATATOSKR_HEIMDALL_KEYS_FILE": str(keys)}
    assert key_from_env(env, kid="b") == b"b" * 40
    with pytest.raises(ValueError, match="kid"):
        key_from_env(env)
    with pytest.raises(ValueError, match="no such kid"):
        key_from_env(env, kid="c")
    with pytest.raises(ValueError, match="heimdall.key"):
        key_from_env({}, cwd=tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "heimdall.key").write_bytes(b"f" * 32 + b"\n")
    assert key_from_env({}, cwd=tmp_path) == b"f" * 32
    made = Client.from_env(scope={"tenant": "acme"}, env={}, cwd=tmp_path)
    assert made.base_url == "http://127.0.0.1:8000"
    made.close()


def test_the_url_comes_from_the_settings() -> None:
    assert url_from_env({"RATATOSKR_URL": "http://10.0.0.5:9000"}) == "http://10.0.0.5:9000"
    assert url_from_env({"RATATOSKR_PORT": "8123"}) == "http://127.0.0.1:8123"
    assert url_from_env({}) == "http://127.0.0.1:8000"
    for bad in ("abc", "0", "70000"):
        with pytest.raises(ValueError, match="RATATOSKR_PORT must be a port number"):
            url_from_env({"RATATOSKR_PORT": bad})


def test_exactly_one_source_of_tokens() -> None:
    with pytest.raises(TypeError):
        Client("http://127.0.0.1:9")
    with pytest.raises(TypeError):
        Client("http://127.0.0.1:9", key=KEY)  # no scope
    with pytest.raises(TypeError):
        Client("http://127.0.0.1:9", key=KEY, scope={}, token_provider=lambda *a: "t")
