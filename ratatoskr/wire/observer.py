"""A seam for watching calls without the wire knowing who watches (metrics, in the server).

The wire calls ``call_finished`` once per call, after its log line, with the same allow-listed
record the log gets: plane, verb (``-`` when the plane does not know it), outcome code, HTTP
status, counts and whether the store answered an idempotent replay. An observer that raises
never changes the call's answer.
"""

from __future__ import annotations

from typing import Protocol

from ratatoskr.wire.calllog import CallRecord


class CallObserver(Protocol):
    """What ``WireEndpoints`` tells an observer about each call."""

    def call_finished(self, record: CallRecord, duration_seconds: float) -> None: ...
