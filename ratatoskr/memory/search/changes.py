"""Bringing chunks read from the change log into a mirror, holding its lock only to publish.

The worker reads a batch of changed chunks (``build.read_changes``) and brings it in, in
four steps, of which only the third holds the lock searches take:

1. **prepare**: the axis codes (a new value gets its code now: no row holds it yet), the
   vectors, their norms and the payloads;
2. **stage**: the chunks new to the mirror, or moved to another scope (their old place is
   in another group), are written to the places past its last row, which no search reads;
3. **publish**, under the lock: the rows of deleted and moved chunks die, a row whose
   scope is unchanged is overwritten where it is, and the staged rows join the mirror (its
   row count grows over them and their ids map to them);
4. **settle**: the deleted chunks' ids leave the id map and the dead rows' records are
   dropped. In between, a deleted id still maps to its dead row: a search looks ids up
   only for the chunks changed since the mirror's ``seq`` (to leave their rows out) and for
   live hits, so a dead row found there changes nothing.

A lock hold is then a few numpy assignments and one dict update per batch, whatever the
mirror holds: a search waits for the worker no longer than that, and a worker preempted
by the scheduler mid-batch does not hold searches back.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ratatoskr.core.scope import AXES
from ratatoskr.memory.search.cosine import F32, F64, I64, row_norms
from ratatoskr.memory.search.mirror import (
    ARRAYS,
    RECORD_INLINE,
    Changed,
    VectorMirror,
    headroom,
    id_hashes,
    objects,
)
from ratatoskr.memory.search.ranking import inverse_norms

Payload = tuple[int, str, int, str]  # revision, vector key, float64 stored, record JSON


class Prepared(NamedTuple):
    """Changed rows made ready for ``place`` (``prepare``): per row its id, axis codes
    (one column each), float32 vector, inverse norm, float64 norm and payload."""

    ids: list[str]
    codes: npt.NDArray[np.int32]
    vectors: F32
    inv_norms: F32
    norms: F64
    payloads: list[Payload]


class Staged(NamedTuple):
    """A batch written past the mirror's rows, and what publishing it changes."""

    kept: I64  # indices into the batch of the chunks overwritten where they are
    kept_at: I64  # their rows
    dying: I64  # the rows of the chunks deleted or moved
    gone: list[str]  # the deleted chunks held (their ids leave the map at ``settle``)
    added: list[str]  # the chunks staged past the rows
    placed: I64  # their places


class Scratch:
    """The bytes every ``prepare`` of one worker reads a batch's vectors into, reused: a
    batch is 1.5 MB at 500 x 768, and memory the process touches for the first time costs
    it a page fault per page (``build._room``), more than the copy itself."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def matrix(self, blobs: Sequence[bytes], dim: int) -> F32:
        """``blobs`` (float32 vectors of ``dim``) as one matrix, valid until the next call."""
        width = 4 * dim
        need = len(blobs) * width
        if len(self._buf) < need:
            self._buf = bytearray(max(need, 2 * len(self._buf)))
        view = memoryview(self._buf)
        for i, blob in enumerate(blobs):
            view[i * width : (i + 1) * width] = blob
        flat = np.frombuffer(self._buf, dtype=np.float32, count=len(blobs) * dim)
        return flat.reshape(len(blobs), dim)


def prepare(mirror: VectorMirror, found: Sequence[Changed], scratch: Scratch) -> Prepared:
    """What ``place`` needs of rows read from the file (``mirror.CHANGED_COLUMNS``), the
    vectors read into ``scratch`` (valid until its next use)."""
    if not found:
        empty = np.zeros(0, dtype=np.float64)
        vectors = np.zeros((0, mirror.dim), dtype=np.float32)
        codes = np.zeros((len(AXES), 0), dtype=np.int32)
        return Prepared([], codes, vectors, empty.astype(np.float32), empty, [])
    columns = list(zip(*found, strict=True))  # a column at a time: no Python call per row
    codes = np.array([mirror.codes_of(a, columns[1 + a]) for a in range(len(AXES))], dtype=np.int32)
    vectors = scratch.matrix(columns[5], mirror.dim)
    norms = row_norms(vectors)
    inv_norms = inverse_norms(norms)  # a zero vector (deleted since): inf, never live
    payloads = list(zip(columns[6], columns[7], columns[8], columns[9], strict=True))
    return Prepared(list(columns[0]), codes, vectors, inv_norms, norms, payloads)


def place(
    mirror: VectorMirror,
    prepared: Prepared,
    gone: Sequence[str],
    lock: AbstractContextManager[Any] | None = None,
) -> None:
    """Bring ``prepared`` rows and the removal of ``gone`` into ``mirror``, holding
    ``lock`` (the live mirror's) only to publish them; call from the one thread changing
    the mirror at a time."""
    staged = _stage(mirror, prepared, gone)
    with lock if lock is not None else nullcontext():
        _publish(mirror, prepared, staged)
    _settle(mirror, staged)


def _stage(mirror: VectorMirror, prepared: Prepared, gone: Sequence[str]) -> Staged:
    rows = mirror.rows
    gone_rows = rows.rows_of(gone)
    held_gone = [cid for cid, row in zip(gone, gone_rows, strict=True) if row >= 0]
    gone_at = [row for row in gone_rows if row >= 0]
    ids, codes = prepared.ids, prepared.codes
    at = np.array(rows.rows_of(ids), dtype=np.int64)
    kept = at >= 0
    if kept.any():
        held = np.flatnonzero(kept)
        kept[held] = (mirror.codes[:, at[held]] == codes[:, held]).all(axis=0)
    moved_at = at[(at >= 0) & ~kept]
    fresh = np.flatnonzero(~kept)
    reserve(mirror, len(fresh))
    lo, hi = mirror.n, mirror.n + len(fresh)
    placed = np.arange(lo, hi, dtype=np.int64)
    every = len(fresh) == len(ids)  # the common batch: only new chunks, taken as they are
    added = ids if every else [ids[i] for i in fresh.tolist()]
    mirror.ids[lo:hi] = added
    mirror.id_hashes[lo:hi] = id_hashes(added)
    mirror.codes[:, lo:hi] = codes if every else codes[:, fresh]
    mirror.alive[lo:hi] = True
    payloads = prepared.payloads if every else [prepared.payloads[i] for i in fresh.tolist()]
    _hold(mirror, placed, payloads)
    for name in ("matrix", "norms", "inv_norms"):  # contiguous places: slices, not gathers
        values = getattr(prepared, "vectors" if name == "matrix" else name)
        getattr(mirror, name)[lo:hi] = values if every else values[fresh]
    kept_rows = np.flatnonzero(kept)
    dying = np.concatenate((np.array(gone_at, dtype=np.int64), moved_at))
    return Staged(kept_rows, at[kept_rows], dying, held_gone, added, placed)


def _publish(mirror: VectorMirror, prepared: Prepared, staged: Staged) -> None:
    mirror.generation += 1
    dying = staged.dying
    if len(dying):
        mirror.alive[dying] = False
        mirror.codes[:, dying] = 0
        mirror.inv_norms[dying] = 0.0  # a vector deleted during a load may be all zero
        mirror.dead += len(dying)
    kept, kept_at = staged.kept, staged.kept_at
    if len(kept):
        _hold(mirror, kept_at, [prepared.payloads[i] for i in kept.tolist()])
        mirror.matrix[kept_at] = prepared.vectors[kept]
        mirror.norms[kept_at] = prepared.norms[kept]
        mirror.inv_norms[kept_at] = prepared.inv_norms[kept]
    if staged.added:
        mirror.rows.update(zip(staged.added, staged.placed.tolist(), strict=True))
        mirror.n += len(staged.added)


def _settle(mirror: VectorMirror, staged: Staged) -> None:
    mirror.rows.discard(staged.gone)
    _drop_records(mirror, staged.dying)


def _hold(mirror: VectorMirror, at: I64, payloads: list[Payload]) -> None:
    """Keep what a hit on each row of ``at`` returns besides the vector (the record if
    short), from its payload."""
    _drop_records(mirror, at)
    mirror.revisions[at] = [p[0] for p in payloads]
    mirror.keys[at] = [p[1] for p in payloads]
    mirror.wide[at] = [bool(p[2]) for p in payloads]
    records = [p[3] if len(p[3]) <= RECORD_INLINE else None for p in payloads]
    mirror.records[at] = records
    mirror.record_bytes += sum(len(r) for r in records if r is not None)


def _drop_records(mirror: VectorMirror, at: I64) -> None:
    if not len(at):
        return
    mirror.record_bytes -= sum(len(r) for r in mirror.records[at].tolist() if r is not None)
    mirror.records[at] = None


def reserve(mirror: VectorMirror, extra: int) -> None:
    """Make room for ``extra`` more rows: larger arrays are made and filled outside the
    lock (one thread at a time changes the mirror: ``worker._changing``), and only
    swapped in under it."""
    if mirror.n + extra <= len(mirror.alive):
        return
    # at least doubled: a store filled through this process (an import into a new
    # file) copies its rows about twice in all, not once per quarter it grows by
    capacity = max(mirror.n + extra + headroom(mirror.n), 2 * len(mirror.alive))
    grown = _grown(mirror, capacity)
    with mirror.lock:
        for name, array in grown.items():
            setattr(mirror, name, array)


def _grown(mirror: VectorMirror, capacity: int) -> dict[str, Any]:
    """Copies of the per-row arrays (``mirror.ARRAYS``) with room for ``capacity`` rows (the
    pages past the rows are not touched until written: they cost no memory before)."""
    n = mirror.n
    grown: dict[str, Any] = {}
    for name in ARRAYS:
        old = getattr(mirror, name)
        if name == "codes":  # one row per axis, a column per row
            new = np.zeros((old.shape[0], capacity), dtype=old.dtype)
            new[:, :n] = old[:, :n]
        else:  # objects start as None
            new = (
                objects(capacity)
                if old.dtype == object
                else np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            )
            new[:n] = old[:n]
        grown[name] = new
    return grown
