"""gunicorn run in-process, configured from ``ratatoskr.server.gunicorn_conf`` plus the settings.

The process that runs ``ratatoskr serve`` becomes gunicorn's master, so a SIGTERM to it is
a graceful shutdown and its exit status is gunicorn's.
"""

from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication

from ratatoskr.server import gunicorn_conf
from ratatoskr.server.logs import logging_config
from ratatoskr.server.settings import Settings


class ServeApplication(BaseApplication):  # type: ignore[misc]
    """Each worker builds the composite app from the settings the master validated."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        super().__init__()

    def load_config(self) -> None:
        known = self.cfg.settings
        for name, value in vars(gunicorn_conf).items():
            if name in known and name != "wsgi_app" and value is not None:
                self.cfg.set(name, value)
        host = self.settings.host
        self.cfg.set(
            "bind",
            [f"[{host}]:{self.settings.port}" if ":" in host else f"{host}:{self.settings.port}"],
        )
        self.cfg.set("workers", self.settings.workers)
        self.cfg.set("loglevel", self.settings.log_level)
        self.cfg.set(
            "logconfig_dict", logging_config(self.settings.log_level, self.settings.log_format)
        )

    def load(self) -> Any:
        from ratatoskr.server.app import create_app

        return create_app(self.settings)
