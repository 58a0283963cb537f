"""What a worker answers while its stores are not open (starting, or retrying after a start
that could not open them).

Such a worker still speaks the wire: a call gets the wire's error envelope
(``<plane>.unavailable``, 503, ``retryable: true``, a request id in the body and in
``X-Request-ID``), is logged as a call and counted in ``/metrics`` like any other, so the
alerts on 5xx and unavailable answers see it. ``/healthz`` stays 200 (the process answers:
a liveness probe must not restart a worker for a database's trouble), ``/readyz`` is 503
with every plane ``down`` and why, and the plane-health gauge says ``down``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ratatoskr.core.errors import Unavailable
from ratatoskr.server.metrics import Metrics
from ratatoskr.wire.calllog import ANSWERING, CallRecord, log_call
from ratatoskr.wire.envelope import error_body, new_request_id

JSON = "application/json"


class UnopenedWire:
    """The ASGI app of a worker whose planes ``names`` are not open; ``reason()`` says why."""

    def __init__(self, names: Sequence[str], reason: Callable[[], str], metrics: Metrics) -> None:
        self.names = list(names)
        self.reason = reason
        self.metrics = metrics
        metrics.know_plane_names(self.names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http":
            return
        if path == "/healthz":
            response = Response(orjson.dumps({"status": "ok"}), media_type=JSON)
        elif path == "/readyz":
            down = {"status": "down", "reason": self.reason()}
            body = {"ready": False, "planes": {name: down for name in self.names}}
            response = Response(orjson.dumps(body), status_code=503, media_type=JSON)
        else:
            response = self._call(path)
        await response(scope, receive, send)

    def _call(self, path: str) -> Response:
        """A wire call (or any other path) answered ``<plane>.unavailable``, logged and
        counted as a call."""
        started = time.perf_counter()
        plane = self._plane_of(path)
        record = CallRecord(request_id=new_request_id(), plane=plane)
        error = Unavailable(f"store unavailable: {self.reason()}")
        record.outcome, record.status = error.wire_code(plane), error.http_status
        response = Response(
            error_body(error, plane, record.request_id),
            status_code=error.http_status,
            media_type=JSON,
            headers={"X-Request-ID": record.request_id},
        )
        elapsed = time.perf_counter() - started
        ANSWERING.set(record.request_id)
        log_call(record, elapsed * 1000)
        self.metrics.call_finished(record, elapsed)
        return response

    def _plane_of(self, path: str) -> str:
        """The plane a path calls; a handshake or another path is the first plane's."""
        for name in self.names:
            if path == f"/bifrost/{name}-call":
                return name
        return self.names[0]
