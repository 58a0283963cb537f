"""A per-process float32 mirror of every chunk's vector and scope, for exact search at the
speed of numpy.

SQLite stays the source of truth. Every change to ``memory_chunks`` (from any process, any
tool) appends the chunk id to ``memory_changes``. The mirror holds the rows as of one entry
of that log (``seq``); the store's mirror worker (``worker.py``) builds it in the
background, brings in the log as it grows (``changes.py``) and regroups it, and is the only
thread that changes it, under ``lock``. A search that finds the log ahead of ``seq`` answers from
the mirror with the changed chunks read from its own snapshot (``overlay.py``), so it sees
every write committed before it began (read-your-writes across workers) without waiting.

Rows are kept grouped by scope: a load or a regroup sorts them by (tenant, group, end_user,
agent_self), so one tenant, or one end_user inside it, is a contiguous slice that
``ranking.py`` scores in place instead of gathering it. Writes after that update a row in place
when its scope is unchanged and otherwise append to an unsorted tail; when the tail or the
dead rows grow past a share of the mirror (``needs_regroup``), the worker regroups. Each
axis also keeps the grouped rows ordered by its value, so the rows of one value are found
by a binary search, not by scanning the mirror.

The mirror also holds what a hit returns besides its vector: the revision, the vector's key,
whether a float64 copy of the vector is stored, and the record's JSON when it is short
(``RECORD_INLINE``). A search whose hits it holds whole reads nothing from SQLite.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt

from ratatoskr.core.scope import AXES, Scope
from ratatoskr.memory.search.cosine import F32, F64, I64, cosine_rows, rank
from ratatoskr.memory.search.hits import Gathered
from ratatoskr.memory.search.ranking import (
    candidates,
    row_lists,
    scoped_candidates,
    settled_top,
    unit_query,
)
from ratatoskr.memory.search.row_index import RowIndex

try:  # numpy's switch for the huge-page advice it gives large arrays (``objects``)
    from numpy._core.multiarray import (  # type: ignore[attr-defined]
        _set_madvise_hugepage as set_madvise_hugepage,
    )
except ImportError:  # a numpy without it: nothing to switch off

    def set_madvise_hugepage(enabled: bool) -> bool:
        return False


MIRROR_BYTES_ENV = "RATATOSKR_MEMORY_MIRROR_BYTES"
DEFAULT_MIRROR_BYTES = 4 << 30
# The id string, its dict entry and list slot (~160 B), per axis the rows ordered by that
# axis's code and the codes in that order (two int32 per axis per row), the list slots of
# the revision, the vector key and the record, and the record string's header (~80 B).
PYTHON_BYTES_PER_ROW = 160 + 8 * len(AXES) + 80
# A record's JSON (everything but the vector) up to this many characters is held, so a hit
# is built without reading SQLite; a longer one is read from the file when it is a hit.
RECORD_INLINE = 1024
# a regroup is due when the tail or the dead rows pass an eighth of the live rows (and this)
REGROUP_MIN = 4096
REGROUP_SHARE = 8
# What the mirror reads of a changed chunk (``apply``): its id, scope, vector and payload.
CHANGED_COLUMNS = (
    "chunk_id, tenant, grp, end_user, agent_self, embedding, "
    "revision, vector_key, vector_f64 IS NOT NULL, record_json"
)
Changed = Sequence[Any]  # one row of CHANGED_COLUMNS
Objects = npt.NDArray[np.object_]
# the per-row arrays (what a regroup may build its copy in, ``build.regrouped``)
ARRAYS = (
    "matrix", "inv_norms", "norms", "codes", "alive", "ids", "id_hashes", "revisions", "keys",
    "records", "wide",
)  # fmt: skip
# the attributes that make up the rows (what ``adopt`` takes over)
_STATE = (
    "n", "sorted_n", "matrix", "inv_norms", "norms", "codes", "alive", "dead", "ids",
    "id_hashes", "rows", "revisions", "keys", "records", "wide", "record_bytes", "values",
    "_by_code", "_sorted_codes", "seq",
)  # fmt: skip


def mirror_budget_from_env(env: Mapping[str, str] | None = None) -> int:
    """Bytes one process may spend on the mirror; ``0`` turns it off (SQL search only)."""
    env = os.environ if env is None else env
    raw = env.get(MIRROR_BYTES_ENV, str(DEFAULT_MIRROR_BYTES))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{MIRROR_BYTES_ENV} must be a whole number of bytes") from None
    if value < 0:
        raise ValueError(f"{MIRROR_BYTES_ENV} must be >= 0")
    return value


def headroom(rows: int) -> int:
    """Rows allocated past ``rows`` at a load, a regroup or a growth: twice the tail that
    makes a regroup due, so the rows written while one runs fit too. Their pages are not
    touched until rows are appended, so they cost no memory before."""
    return max(16, min(max(rows, 16), 2 * max(REGROUP_MIN, rows // REGROUP_SHARE)))


def objects(capacity: int) -> Objects:
    """An object array of ``capacity`` Nones, in small pages. numpy writes the Nones as it
    allocates, holding the GIL, and advises huge pages for any array of 4 MiB or more;
    where the kernel compacts memory to back such a fault (``defrag`` set to ``madvise``),
    the fill of one array of a million rows took 25 ms and more, and later first writes
    up to 200 ms, while no search in the process could run. Huge pages speed up the
    matrix's scans (a tenant's search at 1M rows takes 12 ms with them, 17 ms without); a
    search reads only its hits' ids, keys and records, so their arrays go without."""
    advised = set_madvise_hugepage(False)
    try:
        return np.empty(capacity, dtype=object)
    finally:
        set_madvise_hugepage(advised)


def bytes_per_row(dim: int) -> int:
    """What one chunk costs the mirror: the float32 vector, its inverse norm (float32) and
    float64 norm, four axis codes, the alive and float64-sent flags, the id's hash and the
    Python-side bookkeeping (the record JSON held is counted apart)."""
    return dim * 4 + 4 + 8 + 4 * len(AXES) + 2 + 8 + PYTHON_BYTES_PER_ROW


def id_hashes(ids: Sequence[str]) -> I64:
    """Each id's ``hash()`` (``VectorMirror.id_hashes``)."""
    return np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids))


def without(rows: I64, exclude: I64) -> I64:
    """``rows`` (ascending, distinct) less ``exclude`` (any order): each excluded row looked
    up among ``rows``, so a search's cost grows with the few changed chunks, not with the
    many rows a wide filter admits (``np.isin`` sorts both: 2.5 ms for 100,000 rows)."""
    if not len(rows):
        return rows
    at = np.searchsorted(rows, exclude)
    inside = at < len(rows)
    at = at[inside]
    at = at[rows[at] == exclude[inside]]
    if not len(at):
        return rows
    keep = np.ones(len(rows), dtype=bool)
    keep[at] = False
    return rows[keep]


class VectorMirror:
    """Vectors, inverse norms and axis codes of every live chunk, grouped by scope."""

    def __init__(self, dim: int, max_bytes: int) -> None:
        self.dim = dim
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.over_budget = False
        self.reloads = 0  # loads from the file
        self.regroups = 0  # regroups swapped in
        self.ready = False  # read without the lock: searches go to SQL until it is True
        self.searched = False  # a search ranked on it since the last regroup
        self.generation = 0  # bumped before every change to the rows: the changed chunks'
        # rows a search found (``overlay.ChangedRows``) hold only while it stays the same
        self._starts: list[tuple[npt.NDArray[np.int32], ...] | None] = [None] * len(AXES)
        self._reset(0)

    @property
    def bytes_per_row(self) -> int:
        return bytes_per_row(self.dim)

    def _reset(self, capacity: int) -> None:
        self.seq = -1  # the last change-log entry the rows include; -1: none loaded
        # the last entry whose changes may be in the rows: ``seq``, or past it while the
        # worker publishes a batch in parts (``hits.CurrentMark`` relies on it)
        self.published = -1
        self.n = 0
        self.sorted_n = 0  # rows below this are grouped by scope; the rest is the tail
        self.matrix: F32 = np.zeros((capacity, self.dim), dtype=np.float32)
        self.inv_norms: F32 = np.zeros(capacity, dtype=np.float32)
        self.norms: F64 = np.zeros(capacity, dtype=np.float64)  # ``cosine.row_norms``
        self.codes = np.zeros((len(AXES), capacity), dtype=np.int32)
        self.alive = np.zeros(capacity, dtype=bool)
        self.dead = 0
        # Per row the chunk id, revision, vector key and record JSON (None: not held) in
        # numpy arrays: unlike lists of a million items, the garbage collector never walks
        # them (a young list that size costs it ~20 ms a pass, on whichever thread).
        self.ids: Objects = objects(capacity)
        # each id's ``hash()`` (this process's): a search checks a filter's rows against the
        # changed ids in these contiguous integers, not in the ids' scattered strings
        self.id_hashes: I64 = np.zeros(capacity, dtype=np.int64)
        self.rows = RowIndex()  # chunk id -> row (``row_index.py``)
        self.revisions: npt.NDArray[np.int64] = np.zeros(capacity, dtype=np.int64)
        self.keys: Objects = objects(capacity)
        self.records: Objects = objects(capacity)
        self.wide = np.zeros(capacity, dtype=bool)
        self.record_bytes = 0  # characters of the records held
        self.values: list[dict[str, int]] = [{} for _ in AXES]
        # Per axis, the grouped rows ordered by that axis's code (a stable argsort, so rows
        # stay ascending within a code) and the codes in that order: a value's rows are one
        # ``searchsorted`` slice, found without scanning the mirror.
        self._by_code: list[npt.NDArray[np.int32]] = []
        self._sorted_codes: list[npt.NDArray[np.int32]] = []

    # -- keeping in step (the worker thread alone calls these, holding ``lock``) --------

    def needs_regroup(self) -> bool:
        """Whether the unsorted tail or the dead rows outgrew their share of the rows."""
        live = self.n - self.dead
        return max(self.n - self.sorted_n, self.dead) > max(REGROUP_MIN, live // REGROUP_SHARE)

    def used_bytes(self) -> int:
        """What the live rows cost, as the budget counts it."""
        return (self.n - self.dead) * self.bytes_per_row + self.record_bytes

    def adopt(self, other: VectorMirror) -> VectorMirror:
        """Take ``other``'s rows (a regrouped copy, or a fresh load) as this mirror's, in
        one step; the rows this mirror held are returned, to be freed outside the lock."""
        old = VectorMirror(self.dim, self.max_bytes)
        for name in _STATE:
            setattr(old, name, getattr(self, name))
            setattr(self, name, getattr(other, name))
        self.published = self.seq  # a copy or a load is whole at its ``seq``
        self.generation += 1
        self._starts = [None] * len(AXES)
        return old

    def clear(self) -> None:
        """Drop every row (the mirror stops serving: ``ready`` is cleared first)."""
        self.ready = False
        self.generation += 1
        self._reset(0)

    def codes_of(self, axis_index: int, values: Sequence[str | None]) -> list[int]:
        """The codes of ``values`` on one axis (``_code`` of each), looked up in one pass:
        only a value new to the table takes the slower way."""
        table = self.values[axis_index]
        found = [0 if v is None else table.get(v) for v in values]
        if None not in found:
            return found  # type: ignore[return-value]  # no None left in it
        code = self._code
        return [code(axis_index, v) if c is None else c for c, v in zip(found, values, strict=True)]

    def _code(self, axis_index: int, value: str | None) -> int:
        if value is None:
            return 0
        table = self.values[axis_index]
        code = table.get(value)
        if code is None:
            code = table[value] = len(table) + 1
        return code

    # -- search ------------------------------------------------------------------------

    def _posting(self, axis_index: int, value: str) -> I64:
        """The live rows whose ``axis`` is ``value``, ascending: a slice of the grouped
        rows' per-axis order (dead rows, whose codes are zeroed, dropped) plus a scan of
        the tail written since the last load."""
        code = self.values[axis_index].get(value)
        if code is None:
            return np.zeros(0, dtype=np.int64)
        grouped = None
        starts = self._code_starts(axis_index) if self.sorted_n else None
        if starts is not None and code + 1 < len(starts):  # else: a value new since the load
            lo, hi = starts.item(code), starts.item(code + 1)
            grouped = self._by_code[axis_index][lo:hi].astype(np.int64)
            if self.dead:
                grouped = grouped[self.codes[axis_index, grouped] == code]
        if self.n == self.sorted_n:
            return grouped if grouped is not None else np.zeros(0, dtype=np.int64)
        tail = np.flatnonzero(self.codes[axis_index, self.sorted_n : self.n] == code)
        tail += self.sorted_n
        return tail if grouped is None else np.concatenate((grouped, tail))

    def _code_starts(self, axis_index: int) -> npt.NDArray[np.int32]:
        """Per code, where its rows start in the axis's grouped order (the next code's
        start is where they end). Made by the first search after a load (noted with the
        order it indexes), so a posting costs two lookups, not two binary searches over
        the whole mirror, whose cache misses cost a small search more than its slice."""
        ordered = self._sorted_codes[axis_index]
        noted = self._starts[axis_index]
        if noted is not None and noted[0] is ordered:
            return noted[1]
        top = int(ordered[-1]) if len(ordered) else 0
        starts = ordered.searchsorted(np.arange(top + 2, dtype=np.int32)).astype(np.int32)
        self._starts[axis_index] = (ordered, starts)
        return starts

    def _conjunction(self, scope: Scope) -> I64:
        """Rows holding every pair of ``scope`` (non-empty): the rarest pair's rows, kept
        where the other pairs' codes match."""
        if len(scope) == 1:
            ((axis, value),) = scope.items()
            return self._posting(AXES.index(axis), value)
        pairs = [(AXES.index(axis), value) for axis, value in scope.items()]
        postings = [self._posting(a, v) for a, v in pairs]
        best = min(range(len(pairs)), key=lambda i: len(postings[i]))
        rows = postings[best]
        for i, (axis_index, value) in enumerate(pairs):
            if i != best and len(rows):
                code = self.values[axis_index][value]  # present: its posting was found
                rows = rows[self.codes[axis_index, rows] == code]
        return rows

    def _matches_any(self, rows: I64, scope_any: Sequence[Scope]) -> npt.NDArray[np.bool_]:
        keep = np.zeros(len(rows), dtype=bool)
        for element in scope_any:
            branch = np.ones(len(rows), dtype=bool)
            for axis, value in element.items():
                axis_index = AXES.index(axis)
                code = self.values[axis_index].get(value)
                if code is None:
                    branch[:] = False
                    break
                branch &= self.codes[axis_index, rows] == code
            keep |= branch
        return keep

    def admitted(self, scope_all: Scope, scope_any: Sequence[Scope]) -> I64 | None:
        """Rows the filter admits, ascending; ``None`` means every live row."""
        use_any = bool(scope_any) and all(scope_any)  # an empty element admits everything
        if scope_all:
            rows = self._conjunction(scope_all)
            return rows[self._matches_any(rows, scope_any)] if use_any and len(rows) else rows
        if not use_any:
            return None
        branches = [self._conjunction(element) for element in scope_any]
        total = sum(len(b) for b in branches)
        if len(branches) == 1 or total == 0:
            return branches[0] if len(branches) == 1 else np.zeros(0, dtype=np.int64)
        if total * 16 > self.n:  # large: a mask is cheaper than sorting
            mask = np.zeros(self.n, dtype=bool)
            for branch in branches:
                mask[branch] = True
            return np.flatnonzero(mask)
        ordered = sorted((b for b in branches if len(b)), key=lambda b: int(b[0]))
        if all(int(a[-1]) < int(b[0]) for a, b in pairwise(ordered)):
            return np.concatenate(ordered)  # apart (two users' groups): sorted, distinct
        merged = np.sort(np.concatenate(branches), kind="stable")  # merges the sorted runs
        return merged[np.concatenate(([True], merged[1:] != merged[:-1]))]

    def admitted_count(self, rows: I64 | None) -> int:
        """How many rows ``search`` would score for ``admitted``'s answer ``rows``."""
        return self.n - self.dead if rows is None else len(rows)

    def search(
        self,
        rows: I64 | None,
        query: F32,
        top_k: int,
        with_vectors: bool,
        exclude: I64 | None = None,
    ) -> Gathered:
        """The exact top_k among ``rows`` (``admitted``'s answer) less the rows
        ``exclude`` (chunks changed since ``seq``: ``overlay.py``), and what the mirror
        holds of those hits, copied (call under the lock), so the hits are built after it
        is released."""
        if exclude is not None and len(exclude) and rows is not None:
            rows = without(rows, exclude)
        ranked, hit_rows = self._top(rows, query, top_k, exclude)
        at = np.array(hit_rows, dtype=np.int64)
        keys: list[str] = []
        wide: list[bool] = []
        vectors = None
        if with_vectors:
            keys = self.keys[at].tolist()
            wide = self.wide[at].tolist()
            vectors = row_lists(self.matrix, at)
        return Gathered(
            ranked, self.revisions[at].tolist(), keys, self.records[at].tolist(), wide, vectors
        )

    def _top(
        self, rows: I64 | None, query: F32, top_k: int, exclude: I64 | None = None
    ) -> tuple[list[tuple[str, float]], list[int]]:
        """The exact top_k among ``rows`` (every live row but ``exclude`` when ``None``)
        as (id, score), and their rows."""
        if rows is None:
            # ``dot``: the same BLAS dot as ``@`` on 1-d arrays, without the gufunc machinery
            scores: F32 = self.matrix[: self.n] @ unit_query(query)
            scores *= self.inv_norms[: self.n]
            if self.dead:
                scores[~self.alive[: self.n]] = -np.inf
            if exclude is not None and len(exclude):
                scores[exclude] = -np.inf
            picked = candidates(scores, top_k)
        else:
            if len(rows) == 0:
                return [], []
            picked = scoped_candidates(self.matrix, self.inv_norms, rows, query, top_k)
        if not len(picked):
            return [], []
        settled = settled_top(self.matrix, picked, query, self.norms, top_k)
        if settled is not None:  # no tie: the scores alone order; only the hits' ids are read
            at, hit_scores = settled
            return list(zip(self.ids[at].tolist(), hit_scores, strict=True)), at
        exact = cosine_rows(self.matrix, picked, query, self.norms)
        ranked = rank(self.ids[picked].tolist(), exact, top_k)  # ties: by id
        return ranked, [self.rows[cid] for cid, _ in ranked]
