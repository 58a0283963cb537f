"""gunicorn run in-process, configured from ``ratatoskr.server.gunicorn_conf`` plus the settings.

The process that runs ``ratatoskr serve`` becomes gunicorn's master, so a SIGTERM to it is
a graceful shutdown and its exit status is gunicorn's.
"""

from __future__ import annotations

import sys
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter

from ratatoskr.server import gunicorn_conf
from ratatoskr.server.logs import logging_config
from ratatoskr.server.replication import SupervisorKeeper
from ratatoskr.server.settings import Settings


class ServeApplication(BaseApplication):  # type: ignore[misc]
    """Each worker builds the composite app from the settings the master validated."""

    def __init__(self, settings: Settings, replication: SupervisorKeeper | None = None) -> None:
        self.settings = settings
        self.replication = replication
        super().__init__()

    def run(self) -> None:
        try:
            _ServeArbiter(self).run()
        except RuntimeError as exc:  # as gunicorn's own run says it
            print(f"\nError: {exc}\n", file=sys.stderr, flush=True)
            sys.exit(1)

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


class _ServeArbiter(Arbiter):  # type: ignore[misc]
    """gunicorn's master, which also keeps the replication supervisor running: its loop
    turns at least once a second and reaps children, the supervisor among them."""

    def reap_workers(self) -> None:
        self._tend_replication()
        super().reap_workers()

    def manage_workers(self) -> None:
        self._tend_replication()
        super().manage_workers()

    def _tend_replication(self) -> None:
        keeper = getattr(self.app, "replication", None)
        if keeper is not None:
            keeper.tend()
