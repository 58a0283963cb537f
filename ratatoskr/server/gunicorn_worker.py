"""The gunicorn worker: uvicorn's, with a SIGQUIT that stops it.

gunicorn's master stops its workers with SIGQUIT when it gets SIGINT or SIGQUIT itself (its
quick stop; a Ctrl-C in a terminal reaches every process of the group, but ``kill -INT`` of
the master, a process manager's stop signal, reach the master alone). uvicorn-worker's
handler only marks the worker dead, which uvicorn's server never reads: the worker went on
taking new calls until the master killed it at the end of its graceful timeout, cutting
the calls under way. Here SIGQUIT asks the server to stop as SIGTERM does: no new
connection, the calls under way finished, then exit.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from gunicorn.arbiter import Arbiter
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker


class ServeWorker(UvicornWorker):  # type: ignore[misc]
    async def _serve(self) -> None:
        self.config.app = self.wsgi
        server = Server(config=self.config)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGQUIT, server.handle_exit, signal.SIGTERM, None)
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
