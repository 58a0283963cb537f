"""``ratatoskr token`` and ``ratatoskr call`` against the real app."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from ratatoskr.cli import build_parser, main
from ratatoskr.cli import call as call_cli
from ratatoskr.wire.keys import KEY_ENV, Keyring
from ratatoskr.wire.tokens import TokenVerifier
from tests.wire.helpers import KEY, record, vec

BODY = '{"wire":"0.6","verb":"search","args":{"vector":[1,0,0,0,0,0,0,0],"top_k":1}}'


@pytest.fixture(autouse=True)
def heimdall_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RATATOSKR_HEIMDALL_KEY_FILE", "RATATOSKR_HEIMDALL_KEYS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_ENV, KEY.decode())


def _token(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["token", "--plane", "memory", "--verb", "search", *argv]) == 0
    return capsys.readouterr().out.strip()


def test_token_is_bound_to_the_body(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    token = _token(capsys, "--scope", "tenant=acme", "--sub", "worldtree", "--body", BODY)
    verified = TokenVerifier(Keyring(KEY)).verify(token)
    assert (verified.plane, verified.verb, verified.actor) == ("memory", "search", "worldtree")
    assert verified.scope == {"tenant": "acme"}
    TokenVerifier.check_body(verified, BODY.encode())
    body_file = tmp_path / "body.json"
    body_file.write_bytes(BODY.encode())
    from_file = _token(capsys, "--scope", "tenant=acme", "--body-file", str(body_file))
    TokenVerifier.check_body(TokenVerifier(Keyring(KEY)).verify(from_file), BODY.encode())


def test_token_refuses_an_axis_outside_the_lattice(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["token", "--plane", "memory", "--verb", "search", "--scope", "planet=x", "--body", "{}"]
    assert main(argv) == 2
    assert "--scope" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--scope", "tenant=acme", "--scope", "tenant=globex"], "tenant twice"),
        (["--lifetime", "301"], "--lifetime must be 1 to 300"),
        (["--lifetime", "0"], "--lifetime must be 1 to 300"),
    ],
)
def test_token_refuses_what_the_server_would(
    capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    """A repeated axis (a scope holds one value per axis) and a lifetime past the server's
    longest (``RATATOSKR_MAX_TOKEN_TTL``) are refused when minting, not left to fail later."""
    argv = ["token", "--plane", "memory", "--verb", "search", "--body", "{}", *extra]
    assert main(argv) == 2
    assert said in capsys.readouterr().err


def test_token_lifetime_follows_the_servers_longest(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATATOSKR_MAX_TOKEN_TTL", "600")
    token = _token(capsys, "--lifetime", "600", "--scope", "tenant=a", "--body", "{}")
    verified = TokenVerifier(Keyring(KEY), max_lifetime=600).verify(token)
    assert verified.verb == "search"


def test_call_finds_the_server_as_the_client_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``--url``: ``RATATOSKR_URL``, else the local port ``RATATOSKR_PORT``."""
    monkeypatch.delenv("RATATOSKR_URL", raising=False)
    monkeypatch.setenv("RATATOSKR_PORT", "9")
    assert main(["call", "memory", "health", "--scope", "tenant=a"]) == 3
    assert "http://127.0.0.1:9" in capsys.readouterr().err
    monkeypatch.setenv("RATATOSKR_URL", "http://127.0.0.1:7")
    assert main(["call", "memory", "health", "--scope", "tenant=a"]) == 3
    assert "http://127.0.0.1:7" in capsys.readouterr().err


def test_token_uses_the_default_key_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.chdir(tmp_path)
    argv = ["token", "--plane", "memory", "--verb", "search", "--scope", "tenant=a", "--body", "{}"]
    assert main(argv) == 2
    assert "heimdall.key" in capsys.readouterr().err
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "heimdall.key").write_bytes(b"f" * 32 + b"\n")
    token = _token(capsys, "--scope", "tenant=a", "--body", "{}")
    TokenVerifier(Keyring(b"f" * 32)).verify(token)


def _call(client: TestClient, *argv: str) -> int:
    args = build_parser().parse_args(["call", *argv])
    # starlette's TestClient is an httpx2.Client, which `client=` (typed httpx.Client) duck-types
    return call_cli.run(args, client=client)  # type: ignore[arg-type]


def test_call_round_trip(client: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    upsert = orjson.dumps({"records": [record("a", vec(1))], "idempotency_key": "k"}).decode()
    assert _call(client, "memory", "upsert_many", "--args", upsert, "--scope", "tenant=acme") == 0
    assert orjson.loads(capsys.readouterr().out)["result"] == {"upserted": 1, "replayed": False}
    search = orjson.dumps({"vector": vec(1), "top_k": 1}).decode()
    assert _call(client, "memory", "search", "--args", search, "--scope", "tenant=acme") == 0
    assert orjson.loads(capsys.readouterr().out)["result"][0]["chunk_id"] == "a"
    assert _call(client, "handshake", "--scope", "tenant=acme") == 0
    assert "memory" in orjson.loads(capsys.readouterr().out)["result"]["planes"]


def test_call_exits_non_zero_on_an_error_answer(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _call(client, "memory", "search", "--args", "{}", "--scope", "tenant=acme") == 1
    assert orjson.loads(capsys.readouterr().out)["error"]["code"] == "memory.invalid_arguments"
    assert _call(client, "memory", "search", "--args", "not json") == 2


def test_call_cannot_reach_a_server(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["call", "memory", "health", "--scope", "tenant=a", "--url", "http://127.0.0.1:9"]
    assert main(argv) == 3
