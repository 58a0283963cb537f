"""What the wire needs from a replay ledger: claim a token id once, across every worker.

The wire sees only this Protocol; the ledgers live in ``ratatoskr.sqlite.jti`` (a file
beside the planes) and ``ratatoskr.postgres.jti`` (a table every server shares).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class ReplayGuard(Protocol):
    def claim(self, jti: str, expires_at: float) -> bool:
        """Record ``jti`` until ``expires_at``; False when it was already recorded."""
        ...


@runtime_checkable
class CheckedGuard(ReplayGuard, Protocol):
    """A replay guard that can say why it cannot be used now (the jti ledgers)."""

    def problem(self) -> str | None:
        """Why a claim would fail now (no path, no secret), None when it would not."""
        ...
