"""The console's audit lines, through the server's log formatter (``server.logs``).

Opening a record is the one place content reaches a page, so each open is one line: who
(the operator the console was started for, and the client address), which plane and id,
and when (the formatter's timestamp). Removals are logged with their counts only: no line
holds content, and none holds the filter's scope values, since an erased subject's id must
not outlive the erasure in a log.
"""

from __future__ import annotations

from typing import Any

import structlog

_log = structlog.get_logger("ratatoskr.console.audit")


def record_opened(*, actor: str, client: str, plane: str, record_id: str, found: int) -> None:
    _log.info(
        "console.record_opened",
        actor=actor,
        client=client,
        plane=plane,
        record_id=record_id,
        counts={"found": found},
    )


def removed(*, actor: str, client: str, what: str, counts: dict[str, Any]) -> None:
    """``what``: ``forget`` (a node or a selection of one plane) or ``erase`` (a subject)."""
    flat = {
        f"{plane}.{kind}": n
        for plane, per_kind in counts.items()
        for kind, n in per_kind.items()
        if isinstance(n, int) and not isinstance(n, bool)
    }
    _log.info(f"console.{what}", actor=actor, client=client, counts=flat)
