"""A client's settings are checked when it is made: a URL that is not ``http://`` or
``https://`` (or none at all) and a timeout that is not above 0 are refused at once, with
a ``ValueError`` that names the setting, never left for every call to fail as a server
that does not answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ratatoskr.cli import build_parser
from ratatoskr.cli import call as call_cli
from ratatoskr.client import AsyncClient, Client

KEY = b"t" * 40
SCOPE = {"tenant": "acme"}


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8000", "localhost:8000", "ftp://127.0.0.1:8000", "http://", "", "   "]
)
def test_a_url_without_http_or_https_is_refused_when_the_client_is_made(url: str) -> None:
    with pytest.raises(ValueError, match="the server's URL"):
        Client(url, key=KEY, scope=SCOPE)

    async def made() -> None:
        AsyncClient(url, key=KEY, scope=SCOPE)

    with pytest.raises(ValueError, match="the server's URL"):
        asyncio.run(made())


def test_a_url_from_the_environment_is_refused_naming_the_variable() -> None:
    for bad in ("127.0.0.1:8000", "  ", "ftp://h"):
        env = {"RATATOSKR_URL": bad, "RATATOSKR_HEIMDALL_KEY": KEY.decode()}
        with pytest.raises(ValueError, match="^RATATOSKR_URL "):
            Client.from_env(scope=SCOPE, env=env)
    env = {"RATATOSKR_URL": "HTTPS://example.org/", "RATATOSKR_HEIMDALL_KEY": KEY.decode()}
    with Client.from_env(scope=SCOPE, env=env) as fine:
        assert fine.base_url == "HTTPS://example.org"


@pytest.mark.parametrize("timeout", [0, -5, 0.0, float("nan"), float("inf")])
def test_a_timeout_not_above_zero_is_refused(timeout: Any) -> None:
    with pytest.raises(ValueError, match="timeout must be"):
        Client("http://127.0.0.1:8000", key=KEY, scope=SCOPE, timeout=timeout)


def test_good_settings_still_make_a_client() -> None:
    for url in ("http://127.0.0.1:8000", "https://example.org", "http://[::1]:8000/"):
        with Client(url, key=KEY, scope=SCOPE, timeout=0.5) as made:
            assert made.timeout == 0.5 and not made.base_url.endswith("/")


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--url", "localhost:8000", "--url must be an http:// or https:// URL with a host"),
        ("--url", "", "--url is empty: give an http:// or https:// URL"),
        ("--timeout", "0", "--timeout must be a finite number of seconds above 0"),
        ("--timeout", "-5", "--timeout must be a finite number of seconds above 0"),
    ],
)
def test_the_shell_refuses_them_as_usage_errors(
    option: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"RATATOSKR_HEIMDALL_KEY": KEY.decode(), "RATATOSKR_URL": "http://127.0.0.1:9"}
    argv = ["call", "memory", "health", "--scope", "tenant=a", f"{option}={value}"]
    assert call_cli.run(build_parser().parse_args(argv), env=env) == 2
    assert capsys.readouterr().err.strip() == f"ratatoskr call: {said}"


def test_a_clients_repr_hides_the_urls_password_and_query() -> None:
    """A repr ends up in tracebacks and debug logs: the user stays, its password is masked
    and the query (which may hold a token) is left out."""
    url = "http://svc:S3CRET-PW@127.0.0.1:9/?access_token=T0KEN"
    shown = repr(Client(url, key=KEY, scope=SCOPE))
    assert shown == "Client('http://svc:***@127.0.0.1:9/')"
    assert (
        repr(Client("http://127.0.0.1:9", key=KEY, scope=SCOPE)) == "Client('http://127.0.0.1:9')"
    )
    assert (
        repr(Client("https://u@h.example", key=KEY, scope=SCOPE)) == "Client('https://u@h.example')"
    )

    async def made() -> str:
        async with AsyncClient(url, key=KEY, scope=SCOPE) as aio:
            return repr(aio)

    assert asyncio.run(made()) == "AsyncClient('http://svc:***@127.0.0.1:9/')"
