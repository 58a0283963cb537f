"""Refusing a port another server already listens on.

Each worker binds its own ``SO_REUSEPORT`` socket (``gunicorn_conf.reuse_port``), and such
binds do not fail when another server of the same user holds the port with that option
too: the two would silently share its connections, each answering from its own data. A
probe bound without the option does fail. ``ratatoskr serve`` checks before it starts
gunicorn; a bare ``gunicorn -c deploy/gunicorn.conf.py`` checks in its ``on_starting``.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterable

from ratatoskr.server.settings import SettingsError


def check_port_free(host: str, port: int, another: str = "--port picks another") -> None:
    """``SettingsError`` when something already listens on ``host:port``; ``another`` says
    how this command picks another port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no owner
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:  # the address is the trouble, not the port
                raise SettingsError(
                    f"RATATOSKR_HOST: {host} cannot be bound ({exc.strerror}; --host picks "
                    "another address)"
                ) from None
            raise SettingsError(
                f"RATATOSKR_PORT: port {port} on {host} is in use ({another})"
            ) from None


def check_binds_free(binds: Iterable[str]) -> None:
    """``check_port_free`` for each of gunicorn's ``bind`` addresses (``host:port``,
    ``[v6]:port``); a Unix socket is gunicorn's to handle."""
    for bind in binds:
        if bind.startswith(("unix:", "fd://")) or ":" not in bind:
            continue
        host, _, port = bind.rpartition(":")
        check_port_free(host.strip("[]") or "0.0.0.0", int(port), "gunicorn's -b picks another")
