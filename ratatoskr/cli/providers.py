"""``ratatoskr-memory-provider`` and ``ratatoskr-affect-provider``: one plane, one process.

The contract's dev-shell entry points: plain uvicorn (no gunicorn, no worker processes)
serving the composite app restricted to one plane, with the same settings, key handling,
logs and metrics (single-process registry) as ``ratatoskr serve``.
"""

from __future__ import annotations

import sys

from ratatoskr.cli.serve import dev_key_banner


def _usage(plane: str) -> str:
    return (
        f"usage: ratatoskr-{plane}-provider\n\n"
        f"Serve the {plane} plane alone in one process (plain uvicorn), configured by the\n"
        "same RATATOSKR_* environment variables as `ratatoskr serve` (see the README).\n"
        "It takes no arguments; in production use `ratatoskr serve`."
    )


def _serve_one(plane: str, argv: list[str]) -> int:
    if argv:
        asked = argv[0] in ("-h", "--help")
        print(_usage(plane), file=sys.stdout if asked else sys.stderr)
        if not asked:
            print(f"ratatoskr-{plane}-provider: takes no arguments", file=sys.stderr)
        return 0 if asked else 2
    import uvicorn

    from ratatoskr.server.app import check_stores, create_app
    from ratatoskr.server.logs import configure_logging
    from ratatoskr.server.settings import DEFAULT_PORT, SettingsError, load_settings

    try:
        settings = load_settings(generate_dev_key=True)
        if settings.replica is not None:
            raise SettingsError("RATATOSKR_REPLICA_URL: replication runs under ratatoskr serve")
        settings = check_stores(settings, (plane,))
    except SettingsError as exc:
        print(f"ratatoskr-{plane}-provider: {exc}", file=sys.stderr)
        return 2
    if settings.dev_key_file is not None:
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        url = None if settings.port == DEFAULT_PORT else f"http://{host}:{settings.port}"
        banner = dev_key_banner(str(settings.dev_key_file), settings.dev_key_generated, url)
        print(banner, file=sys.stderr, flush=True)  # stdout carries JSON log lines only
    configure_logging(settings.log_level, settings.log_format)
    app = create_app(settings, planes=(plane,))
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        log_level=settings.log_level,
        timeout_graceful_shutdown=30,
    )
    return 0


def memory_provider_main() -> None:
    raise SystemExit(_serve_one("memory", sys.argv[1:]))


def affect_provider_main() -> None:
    raise SystemExit(_serve_one("affect", sys.argv[1:]))
