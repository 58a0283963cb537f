"""What the wire needs from a replay ledger: claim a token id once, across every worker.

The wire sees only this Protocol; the SQLite ledger lives in ``ratatoskr.sqlite.jti``.
"""

from __future__ import annotations

from typing import Protocol


class ReplayGuard(Protocol):
    def claim(self, jti: str, expires_at: float) -> bool:
        """Record ``jti`` until ``expires_at``; False when it was already recorded."""
        ...
