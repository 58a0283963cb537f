"""A mirror's chunk id -> row map, split across many small dicts.

A dict grows by rebuilding its whole table in one step, holding the GIL throughout: at a
million ids that step takes 20 to 50 ms, and a regroup, which maps every id to its new
row, goes through every such step. Meanwhile no search in the process can run Python.
Split by the id's hash into ``SHARDS`` dicts, the largest step is a ``SHARDS``-th of that,
and a regroup builds the map in blocks between which searches run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import numpy.typing as npt

SHARDS = 64  # a power of two: a shard is chosen by the hash's low bits
_MASK = SHARDS - 1


class RowIndex:
    """Chunk id -> row: the mapping operations the mirror uses, as a dict would do them."""

    __slots__ = ("_shards",)

    def __init__(self, pairs: Iterable[tuple[str, int]] = ()) -> None:
        self._shards: list[dict[str, int]] = [{} for _ in range(SHARDS)]
        self.update(pairs)

    def __len__(self) -> int:
        return sum(map(len, self._shards))

    def __getitem__(self, chunk_id: str) -> int:
        return self._shards[hash(chunk_id) & _MASK][chunk_id]

    def __setitem__(self, chunk_id: str, row: int) -> None:
        self._shards[hash(chunk_id) & _MASK][chunk_id] = row

    def __iter__(self) -> Iterator[str]:
        for shard in self._shards:
            yield from shard

    def rows_of(self, chunk_ids: Iterable[str]) -> list[int]:
        """The row of each of ``chunk_ids``, ``-1`` for one not mapped: a batch's lookups
        in one pass, without a method call per id."""
        shards = self._shards
        return [shards[hash(cid) & _MASK].get(cid, -1) for cid in chunk_ids]

    def discard(self, chunk_ids: Iterable[str]) -> None:
        """Unmap each of ``chunk_ids`` that is mapped."""
        shards = self._shards
        for cid in chunk_ids:
            shards[hash(cid) & _MASK].pop(cid, None)

    def update(self, pairs: Iterable[tuple[str, int]]) -> None:
        shards = self._shards
        for chunk_id, row in pairs:
            shards[hash(chunk_id) & _MASK][chunk_id] = row

    def assign(
        self,
        ids: npt.NDArray[np.object_],
        rows: npt.NDArray[np.int64],
        hashes: npt.NDArray[np.int64] | None = None,
    ) -> None:
        """Each of ``ids`` (an object array of chunk ids) to the row beside it in ``rows``:
        grouped by shard first, so that each shard takes its part in one dict update.
        ``hashes``: the ids' ``hash()``, when the caller holds them (a mirror does), so
        the ids' scattered strings are read once fewer."""
        if not len(ids):
            return
        if hashes is None:
            hashes = np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids))
        shard_of = hashes & _MASK
        order = np.argsort(shard_of, kind="stable")
        bounds = np.searchsorted(shard_of[order], np.arange(SHARDS + 1)).tolist()
        grouped_ids, grouped_rows = ids[order].tolist(), rows[order].tolist()
        for shard, lo, hi in zip(self._shards, bounds, bounds[1:], strict=False):
            if hi > lo:
                shard.update(zip(grouped_ids[lo:hi], grouped_rows[lo:hi], strict=True))

    def drain(self, pause: Callable[[], None]) -> None:
        """Empty the map a shard at a time, ``pause`` between two: a million entries
        freed at once held the GIL for 42 ms."""
        for shard in range(SHARDS):
            self._shards[shard] = {}
            pause()

    def items(self) -> Iterator[tuple[str, int]]:
        for shard in self._shards:
            yield from shard.items()
