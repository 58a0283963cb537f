"""gunicorn's production settings for ratatoskr, as a config module.

``ratatoskr serve`` loads it (``deploy/gunicorn.conf.py`` re-exports it for a bare
``gunicorn -c deploy/gunicorn.conf.py 'ratatoskr.server.app:app_from_env()'``). Why each value:

- ``gunicorn_worker.ServeWorker``: the maintained ASGI worker (``uvicorn_worker``;
  ``uvicorn.workers`` is deprecated) with a SIGQUIT that stops it; blocking SQLite calls run
  in its threadpool, never on the event loop.
- ``max_requests = 0``: no worker recycling; a recycled worker leaves metric files behind
  and drops its live gauges mid-scrape.
- ``graceful_timeout``: how long a SIGTERM waits for in-flight calls; the container's
  ``stop_grace_period`` must be longer.
- the control socket is off: nothing here manages workers at run time.
- numpy's BLAS on one thread (``ratatoskr.core.blas``), set before the workers import
  numpy.
- each worker, once the app is imported, settles the interpreter for serving
  (``ratatoskr.core.interpreter``: a 0.5 ms GIL switch interval, startup objects frozen out
  of the cyclic collector).
- one logging config (``ratatoskr.server.logs``) for gunicorn, uvicorn and the app.
- metrics: ``PROMETHEUS_MULTIPROC_DIR`` is set here, before anything imports
  prometheus_client; the master wipes it at start and marks each dead worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from typing import Any

from ratatoskr.core.blas import single_threaded
from ratatoskr.server.logs import logging_config

single_threaded()  # the workers inherit it, before they import the app (and numpy)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
GRACEFUL_TIMEOUT = 30
_OWNED_DIR_ENV = "RATATOSKR_OWNED_METRICS_DIR"


def ensure_multiproc_dir() -> str:
    """The metrics directory, made per server (by master pid) when none is configured."""
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        path = os.path.join(tempfile.gettempdir(), f"ratatoskr-metrics-{os.getpid()}")
        os.environ[MULTIPROC_ENV] = path
        os.environ[_OWNED_DIR_ENV] = path
    os.makedirs(path, exist_ok=True)
    return path


with contextlib.suppress(OSError):  # ``serve`` makes it again first and names the variable
    ensure_multiproc_dir()
logging.raiseExceptions = False  # a failing record's arguments are never printed

_host = os.environ.get("RATATOSKR_HOST", "").strip() or "127.0.0.1"
_port = os.environ.get("RATATOSKR_PORT", "").strip() or "8000"
_level = os.environ.get("RATATOSKR_LOG_LEVEL", "").strip().lower() or "info"
_format = os.environ.get("RATATOSKR_LOG_FORMAT", "").strip().lower() or "json"

wsgi_app = "ratatoskr.server.app:app_from_env()"
bind = [f"[{_host}]:{_port}" if ":" in _host else f"{_host}:{_port}"]


def _workers(raw: str) -> int:
    """``RATATOSKR_WORKERS`` as ``serve`` validated it (settings name a bad value first)."""
    try:
        return int(raw.strip() or 2)
    except ValueError:
        return 2


workers = _workers(os.environ.get("RATATOSKR_WORKERS", ""))
worker_class = "ratatoskr.server.gunicorn_worker.ServeWorker"
# Each worker binds its own SO_REUSEPORT socket and the kernel spreads new connections over
# them. With one shared socket, the worker that wakes first accepts every pending connection:
# a client opening its keep-alive pool at once put all 8 on one worker, which then served
# alone on one core while the other idled.
reuse_port = True
proc_name = "ratatoskr"
timeout = 60
graceful_timeout = GRACEFUL_TIMEOUT
keepalive = 5
max_requests = 0
max_requests_jitter = 0
preload_app = False
control_socket_disable = True
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
loglevel = _level
accesslog = None  # access lines come from uvicorn.access, through the shared handler
logconfig_dict = logging_config(_level, _format)


def on_starting(server: Any) -> None:
    """Master, before the first worker: samples of an earlier run must not be summed; under
    a bare ``gunicorn -c`` (``ratatoskr serve`` does both itself) a port another server
    listens on is refused and replication starts here."""
    from ratatoskr.server.metrics import wipe_multiprocess_dir

    wipe_multiprocess_dir()
    if getattr(server.app, "settings", None) is None:
        from ratatoskr.server.ports import check_binds_free
        from ratatoskr.server.replication import start_from_env
        from ratatoskr.server.settings import SettingsError

        try:  # ``serve`` checked it before gunicorn; a bare gunicorn checks here
            check_binds_free(server.cfg.bind)
        except SettingsError as exc:
            server.log.error("ratatoskr: %s", exc)
            raise SystemExit(2) from None
        server.ratatoskr_replication = start_from_env()


def when_ready(server: Any) -> None:
    """Master, once started: where it serves, in the JSON log (gunicorn's own "Listening at"
    line names no address, since each worker binds its own socket)."""
    urls = " ".join(f"http://{bind}" for bind in server.cfg.bind)
    server.log.info("serving %s with %d workers", urls, server.cfg.workers)


def post_fork(server: Any, worker: Any) -> None:
    """Worker, just forked: it ends with the master (``parent_death.py``), never serving on
    alone once the master is killed outright."""
    from ratatoskr.core.parent_death import end_with

    end_with(server.pid)


def post_worker_init(worker: Any) -> None:
    """Worker, the app imported: the interpreter settled for serving (its GIL handed over
    within 0.5 ms, the startup objects out of the collector's walks)."""
    from ratatoskr.core.interpreter import settle_for_serving

    settle_for_serving()


def child_exit(server: Any, worker: Any) -> None:
    """Master, when a worker exits: its live gauges leave the sums."""
    from ratatoskr.server.metrics import mark_process_dead

    mark_process_dead(worker.pid)


def release_multiproc_dir() -> None:
    """Remove the metrics directory if this process made it (not one an operator set)."""
    owned = os.environ.get(_OWNED_DIR_ENV)
    if owned and owned == os.environ.get(MULTIPROC_ENV):
        shutil.rmtree(owned, ignore_errors=True)


def on_exit(server: Any) -> None:
    """Master, at exit (after the last worker): replication started here stops, and the
    metrics directory goes with the server that made it."""
    from ratatoskr.server.replication import stop_supervisor

    stop_supervisor(getattr(server, "ratatoskr_replication", None))
    release_multiproc_dir()
