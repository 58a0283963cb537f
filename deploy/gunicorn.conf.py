"""gunicorn config for ratatoskr: ``gunicorn -c deploy/gunicorn.conf.py``.

The settings live in the package (``ratatoskr/server/gunicorn_conf.py``) so that ``ratatoskr serve``
and a bare gunicorn command run with the same timeouts, hooks and logging.
"""

from ratatoskr.server.gunicorn_conf import *  # noqa: F403
