"""Only the holder of the printed secret gets in, and a mutating request needs the header
that a cross-site form cannot send; the host must be loopback unless allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.routing import Route

from ratatoskr.cli import main
from ratatoskr.console.app import ROUTES, create_console_app
from ratatoskr.console.auth import CSRF_HEADER, Secret
from ratatoskr.console.serve import check_host
from ratatoskr.ops.stores import Paths, Stores
from tests.console.conftest import MARKER, OPERATOR, ConsoleProcess, Files

# every route, with its path filled in, and the static files
PATHS = [(m, p.replace("{plane}", "memory")) for m, p, _ in ROUTES] + [
    ("GET", "/static/console.css"),
    ("GET", "/static/console.js"),
]
# a well-formed body per POST route, so a refusal is the guard's and not the form's
BODIES: dict[str, dict[str, Any]] = {
    "/open/memory": {"id": "c-alice-0"},
    "/forget/preview": {"plane": "memory", "mode": "node", "at": "tenant=acme"},
    "/forget": {"plane": "memory", "mode": "node", "at": "tenant=acme", "confirm": "acme"},
    "/erase/preview": {"end_user": "bob"},
    "/erase": {"end_user": "bob", "confirm": "bob"},
}


def test_the_table_names_every_route_the_app_serves(files: Files) -> None:
    stores = Stores(Paths(str(files.memory), str(files.affect)))
    app = create_console_app(stores, Secret.fresh(1), operator="x")
    routes = [r for r in app.routes if isinstance(r, Route)]
    served = {(m, r.path) for r in routes for m in r.methods or () if m != "HEAD"}
    listed = {(m, p) for m, p, _ in ROUTES} | {("GET", "/static/{name}")}
    assert served == listed


def _send(
    client: httpx.Client, method: str, path: str, cookies: dict[str, str] | None = None, **kw: Any
) -> httpx.Response:
    data = BODIES.get(path) if method == "POST" else None
    client.cookies.clear()
    for name, value in (cookies or {}).items():
        client.cookies.set(name, value)
    return client.request(method, path, data=data, **kw)


def test_with_json_the_start_line_is_one_json_object(tmp_path: Path, files: Files) -> None:
    """``admin ui --json``: a script reads the URL from one JSON object, as every other
    command's ``--json`` gives one."""
    console = ConsoleProcess(tmp_path, files, ("--json",))
    try:
        start = orjson.loads(console.stdout().splitlines()[0])
        assert start == {
            "url": console.url,
            "operator": OPERATOR,
            "host": "127.0.0.1",
            "port": console.port,
        }
        with httpx.Client(follow_redirects=True) as client:
            assert client.get(start["url"]).status_code == 200
    finally:
        assert console.stop() == 0


def test_every_route_refuses_a_missing_or_wrong_secret(console: ConsoleProcess) -> None:
    wrong = ("y" if console.secret[0] == "x" else "x") + console.secret[1:]
    with httpx.Client(base_url=console.base, follow_redirects=False) as client:
        for method, path in PATHS:
            assert _send(client, method, path).status_code == 401, (method, path)
            cookies = {console.cookie: wrong}
            headers = {CSRF_HEADER: "0" * 64}
            assert _send(client, method, path, cookies=cookies, headers=headers).status_code == 401
            assert _send(client, method, path, params={"token": wrong}).status_code == 401
            # the cookie of another console on this host is not this one's
            other = {f"ratatoskr_console_{console.port + 1}": console.secret}
            assert _send(client, method, path, cookies=other).status_code == 401
    # nothing was removed by any of those
    lines = console.audit("console.forget") + console.audit("console.erase")
    assert lines == []


def test_the_secret_moves_from_the_url_into_a_strict_cookie(console: ConsoleProcess) -> None:
    with httpx.Client(base_url=console.base, follow_redirects=False) as client:
        first = client.get("/tree/memory", params={"at": "tenant=acme", "token": console.secret})
        assert first.status_code == 303
        assert first.headers["location"] == "/tree/memory?at=tenant%3Dacme"
        cookie = first.headers["set-cookie"]
        assert cookie.startswith(f"{console.cookie}={console.secret};")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = client.get("/tree/memory", params={"at": "tenant=acme"})
        assert page.status_code == 200
        assert page.headers["referrer-policy"] == "no-referrer"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.headers["cache-control"] == "no-store"
        csrf = Secret(console.secret, console.cookie).csrf
        assert f'<meta name="csrf-token" content="{csrf}">' in page.text


def test_the_login_redirect_stays_on_the_console(console: ConsoleProcess) -> None:
    with httpx.Client(base_url=console.base, follow_redirects=False) as client:
        for path in ("//evil.example/", "/%5Cevil.example/", "/%2F%2Fevil.example/x"):
            sent = client.get(f"{console.base}{path}?token={console.secret}")
            assert sent.status_code == 303, path
            location = sent.headers["location"]
            assert location.startswith("/") and location[1:2] not in ("/", "\\"), location


def test_a_foreign_host_name_is_refused(console: ConsoleProcess) -> None:
    """A site whose name was made to point at 127.0.0.1 (DNS rebinding) reaches the
    console with its own name in ``Host``: refused before the secret is even looked at."""
    cookies = {console.cookie: console.secret}
    with httpx.Client(base_url=console.base, follow_redirects=False, cookies=cookies) as client:
        for host in ("evil.example", f"evil.example:{console.port}", "127.0.0.1:1"):
            sent = client.get("/", headers={"host": host})
            assert sent.status_code == 421, host
            login = client.get("/", params={"token": console.secret}, headers={"host": host})
            assert login.status_code == 421 and "set-cookie" not in login.headers
        for host in (f"127.0.0.1:{console.port}", f"localhost:{console.port}"):
            assert client.get("/", headers={"host": host}).status_code == 200


def test_a_mutating_request_needs_the_header(console: ConsoleProcess) -> None:
    csrf = Secret(console.secret, console.cookie).csrf
    cookies = {console.cookie: console.secret}
    with httpx.Client(base_url=console.base) as client:
        for method, path in PATHS:
            if method != "POST":
                assert _send(client, method, path, cookies).status_code == 200, path
                continue
            # what a cross-site form can send: the cookie (were it not SameSite), no header
            assert _send(client, method, path, cookies).status_code == 403, path
            bad = {CSRF_HEADER: "f" * 64}
            assert _send(client, method, path, cookies, headers=bad).status_code == 403
            evil = {CSRF_HEADER: csrf, "origin": "http://evil.example"}
            assert _send(client, method, path, cookies, headers=evil).status_code == 403, path
        assert console.audit("console.forget") == console.audit("console.erase") == []
        assert console.audit("console.record_opened") == []
        # with the header the same request is served
        opened = _send(client, "POST", "/open/memory", cookies, headers={CSRF_HEADER: csrf})
        assert opened.status_code == 200 and MARKER in opened.text
    assert [line["record_id"] for line in console.audit("console.record_opened")] == ["c-alice-0"]


def test_no_log_line_holds_the_secret_or_content(console: ConsoleProcess) -> None:
    csrf = Secret(console.secret, console.cookie).csrf
    with httpx.Client(base_url=console.base) as client:
        client.get("/", params={"token": console.secret})
        client.post("/open/memory", data={"id": "c-bob-0"}, headers={CSRF_HEADER: csrf})
        client.get("/", params={"token": "wrong"})
    banner, *rest = console.stdout().splitlines()
    assert console.secret in banner
    logged = "\n".join(rest)
    assert rest and console.secret not in logged and csrf not in logged
    assert MARKER not in logged and "wrong" not in logged


def test_a_host_other_machines_reach_is_refused_unless_allowed(
    files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["admin", "ui", "--memory-db", str(files.memory), "--affect-db", str(files.affect)]
    assert main([*args, "--host", "0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert check_host("127.0.0.1", allow_remote=False) is None
    assert check_host("::1", allow_remote=False) is None
    assert check_host("localhost", allow_remote=False) is None
    with pytest.raises(ValueError):
        check_host("192.0.2.7", allow_remote=False)
    warning = check_host("0.0.0.0", allow_remote=True)
    assert warning is not None and "plain HTTP" in warning
