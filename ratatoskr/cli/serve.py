"""``ratatoskr serve``: validate the settings, then run gunicorn with the composite app.

The master validates everything once (settings, both store files, the key) so that a bad
setting exits non-zero with its name instead of crashing every worker at boot. With no key
setting it generates the development key and prints its path, never the key.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import stat
import sys
from typing import Any

EXAMPLE = "call memory health --scope tenant=acme"


def cli_command() -> str:
    """How to type ``ratatoskr`` here: bare when it is on PATH, else the virtualenv's script
    relative to the current directory (``make run`` does not activate ``.venv``)."""
    script = os.path.join(os.path.dirname(sys.executable), "ratatoskr")
    if shutil.which("ratatoskr") == script or not os.path.exists(script):
        return "ratatoskr"
    relative = os.path.relpath(script)
    return relative if not relative.startswith("..") else script


def _port(value: str) -> int:
    port = int(value) if value.strip().isdigit() else 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError("a port is 1..65535")
    return port


def _workers(value: str) -> int:
    workers = int(value) if value.strip().isdigit() else 0
    if not 1 <= workers <= 64:
        raise argparse.ArgumentTypeError("workers is 1..64")
    return workers


def dev_key_banner(path: str, generated: bool, url: str | None = None) -> str:
    """The start-up lines about the development key; ``url``: the server's, when the
    example call must name it (not the default port)."""
    what = "generated a development key in" if generated else "using the development key in"
    where = f" --url {url}" if url is not None else ""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    lines = [
        f"ratatoskr: {what} {path} (mode {mode:04o}; set RATATOSKR_HEIMDALL_KEY_FILE in production)"
    ]
    if mode & 0o077:  # anyone who can read it can mint tokens for every scope
        lines.append(f"ratatoskr: warning: other users can read the key: chmod 600 {path}")
    lines.append(
        f"ratatoskr: try, in a second shell from this directory: {cli_command()} {EXAMPLE}{where}"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    # before anything imports prometheus_client: the multiprocess value class is chosen at import
    from ratatoskr.server.gunicorn_conf import ensure_multiproc_dir, release_multiproc_dir

    try:
        ensure_multiproc_dir()
    except OSError as exc:
        print(
            f"ratatoskr serve: PROMETHEUS_MULTIPROC_DIR: the metrics directory cannot be made "
            f"or used ({exc.strerror})",
            file=sys.stderr,
        )
        return 2
    from ratatoskr.server.app import check_stores
    from ratatoskr.server.ports import check_port_free
    from ratatoskr.server.settings import DEFAULT_PORT, SettingsError, load_settings

    try:
        settings = load_settings(generate_dev_key=True)
        overrides = {"host": args.host, "port": args.port, "workers": args.workers}
        settings = dataclasses.replace(
            settings, **{k: v for k, v in overrides.items() if v is not None}
        )
        settings = check_stores(settings)
        check_port_free(settings.host, settings.port)
    except SettingsError as exc:
        release_multiproc_dir()
        print(f"ratatoskr serve: {exc}", file=sys.stderr)
        return 2
    # for the person at the terminal, on stderr: stdout carries JSON log lines only
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    if settings.dev_key_file is not None:
        url = None if settings.port == DEFAULT_PORT else f"http://{host}:{settings.port}"
        banner = dev_key_banner(str(settings.dev_key_file), settings.dev_key_generated, url)
        print(banner, file=sys.stderr, flush=True)
    # gunicorn's own "Listening at" line is empty (each worker binds its socket itself);
    # the JSON log has "serving ..." from the when_ready hook
    print(
        f"ratatoskr: serving http://{host}:{settings.port} with {settings.workers} workers",
        file=sys.stderr,
        flush=True,
    )
    from ratatoskr.cli.gunicorn_app import ServeApplication
    from ratatoskr.server.replication import SupervisorKeeper

    replication_log = logging.getLogger("ratatoskr.replication")

    def exited(event: str, status: int | None) -> None:
        replication_log.error(event, extra={"fields": {"exit_status": status}})

    # Litestream, when RATATOSKR_REPLICA_URL is set: started before the workers fork, started
    # again if it dies while they serve, stopped after the last one has stopped so its final
    # sync covers every acknowledged write
    replication = SupervisorKeeper(settings, exited)
    replication.start()
    try:
        ServeApplication(settings, replication).run()
    finally:
        replication.stop()
    return 0


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "serve",
        help="run the server (gunicorn, both planes)",
        description="Serve both planes with gunicorn; settings come from RATATOSKR_* variables.",
    )
    parser.add_argument("--host", help="bind address (default RATATOSKR_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=_port, help="default RATATOSKR_PORT or 8000")
    parser.add_argument("--workers", type=_workers, help="default RATATOSKR_WORKERS or 2")
    parser.set_defaults(handler=run)
