"""Which locations are PostgreSQL URLs, which are files, and naming a URL without its secret.

A plane's location (``RATATOSKR_MEMORY_DB``, ``RATATOSKR_AFFECT_DB``, an admin flag) is a
libpq URI (``postgresql://`` or ``postgres://``, query parameters such as ``?host=/socket/dir``
and ``sslmode`` included) or a file path for SQLite. Anything else that looks like a URL
(``scheme://`` or ``scheme:`` followed by text that is no path) is refused, so a typo such as
``postgress://`` is never taken for a file named after it.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote, urlsplit

import psycopg.conninfo

SCHEMES = ("postgresql", "postgres")
# ``scheme:`` with an RFC 3986 scheme of two or more characters (``C:\...`` is a path)
_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:")
MASK = "***"


class LocationError(ValueError):
    """A location that is neither a file path nor a URL this server serves."""


def is_postgres_url(location: str) -> bool:
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def looks_like_url(location: str) -> bool:
    return bool(_URL_LIKE.match(location)) and not location.startswith(("./", "/"))


def check_location(location: str) -> str:
    """``location`` when it is a PostgreSQL URL libpq can parse or no URL at all (a path);
    ``LocationError`` otherwise, with a message that never quotes the URL (it may carry a
    password)."""
    if is_postgres_url(location):
        try:
            psycopg.conninfo.conninfo_to_dict(location)
        except psycopg.ProgrammingError:
            raise LocationError("is not a valid postgresql:// URL") from None
        return location
    if looks_like_url(location):
        scheme = location.split(":", 1)[0]
        if len(scheme) > 32 or not scheme.isascii():
            scheme = "this"
        raise LocationError(
            f"the {scheme!r} scheme is not served: use a file path (SQLite) or a postgresql:// URL"
        )
    return location


def _secret(key: str) -> bool:
    """Whether a libpq connection parameter holds a secret (or may: an unknown one
    named like one)."""
    name = unquote(key).lower()
    return any(word in name for word in ("password", "secret", "token"))


def masked(url: str) -> str:
    """``url`` with any password replaced by ``***`` (in the authority and in every
    query parameter that holds a secret: ``password``, ``sslpassword``,
    ``oauth_client_secret``, ...), for logs and messages."""
    if not is_postgres_url(url):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{url.split('://', 1)[0]}://{MASK}"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if has_password else f"{user}@{host}"
    query = "&".join(
        f"{k}={MASK}" if _secret(k) else f"{k}={v}" if sep else k
        for k, sep, v in (p.partition("=") for p in parts.query.split("&") if p)
    )
    rebuilt = f"{parts.scheme}://{netloc}{parts.path}"
    return rebuilt + (f"?{query}" if query else "")


def with_options(url: str, **params: str) -> str:
    """``url`` with query parameters added (``application_name``, say)."""
    extra = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())
    return url + ("&" if "?" in url else "?") + extra
