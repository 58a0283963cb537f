"""What the SQLite stores add to the operator methods: an erase truncates the WAL, so no
copy of an erased record stays in it, and a store in memory has no storage to measure."""

from __future__ import annotations

import os

from ratatoskr.affect.store import open_affect_store
from ratatoskr.core.filters import KINDS
from ratatoskr.memory.store import open_memory_store
from tests.admin.conftest import DIM, Kit


def test_erase_truncates_the_wal(sqlite_kit: Kit) -> None:
    kit = sqlite_kit
    kind = KINDS[kit.plane][0]
    kit.write(kind, [kit.record(kind, "gone", {"tenant": "t", "end_user": "u"})], "k")
    wal = kit.location + "-wal"
    assert os.path.getsize(wal) > 0
    report = kit.store.erase({"end_user": "u"})
    assert report[kind] == 1 and report["wal_truncated"] is True
    assert os.path.getsize(wal) == 0


def test_a_store_in_memory_has_no_storage_bytes() -> None:
    memory = open_memory_store(":memory:", embedding_dim=DIM)
    affect = open_affect_store(":memory:")
    try:
        assert memory.storage_bytes() is None and affect.storage_bytes() is None
        assert memory.record_counts() == {"chunk": 0}
        assert affect.record_counts() == {"event": 0, "state": 0}
    finally:
        memory.close()
        affect.close()
