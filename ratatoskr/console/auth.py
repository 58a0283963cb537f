"""Who may use the console: whoever holds the secret printed at start, as Jupyter does.

The secret arrives once in the URL (``?token=``), is moved into an HttpOnly, SameSite=Strict
cookie and the browser is sent to the same page without it, so it stays out of the address
bar, history and ``Referer``. Every request without the secret gets 401. A mutating request
(every POST) must also carry ``X-Ratatoskr-CSRF``, a value derived from the secret that the
page hands its script: a cross-site form cannot set a header, and a cross-site script cannot
without a CORS preflight, which the console never answers.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_PARAM = "token"
CSRF_HEADER = "x-ratatoskr-csrf"
SAFE_METHODS = frozenset({"GET", "HEAD"})
# every page: no framing, no inline script, nothing cached, no Referer leaving the page
SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


@dataclass(frozen=True)
class Secret:
    """The console's one secret, the cookie that carries it and the CSRF value from it."""

    value: str
    cookie: str

    @classmethod
    def fresh(cls, port: int) -> Secret:
        # cookies are not scoped by port: two consoles on one host must not share a name
        return cls(secrets.token_urlsafe(32), f"ratatoskr_console_{port}")

    @property
    def csrf(self) -> str:
        return hmac.new(self.value.encode(), b"ratatoskr console csrf", hashlib.sha256).hexdigest()

    def matches(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(
            candidate.encode(), self.value.encode()
        )

    def csrf_matches(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.csrf.encode())

    def set_cookie_header(self) -> bytes:
        return f"{self.cookie}={self.value}; HttpOnly; SameSite=Strict; Path=/".encode()


def local_path(path: str) -> str:
    """``path`` as a redirect that stays on this console: ``//host/x`` or ``/\\host/x``
    would send the browser to another host."""
    return quote("/" + path.lstrip("/\\"), safe="/:@!$&'()*+,;=-._~")


def loopback_hosts(host: str, port: int) -> frozenset[str]:
    """The Host headers a console bound to loopback ``host`` at ``port`` answers."""
    names = {
        "127.0.0.1",
        "localhost",
        "[::1]",
        host.lower() if ":" not in host else f"[{host.strip('[]')}]",
    }
    hosts = {f"{name}:{port}" for name in names}
    if port == 80:
        hosts |= names
    return frozenset(hosts)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookie(headers: dict[str, str], name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:
        return None
    morsel = jar.get(name)
    return None if morsel is None else morsel.value


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]]) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware in front of every route, static files included."""

    def __init__(self, app: ASGIApp, secret: Secret, hosts: frozenset[str] | None = None) -> None:
        self.app = app
        self.secret = secret
        self.hosts = hosts  # the Host headers a loopback console answers; None: any

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if self.hosts is not None and headers.get("host", "").lower() not in self.hosts:
            # a page on another site that had its name point at 127.0.0.1 (DNS rebinding)
            await _plain(send, 421, "this console answers only on its own address", [])
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [v for k, v in query if k == TOKEN_PARAM]
        method = scope["method"]
        if given:
            if len(given) != 1 or not self.secret.matches(given[0]):
                await _plain(send, 401, "wrong console secret", [])
                return
            if method in SAFE_METHODS:
                # keep the secret in the cookie only: the same page again, without it
                rest = urlencode([(k, v) for k, v in query if k != TOKEN_PARAM])
                location = local_path(scope["path"]) + (f"?{rest}" if rest else "")
                cookie = (b"set-cookie", self.secret.set_cookie_header())
                await _plain(
                    send, 303, "see " + location, [(b"location", location.encode()), cookie]
                )
                return
        elif not self.secret.matches(_cookie(headers, self.secret.cookie)):
            await _plain(
                send, 401, "open the URL `ratatoskr admin ui` printed (it carries the secret)", []
            )
            return
        if method not in SAFE_METHODS:
            if not self.secret.csrf_matches(headers.get(CSRF_HEADER)):
                await _plain(send, 403, f"a mutating request needs the {CSRF_HEADER} header", [])
                return
            origin = headers.get("origin")
            host = headers.get("host", "")
            if origin is not None and origin.split("://", 1)[-1] != host:
                await _plain(send, 403, "cross-origin request refused", [])
                return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), *SECURITY_HEADERS],
                }
            await send(message)

        await self.app(scope, receive, send_secured)
