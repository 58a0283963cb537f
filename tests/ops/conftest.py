"""Real plane files in a temporary directory, filled through the stores' own writes, and a
runner for ``ratatoskr admin`` through the CLI entry point."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from ratatoskr.affect.store import open_affect_store
from ratatoskr.cli import main
from ratatoskr.core.context import CallContext
from ratatoskr.memory.store import open_memory_store

DIM = 8
CTX = CallContext(actor="worldtree")
TENANTS = ("acme", "beta", "gamma")
USERS = ("u1", "u2", "u3", "u4")
ORIGINS = ("chat", "doc", None)


@dataclass
class Files:
    dir: Path
    memory: Path
    affect: Path


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return orjson.loads(self.out)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Files]:
    """Empty plane files, named through the environment as the server names them."""
    memory, affect = tmp_path / "memory.db", tmp_path / "affect.db"
    monkeypatch.setenv("RATATOSKR_MEMORY_DB", str(memory))
    monkeypatch.setenv("RATATOSKR_AFFECT_DB", str(affect))
    monkeypatch.delenv("RATATOSKR_MEMORY_EMBEDDING_DIM", raising=False)
    open_memory_store(str(memory), embedding_dim=DIM).close()
    open_affect_store(str(affect)).close()
    yield Files(tmp_path, memory, affect)


def vector(rng: random.Random) -> list[float]:
    return [rng.uniform(0.1, 1.0) for _ in range(DIM)]


def scope(rng: random.Random) -> dict[str, str]:
    out = {"tenant": rng.choice(TENANTS)}
    if rng.random() < 0.8:
        out["end_user"] = rng.choice(USERS)
    if rng.random() < 0.3:
        out["agent_self"] = rng.choice(("a1", "a2"))
    return out


def chunks(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        record: dict[str, Any] = {
            "id": f"c{i:04d}",
            "embedding": vector(rng),
            "scope": scope(rng),
            "distillate": f"note {i}",
        }
        origin = rng.choice(ORIGINS)
        if origin is not None:
            record["origin"] = origin
        out.append(record)
    return out


def fill(files: Files, n_chunks: int = 120, n_states: int = 40, n_events: int = 60) -> None:
    """Write records through the stores, in several calls (several idempotency entries)."""
    rng = random.Random(3)
    memory = open_memory_store(str(files.memory), embedding_dim=DIM)
    records = chunks(n_chunks)
    for start in range(0, n_chunks, 50):
        memory.upsert_many(records[start : start + 50], idempotency_key=f"m{start}", ctx=CTX)
    memory.close()
    affect = open_affect_store(str(files.affect))
    states = [{"id": f"s{i:04d}", "scope": scope(rng), "mood": "calm"} for i in range(n_states)]
    events = [
        {
            "id": f"e{i:04d}",
            "at": f"2025-01-01T00:{i % 60:02d}:00Z",
            "scope": scope(rng),
            "kind": "joy",
        }
        for i in range(n_events)
    ]
    if states:
        affect.put_many(states, idempotency_key="s", ctx=CTX)
    if events:
        affect.append_events(events, idempotency_key="e", ctx=CTX)
    affect.close()


@pytest.fixture
def filled(files: Files) -> Files:
    fill(files)
    return files


@pytest.fixture
def admin(capsys: pytest.CaptureFixture[str]) -> Any:
    """``admin("list", "memory", ...)`` runs ``ratatoskr admin list memory ...``."""

    def run(*args: str) -> Ran:
        capsys.readouterr()
        code = main(["admin", *args])
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run
