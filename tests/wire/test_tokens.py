"""Token attacks, each against the real app: every one is a 401, none reaches a verb."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import orjson
import pytest
from starlette.testclient import TestClient

from ratatoskr.memory.store import RatatoskrMemoryStore
from ratatoskr.wire.keys import KEY_ENV, KEY_FILE_ENV, KEYS_FILE_ENV, Keyring, load_keyring
from ratatoskr.wire.tokens import REQUIRED_CLAIMS, TokenVerifier, body_digest, mint_token
from tests.apps import memory_app
from tests.wire.helpers import (
    KEY,
    OTHER_KEY,
    TENANT,
    call,
    envelope,
    error_code,
    ok,
    past,
    post,
    token_for,
)

BODY = envelope("health", {})


def _claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": "heimdall",
        "aud": "ratatoskr",
        "sub": "worldtree",
        "iat": now,
        "exp": now + 60,
        "jti": "jti-1",
        "plane": "memory",
        "verb": "health",
        "scope": dict(TENANT),
        "body_sha256": body_digest(BODY),
    }
    claims.update(overrides)
    return claims


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _raw_token(header: dict[str, Any], claims: dict[str, Any], key: bytes | None) -> str:
    signing_input = f"{_b64(orjson.dumps(header))}.{_b64(orjson.dumps(claims))}"
    if key is None:
        return signing_input + "."
    digest = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(digest)}"


def _invalid(client: TestClient, token: str, body: bytes = BODY) -> None:
    response = post(client, body, token)
    assert response.status_code == 401
    assert error_code(response) == "auth.invalid_token"
    assert token not in response.text


def test_a_good_token_works(client: TestClient) -> None:
    ok(post(client, BODY, jwt.encode(_claims(), KEY, algorithm="HS256")))


def test_alg_none(client: TestClient) -> None:
    _invalid(client, _raw_token({"alg": "none", "typ": "JWT"}, _claims(), None))


def test_alg_hs384_with_the_right_key(client: TestClient) -> None:
    _invalid(client, jwt.encode(_claims(), KEY, algorithm="HS384"))


def test_rs256_header_over_an_hmac_signature(client: TestClient) -> None:
    _invalid(client, _raw_token({"alg": "RS256", "typ": "JWT"}, _claims(), KEY))


def test_wrong_key(client: TestClient) -> None:
    _invalid(client, jwt.encode(_claims(), OTHER_KEY, algorithm="HS256"))


@pytest.mark.parametrize(
    "garbage", ["abc", "a.b.c", "a.b", "....", "%%.%%.%%", "eyJhbGciOiJIUzI1NiJ9.e30.x"]
)
def test_garbage(client: TestClient, garbage: str) -> None:
    response = post(client, BODY, garbage)
    assert response.status_code == 401
    assert error_code(response) in ("auth.invalid_token", "auth.missing_token")


def test_expired(client: TestClient) -> None:
    _invalid(client, token_for(BODY, verb="health", now=past(100), lifetime=60))


def test_expired_within_leeway_is_accepted(client: TestClient) -> None:
    ok(post(client, BODY, token_for(BODY, verb="health", now=past(65), lifetime=60)))


def test_not_yet_valid_nbf(client: TestClient) -> None:
    _invalid(client, jwt.encode(_claims(nbf=int(time.time()) + 120), KEY, algorithm="HS256"))


def test_issued_in_the_future(client: TestClient) -> None:
    _invalid(client, token_for(BODY, verb="health", now=time.time() + 120))


def test_nbf_in_the_past_is_honoured(client: TestClient) -> None:
    ok(post(client, BODY, jwt.encode(_claims(nbf=int(time.time()) - 5), KEY, algorithm="HS256")))


def test_lifetime_over_the_maximum(client: TestClient) -> None:
    _invalid(client, token_for(BODY, verb="health", lifetime=301))
    ok(post(client, BODY, token_for(BODY, verb="health", lifetime=300)))


@pytest.mark.parametrize(
    "aud",
    ["someone-else", ["someone-else"], [], 7, None],
    ids=["str", "list", "empty", "n", "null"],
)
def test_wrong_audience(client: TestClient, aud: Any) -> None:
    _invalid(client, jwt.encode(_claims(aud=aud), KEY, algorithm="HS256"))


def test_audience_list_containing_the_consumer(client: TestClient) -> None:
    ok(post(client, BODY, jwt.encode(_claims(aud=["x", "ratatoskr"]), KEY, algorithm="HS256")))


def test_wrong_issuer(client: TestClient) -> None:
    _invalid(client, jwt.encode(_claims(iss="loki"), KEY, algorithm="HS256"))


@pytest.mark.parametrize("claim", REQUIRED_CLAIMS)
def test_each_required_claim_missing(client: TestClient, claim: str) -> None:
    claims = _claims()
    del claims[claim]
    _invalid(client, jwt.encode(claims, KEY, algorithm="HS256"))


@pytest.mark.parametrize(
    "override",
    [
        {"sub": ""},
        {"sub": "s" * 257},
        {"sub": 7},
        {"jti": ""},
        {"jti": "j" * 129},
        {"plane": 1},
        {"verb": ""},
        {"scope": "tenant=acme"},
        {"scope": {"planet": "x"}},
        {"scope": {"tenant": 7}},
        {"scope": {"tenant": ""}},
        {"body_sha256": body_digest(BODY).upper()},
        {"body_sha256": "00"},
        {"iat": "yesterday"},
        {"exp": True},
        {"iat": float("nan")},  # every comparison with NaN is false: it would never expire
        {"exp": float("nan")},
        {"exp": float("inf")},
        {"nbf": float("nan")},
    ],
)
def test_malformed_claims(client: TestClient, override: dict[str, Any]) -> None:
    _invalid(client, jwt.encode(_claims(**override), KEY, algorithm="HS256"))


def test_sub_of_256_and_jti_of_128_are_fine(client: TestClient) -> None:
    claims = _claims(sub="s" * 256, jti="j" * 128)
    ok(post(client, BODY, jwt.encode(claims, KEY, algorithm="HS256")))


def test_tampered_body(client: TestClient) -> None:
    token = token_for(envelope("health", {}), verb="health")
    response = post(client, envelope("describe_store", {}), token)
    assert (response.status_code, error_code(response)) == (401, "auth.binding_mismatch")
    spaced = b'{"wire": "0.6", "verb": "health", "args": {} }'
    response = post(client, spaced, token)
    assert (response.status_code, error_code(response)) == (401, "auth.binding_mismatch")


@pytest.mark.parametrize("plane", ["affect", "*", "Memory"])
def test_plane_mismatch(client: TestClient, plane: str) -> None:
    response = post(client, BODY, token_for(BODY, plane=plane, verb="health"))
    assert (response.status_code, error_code(response)) == (401, "auth.binding_mismatch")


def test_memory_token_on_the_handshake(client: TestClient) -> None:
    body = envelope("handshake", {})
    response = post(client, body, token_for(body, verb="handshake"), path="/bifrost/handshake")
    assert (response.status_code, error_code(response)) == (401, "auth.binding_mismatch")


def test_verb_mismatch(client: TestClient) -> None:
    response = post(client, BODY, token_for(BODY, verb="describe_store"))
    assert (response.status_code, error_code(response)) == (401, "auth.binding_mismatch")


@pytest.fixture
def rotating_client(store: RatatoskrMemoryStore) -> Iterator[TestClient]:
    ring = Keyring(KEY, {"2026-01": b"a" * 32, "2026-02": b"b" * 48})
    with TestClient(memory_app(store, ring)) as c:
        yield c


def test_kid_rotation(rotating_client: TestClient) -> None:
    ok(call(rotating_client, "health", {}, key=b"b" * 48, kid="2026-02"))
    ok(call(rotating_client, "health", {}, key=b"a" * 32, kid="2026-01"))
    ok(call(rotating_client, "health", {}))  # no kid: the default key


def test_kid_names_another_key(rotating_client: TestClient) -> None:
    response = call(rotating_client, "health", {}, key=b"a" * 32, kid="2026-02")
    assert error_code(response) == "auth.invalid_token"


def test_unknown_kid(rotating_client: TestClient) -> None:
    response = call(rotating_client, "health", {}, key=KEY, kid="1999-01")
    assert (response.status_code, error_code(response)) == (401, "auth.invalid_token")


def test_no_kid_without_a_default_key(store: RatatoskrMemoryStore) -> None:
    with TestClient(memory_app(store, Keyring(None, {"k1": KEY}))) as client:
        assert error_code(call(client, "health", {})) == "auth.invalid_token"
        ok(call(client, "health", {}, kid="k1"))


def test_short_keys_are_refused_naming_the_setting(tmp_path: Path) -> None:
    short = "only-31-bytes-of-key-material!!"
    assert len(short) == 31
    with pytest.raises(ValueError) as info:
        load_keyring({KEY_ENV: short})
    assert KEY_ENV in str(info.value) and short not in str(info.value)
    key_file = tmp_path / "k"
    key_file.write_text(short + "\n")
    with pytest.raises(ValueError, match=KEY_FILE_ENV):
        load_keyring({KEY_FILE_ENV: str(key_file)})
    keys_file = tmp_path / "keys.json"
    keys_file.write_bytes(orjson.dumps({"k1": "x" * 32, "k2": short}))
    with pytest.raises(ValueError) as info:
        load_keyring({KEYS_FILE_ENV: str(keys_file)})
    assert KEYS_FILE_ENV in str(info.value) and short not in str(info.value)
    with pytest.raises(ValueError):
        Keyring(b"x" * 31)
    ok_ring = load_keyring({KEY_ENV: "y" * 32})
    assert "y" * 32 not in repr(ok_ring)


def test_keys_come_from_the_settings(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    keys_file.write_bytes(orjson.dumps({"k1": "x" * 32}))
    key_file = tmp_path / "key"
    key_file.write_bytes(b"z" * 32 + b"\n")
    ring = load_keyring({KEY_FILE_ENV: str(key_file), KEYS_FILE_ENV: str(keys_file)})
    assert ring.key_for(None) == b"z" * 32
    assert ring.key_for("k1") == b"x" * 32


def test_an_empty_keys_file_is_refused_not_replaced_by_the_development_key(
    tmp_path: Path,
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "heimdall.key").write_bytes(b"d" * 32)
    keys_file = tmp_path / "keys.json"
    keys_file.write_bytes(b"{}")
    with pytest.raises(ValueError, match=f"{KEYS_FILE_ENV} names a file that holds no key"):
        load_keyring({KEYS_FILE_ENV: str(keys_file)}, cwd=tmp_path)


@pytest.mark.parametrize("setting", [KEY_ENV, KEY_FILE_ENV, KEYS_FILE_ENV])
def test_a_key_setting_set_but_empty_is_refused(tmp_path: Path, setting: str) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "heimdall.key").write_bytes(b"d" * 32)
    with pytest.raises(ValueError, match=f"{setting} is set but empty"):
        load_keyring({setting: " "}, cwd=tmp_path)


def test_default_key_file_in_data(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "heimdall.key").write_bytes(b"d" * 32)
    assert load_keyring({}, cwd=tmp_path).key_for(None) == b"d" * 32
    with pytest.raises(ValueError, match=KEY_ENV):
        load_keyring({}, cwd=tmp_path / "data")


def test_unscoped_tokens_are_refused_unless_allowed(store: RatatoskrMemoryStore) -> None:
    with TestClient(memory_app(store, KEY)) as client:
        response = call(client, "health", {}, scope={})
        assert (response.status_code, error_code(response)) == (401, "auth.invalid_token")
    with TestClient(memory_app(store, KEY, allow_unscoped=True)) as client:
        ok(call(client, "health", {}, scope={}))


def test_verifier_reads_allow_unscoped_from_the_environment() -> None:
    env = {KEY_ENV: "q" * 32, "RATATOSKR_ALLOW_UNSCOPED_TOKENS": "true"}
    verifier = TokenVerifier.from_env(env)
    token = mint_token(b"q" * 32, plane="memory", verb="v", scope={}, sub="s", body=b"")
    assert verifier.verify(token).scope == {}
    assert TokenVerifier.from_env({KEY_ENV: "q" * 32}).allow_unscoped is False


def test_exp_not_after_iat(client: TestClient) -> None:
    now = int(time.time())
    _invalid(client, jwt.encode(_claims(iat=now, exp=now), KEY, algorithm="HS256"))
