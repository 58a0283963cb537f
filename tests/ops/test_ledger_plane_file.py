"""A plane file given where the jti ledger goes (``--jti-db data/memory.db``) is called a
plane file by every command that opens the ledger, not a ledger too new for this
ratatoskr."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ops.conftest import Files


@pytest.mark.parametrize("plane", ["memory", "affect"])
@pytest.mark.parametrize(
    "command",
    [["check"], ["stats"], ["prune"], ["backup", "--to", "BACKUP"]],
    ids=lambda c: c[0],
)
def test_a_plane_file_given_as_the_ledger_is_called_a_plane_file(
    filled: Files, admin: Any, plane: str, command: list[str]
) -> None:
    """``--jti-db data/memory.db``: the memory file's schema version is newer than a
    ledger's, but "upgrade ratatoskr" would send the operator the wrong way."""
    path = str(filled.memory if plane == "memory" else filled.affect)
    args = [str(filled.dir / "copy") if a == "BACKUP" else a for a in command]
    ran = admin(*args, "--jti-db", path)
    said = ran.out + ran.err
    assert ran.code != 0 or command[0] == "stats", said
    assert f"the {plane} plane's database, not a jti ledger" in said
    assert "upgrade" not in said and "newer" not in said
