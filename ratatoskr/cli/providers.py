"""``ratatoskr-memory-provider`` and ``ratatoskr-affect-provider``: one plane, one process.

The contract's dev-shell entry points: plain uvicorn (no gunicorn, no worker processes)
serving the composite app restricted to one plane, with the same settings, key handling,
logs and metrics (single-process registry) as ``ratatoskr serve``.
"""

from __future__ import annotations

import sys

from ratatoskr.cli.serve import dev_key_banner


def _serve_one(plane: str) -> int:
    import uvicorn

    from ratatoskr.server.app import check_stores, create_app
    from ratatoskr.server.logs import configure_logging
    from ratatoskr.server.settings import SettingsError, load_settings

    try:
        settings = load_settings(generate_dev_key=True)
        if settings.replica is not None:
            raise SettingsError("RATATOSKR_REPLICA_URL: replication runs under ratatoskr serve")
        check_stores(settings, (plane,))
    except SettingsError as exc:
        print(f"ratatoskr-{plane}-provider: {exc}", file=sys.stderr)
        return 2
    if settings.dev_key_file is not None:
        print(dev_key_banner(str(settings.dev_key_file), settings.dev_key_generated), flush=True)
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
    raise SystemExit(_serve_one("memory"))


def affect_provider_main() -> None:
    raise SystemExit(_serve_one("affect"))
