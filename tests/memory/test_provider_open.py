"""The seed's opener, ``ratatoskr.provider.memory_store.open_memory_store``, opens the store on
either backend: a SQLite file as the seed names it, or a ``postgresql://`` URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratatoskr.memory.postgres.store import PgMemoryStore
from ratatoskr.provider.memory_store import RatatoskrMemoryStore, open_memory_store
from tests.backends import postgres_schema
from tests.memory.helpers import CTX, DIM, chunk, vec


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_seeds_opener_opens_either_backend(tmp_path: Path, backend: str) -> None:
    location = str(tmp_path / "memory.db") if backend == "sqlite" else postgres_schema("opener")
    store = open_memory_store(location, embedding_dim=DIM)
    try:
        kind = RatatoskrMemoryStore if backend == "sqlite" else PgMemoryStore
        assert isinstance(store, kind)
        store.upsert_many([chunk("c1", vec(1))], idempotency_key="k", ctx=CTX)
        record = store.get("c1")
        assert record is not None and record["revision"] == 1
    finally:
        store.close()


def test_a_url_of_another_scheme_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'mysql' scheme is not served"):
        open_memory_store("mysql://user:secret@host/db", embedding_dim=DIM)
