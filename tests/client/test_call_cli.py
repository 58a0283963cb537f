"""``ratatoskr call`` against a real server: what it refuses before sending, and what it
says when an answer does not come."""

from __future__ import annotations

import orjson
import pytest

from ratatoskr.cli import build_parser
from ratatoskr.cli import call as call_cli
from tests.server.harness import KEY, Server


def shell(server_url: str, *argv: str) -> int:
    env = {"RATATOSKR_HEIMDALL_KEY": KEY, "RATATOSKR_URL": server_url}
    return call_cli.run(build_parser().parse_args(["call", *argv]), env=env)


def put_args(tenant: str, numbers: str, key: str) -> str:
    """``put_many``'s arguments as typed in a shell: ``numbers`` a JSON array's text."""
    record = f'{{"id":"{tenant}-big","scope":{{"tenant":"{tenant}"}},"n":{numbers}}}'
    return f'{{"records":[{record}],"idempotency_key":"{key}"}}'


def test_an_integer_beyond_64_bits_in_args_is_refused_not_made_a_float(
    server: Server, tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """orjson would read it as a float and the store would keep another number: refused,
    exit 2, nothing sent; the largest 64-bit integers beside a float go through as typed."""
    scope = ["--scope", f"tenant={tenant}", "--sub", tenant]
    for big in (2**64, -(2**63) - 1, 123456789012345678901234567890):
        args = put_args(tenant, f"[0.5,{big}]", "b")
        assert shell(server.url, "affect", "put_many", "--args", args, *scope) == 2
        assert "integer beyond 64 bits" in capsys.readouterr().err
    get = orjson.dumps({"id": f"{tenant}-big"}).decode()
    assert shell(server.url, "affect", "get", "--args", get, *scope) == 0
    assert orjson.loads(capsys.readouterr().out)["result"] is None  # nothing was written
    edge = put_args(tenant, f"[0.5,{2**64 - 1},{-(2**63)}]", "e")
    assert shell(server.url, "affect", "put_many", "--args", edge, *scope) == 0
    capsys.readouterr()
    assert shell(server.url, "affect", "get", "--args", get, *scope) == 0
    stored = orjson.loads(capsys.readouterr().out)["result"]
    assert stored["n"] == [0.5, 2**64 - 1, -(2**63)]
