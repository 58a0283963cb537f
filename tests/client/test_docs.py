"""docs/client.md against the client: every class its Errors section names is exported
from ``ratatoskr.client``."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import ratatoskr.client as client_module

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def test_every_class_the_doc_names_is_exported() -> None:
    errors = DOC.read_text().split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([A-Z][a-z]+(?:[A-Z][a-z]*)+)`", errors))
    ours = {name for name in named if not hasattr(builtins, name)}  # not TypeError, ...
    assert "MayHaveRun" in ours and "RevisionMismatch" in ours
    missing = sorted(name for name in ours if name not in client_module.__all__)
    assert missing == []
    assert isinstance(client_module.MayHaveRun("x"), OSError)
