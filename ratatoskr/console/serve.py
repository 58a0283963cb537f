"""Starting the console: bind, print the one URL with its fresh secret, serve with uvicorn.

Loopback only unless the operator says ``--allow-remote``: the secret is the only lock and
the console speaks plain HTTP, so another host would see it on the wire. The socket is
bound before the URL is printed, so ``--port 0`` prints the port really taken, and logs go
through the server's formatter (JSON lines; access lines without the query string, so the
secret in the first URL never reaches a log).
"""

from __future__ import annotations

import contextlib
import getpass
import ipaddress
import os
import socket
import sys

import orjson
import uvicorn

from ratatoskr.console.app import create_console_app
from ratatoskr.console.auth import TOKEN_PARAM, Secret, loopback_hosts
from ratatoskr.ops.stores import Stores
from ratatoskr.server.logs import configure_logging, logging_config
from ratatoskr.server.settings import LOG_FORMAT_ENV, LOG_FORMATS, LOG_LEVEL_ENV, LOG_LEVELS

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, *, allow_remote: bool) -> str | None:
    """Refuse a host other machines could reach unless allowed; the warning to print if so."""
    if is_loopback(host):
        return None
    if not allow_remote:
        raise ValueError(
            f"refusing to serve the console on {host}, which other machines can reach: "
            "use the default 127.0.0.1 (and an SSH tunnel), or add --allow-remote"
        )
    return (
        f"warning: the console on {host} is reachable from other machines over plain HTTP; "
        "anyone who sees its URL can read and erase records"
    )


def _setting(name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip().lower()
    return value if value in allowed else default


def serve(
    stores: Stores,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    allow_remote: bool = False,
    operator: str | None = None,
    as_json: bool = False,
) -> int:
    """Serve until Ctrl-C (or SIGTERM); 0 on that stop. ``as_json``: the start line is one
    JSON object (``url``, ``operator``, ``host``, ``port``) for a script to read."""
    warning = check_host(host, allow_remote=allow_remote)
    # a database that cannot be reached now is a plane down, not a reason to refuse the
    # start: that is when the operator needs the console's view of the other plane
    unreachable: dict[str, str] = {}
    if not stores.present(unreachable=unreachable):
        paths = ", ".join(stores.paths.shown(p) for p in ("memory", "affect"))
        raise ValueError(f"no database found at {paths} (see --memory-db, --affect-db)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(64)
    bound = int(sock.getsockname()[1])
    secret = Secret.fresh(bound)
    who = operator or getpass.getuser()
    # on loopback only the console's own names: a rebinding site's name is refused
    hosts = None if warning is not None else loopback_hosts(host, bound)
    app = create_console_app(stores, secret, operator=who, hosts=hosts)
    level = _setting(LOG_LEVEL_ENV, "info", LOG_LEVELS)
    log_format = _setting(LOG_FORMAT_ENV, "json", LOG_FORMATS)
    configure_logging(level, log_format)
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    if warning is not None:
        print(warning, file=sys.stderr, flush=True)
    for plane, reason in unreachable.items():
        print(f"warning: the {plane} plane is down: {reason}", file=sys.stderr, flush=True)
    url = f"http://{shown}:{bound}/?{TOKEN_PARAM}={secret.value}"
    if as_json:
        start = {"url": url, "operator": who, "host": host, "port": bound}
        print(orjson.dumps(start).decode(), flush=True)
    else:
        print(
            f"ratatoskr console for {who}: {url}\n"
            "open it in a browser on this machine; Ctrl-C stops the console",
            flush=True,
        )
    config = uvicorn.Config(
        app,
        log_config=logging_config(level, log_format),
        lifespan="off",
        server_header=False,
        proxy_headers=False,
    )
    # uvicorn re-raises the Ctrl-C it shut down on: for the console that is a normal stop
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run(sockets=[sock])
    return 0
