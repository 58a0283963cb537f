"""What a write may overwrite, decided alike by every backend of both planes.

A backend reads the revision and scope of each record a batch names that is already stored
(inside its write transaction), then asks ``check_overwrites``; it writes only if that
returns. The rules are the reference stores' (``memory.reference``, ``affect.reference``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ratatoskr.core.errors import RevisionMismatch, ScopeForbidden
from ratatoskr.core.scope import Scope, contains

Stored = dict[str, tuple[int, Scope]]  # id -> (revision, scope) of the batch's stored records


def check_overwrites(
    stored: Stored, token_scope: Mapping[str, str], expected_revisions: Mapping[str, int] | None
) -> None:
    """Refuse the batch when a stored record lies outside the token scope (a token cannot
    overwrite what it could not read), or when ``expected_revisions`` differs from what is
    stored (0 for a record not stored), naming every mismatch."""
    for record_id, (_, scope) in stored.items():
        if not contains(scope, token_scope):
            raise ScopeForbidden(f"record {record_id} exists outside the token scope")
    if expected_revisions is not None:
        mismatches = [
            {"id": rid, "expected": rev, "actual": stored.get(rid, (0, {}))[0]}
            for rid, rev in expected_revisions.items()
            if stored.get(rid, (0, {}))[0] != rev
        ]
        if mismatches:
            raise RevisionMismatch(mismatches)
