"""What ``admin check`` verifies of each stored vector's values, the same on every backend:
finite float32 values, not all zero, a float64 copy (kept when the values sent were not
float32-exact) that is finite and rounds to them, and, where a separate index holds the
vector (SQLite's ``memory_vec``), the same bytes there. A vector edited or damaged behind
the store's back otherwise passes every other check while search and ``get`` disagree."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

BATCH = 4096  # rows per numpy step
SHOWN_IDS = 5

# (chunk_id, float32 bytes, float64 bytes or None, the index's float32 bytes or None)
Row = tuple[str, bytes, bytes | None, bytes | None]


@dataclass
class _Found:
    what: str
    ids: list[str] = field(default_factory=list)

    def problem(self) -> str | None:
        if not self.ids:
            return None
        shown = ", ".join(sorted(self.ids)[:SHOWN_IDS])
        more = ", ..." if len(self.ids) > SHOWN_IDS else ""
        return f"{len(self.ids)} {self.what}: {shown}{more}"


def _batches(rows: Iterable[Row]) -> Iterator[list[Row]]:
    it = iter(rows)
    while batch := list(islice(it, BATCH)):
        yield batch


def value_problems(rows: Iterable[Row], dim: int) -> list[str]:
    """The problems among ``rows`` (each of length ``dim``; other lengths are reported by
    the shape check and skipped here)."""
    bad32 = _Found("chunk(s) whose vector holds a value that is not finite")
    zero = _Found("chunk(s) whose vector is all zero")
    bad64 = _Found("chunk(s) whose float64 vector is not finite or does not round to it")
    index = _Found("chunk(s) whose vector index row differs from the stored vector")
    for batch in _batches(rows):
        batch = [r for r in batch if len(r[1]) == 4 * dim]
        if not batch:
            continue
        ids = [r[0] for r in batch]
        f32 = np.frombuffer(b"".join(r[1] for r in batch), dtype=np.float32).reshape(-1, dim)
        with np.errstate(invalid="ignore"):
            bad32.ids += [ids[i] for i in np.flatnonzero(~np.isfinite(f32).all(axis=1))]
            zero.ids += [ids[i] for i in np.flatnonzero(~(f32 != 0).any(axis=1))]
        for row, (chunk_id, stored, f64, indexed) in enumerate(batch):
            if indexed is not None and indexed != stored:
                index.ids.append(chunk_id)
            if f64 is not None and len(f64) == 8 * dim:
                wide = np.frombuffer(f64, dtype=np.float64)
                with np.errstate(over="ignore", invalid="ignore"):
                    rounded = wide.astype(np.float32)
                if not np.isfinite(wide).all() or rounded.tobytes() != f32[row].tobytes():
                    bad64.ids.append(chunk_id)
    found = (p.problem() for p in (bad32, zero, bad64, index))
    return [p for p in found if p is not None]
