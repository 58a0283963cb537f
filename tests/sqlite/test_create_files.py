"""``DatabaseSettings(create_files=False)``: a missing file is refused (503), never created."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratatoskr.core.errors import Unavailable
from ratatoskr.sqlite.database import Database, DatabaseSettings
from ratatoskr.sqlite.jti import MIGRATIONS, JtiLedger

EXISTING = DatabaseSettings(create_files=False)


def test_a_missing_file_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "gone.db"
    with pytest.raises(Unavailable, match="database file is missing"):
        Database(str(path), MIGRATIONS, EXISTING)
    with pytest.raises(Unavailable, match="database file is missing"):
        JtiLedger(str(path), settings=EXISTING)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_opens_and_memory_still_works(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.db")
    JtiLedger(path).close()  # created by default
    ledger = JtiLedger(path, settings=EXISTING)
    try:
        assert ledger.claim("a", 1e12) is True
    finally:
        ledger.close()
    Database(":memory:", MIGRATIONS, EXISTING).close()
