"""A per-process float32 mirror of every chunk's vector and scope, for exact search at the
speed of numpy.

SQLite stays the source of truth. Every change to ``memory_chunks`` (from any process, any
tool: triggers write it) appends the chunk id to ``memory_changes``; before each search the
mirror reads the log's head inside the search's own read transaction and applies what it has
not seen, so a search sees every write committed before it began (read-your-writes across
workers). A mirror that fell behind the pruned log, or saw the log go backwards (a restored
file), reloads whole.

Rows are kept grouped by scope: a load sorts them by (tenant, group, end_user, agent_self),
so one tenant, or one end_user inside it, is a contiguous slice that ``ranking.py``
scores in place instead of gathering it. Writes after the load update a row in place when
its scope is unchanged and otherwise append to an unsorted tail; when the tail or the dead
rows grow past a share of the mirror, it reloads (sorted again). Each axis also keeps the
grouped rows ordered by its value (built at load), so the rows of one value are found by a
binary search, not by scanning the mirror.

The mirror also holds what a hit returns besides its vector: the revision, the vector's key,
whether a float64 copy of the vector is stored, and the record's JSON when it is short
(``RECORD_INLINE``). A search whose hits it holds whole reads nothing from SQLite.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from itertools import pairwise

import apsw
import numpy as np
import numpy.typing as npt

from ratatoskr.core.scope import AXES, Scope
from ratatoskr.memory.search.cosine import F32, F64, I64, cosine_rows, rank, row_norms
from ratatoskr.memory.search.hits import Gathered
from ratatoskr.memory.search.ranking import (
    candidates,
    pick,
    row_lists,
    scoped_candidates,
    settled_top,
)
from ratatoskr.sqlite.scope_sql import placeholders

MIRROR_BYTES_ENV = "RATATOSKR_MEMORY_MIRROR_BYTES"
DEFAULT_MIRROR_BYTES = 4 << 30
# The id string, its dict entry and list slot (~160 B), per axis the rows ordered by that
# axis's code and the codes in that order (two int32 per axis per row), the list slots of
# the revision, the vector key and the record, and the record string's header (~80 B).
PYTHON_BYTES_PER_ROW = 160 + 8 * len(AXES) + 80
# A record's JSON (everything but the vector) up to this many characters is held, so a hit
# is built without reading SQLite; a longer one is read from the file when it is a hit.
RECORD_INLINE = 1024
_FETCH_BATCH = 500
_PAYLOAD = "revision, vector_key, vector_f64 IS NOT NULL, record_json"
_SCAN = (
    f"SELECT chunk_id, tenant, grp, end_user, agent_self, {_PAYLOAD} "
    "FROM memory_chunks ORDER BY rowid"
)
Payload = tuple[int, str, int, str]  # revision, vector key, float64 stored, record JSON


def mirror_budget_from_env() -> int:
    """Bytes one process may spend on the mirror; ``0`` turns it off (SQL search only)."""
    raw = os.environ.get(MIRROR_BYTES_ENV, str(DEFAULT_MIRROR_BYTES))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{MIRROR_BYTES_ENV} must be a whole number of bytes") from None
    if value < 0:
        raise ValueError(f"{MIRROR_BYTES_ENV} must be >= 0")
    return value


def bytes_per_row(dim: int) -> int:
    """What one chunk costs the mirror: the float32 vector, its inverse norm (float32) and
    float64 norm, four axis codes, the alive and float64-sent flags and the Python-side
    bookkeeping (the record JSON held is counted apart)."""
    return dim * 4 + 4 + 8 + 4 * len(AXES) + 2 + PYTHON_BYTES_PER_ROW


class VectorMirror:
    """Vectors, inverse norms and axis codes of every live chunk, grouped by scope."""

    def __init__(self, dim: int, max_bytes: int) -> None:
        self.dim = dim
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.seq = -1  # last change applied; -1: never loaded
        self.over_budget = False
        self.reloads = 0
        self.loading = False  # read without the lock: searches go to SQL while it is True
        self.generation = 0  # bumped before every change to the rows: a search's proof of
        # currency (``hits.CurrentMark``) holds only while it stays the same
        self._starts: list[tuple[npt.NDArray[np.int32], ...] | None] = [None] * len(AXES)
        self._reset(0)

    @property
    def bytes_per_row(self) -> int:
        return bytes_per_row(self.dim)

    def _reset(self, capacity: int) -> None:
        self.n = 0
        self.sorted_n = 0  # rows below this are grouped by scope; the rest is the tail
        self.matrix: F32 = np.zeros((capacity, self.dim), dtype=np.float32)
        self.inv_norms: F32 = np.zeros(capacity, dtype=np.float32)
        self.norms: F64 = np.zeros(capacity, dtype=np.float64)  # ``cosine.row_norms``
        self.codes = np.zeros((len(AXES), capacity), dtype=np.int32)
        self.alive = np.zeros(capacity, dtype=bool)
        self.dead = 0
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.revisions: list[int] = []
        self.keys: list[str] = []
        self.records: list[str | None] = []
        self.wide = np.zeros(capacity, dtype=bool)
        self.record_bytes = 0  # characters of the records held
        self.values: list[dict[str, int]] = [{} for _ in AXES]
        # Per axis, the grouped rows ordered by that axis's code (a stable argsort, so rows
        # stay ascending within a code) and the codes in that order: a value's rows are one
        # ``searchsorted`` slice, found without scanning the mirror.
        self._by_code: list[npt.NDArray[np.int32]] = []
        self._sorted_codes: list[npt.NDArray[np.int32]] = []

    # -- keeping in step ---------------------------------------------------------------

    def sync(self, conn: apsw.Connection, max_changes: int | None = None) -> bool:
        """Bring the mirror to the snapshot of ``conn``'s open read transaction.

        False when the mirror cannot serve this snapshot (over budget, or already ahead of
        it because another thread synced to a newer one); the caller then searches in SQL.
        With ``max_changes`` it does only cheap work: False, with nothing done, when it
        would have to apply more changes than that, reload or regroup.
        """
        head, floor = conn.execute(
            "SELECT (SELECT max(seq) FROM memory_changes), (SELECT min(seq) FROM memory_changes)"
        ).fetchall()[0]
        head = int(head or 0)
        cheap_only = max_changes is not None
        limit = head if max_changes is None else max_changes
        if head != self.seq:
            behind = floor is not None and self.seq < int(floor) - 1
            if self.seq > head or self.seq < 0 or behind or self.over_budget:
                return False if cheap_only else self._reload(conn, head)
            if head - self.seq > limit:
                return False
            self._apply(conn, head)
            if self.used_bytes() > self.max_bytes:
                return False if cheap_only else self._reload(conn, head)
        if self.over_budget:
            return False
        if max(self.n - self.sorted_n, self.dead) > max(4096, (self.n - self.dead) // 8):
            # regroup: the tail and the holes grew too big
            return False if cheap_only else self._reload(conn, head)
        return True

    def used_bytes(self) -> int:
        """What the live rows cost, as the budget counts it."""
        return (self.n - self.dead) * self.bytes_per_row + self.record_bytes

    def _apply(self, conn: apsw.Connection, head: int) -> None:
        """Apply the logged changes after ``self.seq`` up to ``head``."""
        self.generation += 1
        changed = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT chunk_id FROM memory_changes WHERE seq > ?", (self.seq,)
            ).fetchall()
        ]
        for start in range(0, len(changed), _FETCH_BATCH):
            part = changed[start : start + _FETCH_BATCH]
            found = conn.execute(
                f"SELECT chunk_id, tenant, grp, end_user, agent_self, embedding, {_PAYLOAD} "
                f"FROM memory_chunks WHERE chunk_id IN ({placeholders(len(part))})",
                part,
            ).fetchall()
            seen = set()
            for chunk_id, tenant, grp, end_user, agent_self, blob, *held in found:
                payload: Payload = (held[0], held[1], held[2], held[3])
                self._put(chunk_id, (tenant, grp, end_user, agent_self), blob, payload)
                seen.add(chunk_id)
            for chunk_id in part:
                if chunk_id not in seen:
                    self._kill(chunk_id)
        self.seq = head

    def _reload(self, conn: apsw.Connection, head: int) -> bool:
        """Load every chunk afresh, sorted by scope. Two passes over the table in rowid
        order inside the caller's snapshot: the scopes first (to place each row), then the
        vectors straight into their places, so no second copy of the matrix is made."""
        self.loading = True
        try:
            return self._load(conn, head)
        finally:
            self.loading = False

    def _load(self, conn: apsw.Connection, head: int) -> bool:
        self.seq = -1  # a failure part-way leaves a mirror that reloads on the next search
        self.reloads += 1
        self.generation += 1
        count = int(conn.execute("SELECT count(*) FROM memory_chunks").fetchall()[0][0])
        if count * self.bytes_per_row > self.max_bytes:
            self.over_budget = True
            self._reset(0)
            self.seq = head
            return False
        self.over_budget = False
        self._reset(0)  # drop the old arrays before the new ones are made
        self._reset(max(count, 16))
        ids: list[str] = []
        payloads: list[Payload] = []
        codes = self.codes
        for i, (chunk_id, *axes, revision, key, wide, record) in enumerate(conn.execute(_SCAN)):
            ids.append(chunk_id)
            payloads.append((revision, key, wide, record))
            for axis_index, value in enumerate(axes):
                codes[axis_index, i] = self._code(axis_index, value)
        count = len(ids)
        self.record_bytes = sum(len(p[3]) for p in payloads if len(p[3]) <= RECORD_INLINE)
        if count * self.bytes_per_row + self.record_bytes > self.max_bytes:
            self.over_budget = True
            self._reset(0)
            self.seq = head
            return False
        order = np.lexsort(codes[::-1, :count])  # tenant first, then group, end_user, agent
        place = np.empty(count, dtype=np.int64)
        place[order] = np.arange(count)
        self.codes[:, :count] = codes[:, order]
        ordered = order.tolist()
        self.ids = [ids[i] for i in ordered]
        self.rows = {cid: i for i, cid in enumerate(self.ids)}
        payloads = [payloads[i] for i in ordered]
        self.revisions = [p[0] for p in payloads]
        self.keys = [p[1] for p in payloads]
        self.wide[:count] = [bool(p[2]) for p in payloads]
        self.records = [p[3] if len(p[3]) <= RECORD_INLINE else None for p in payloads]
        del payloads
        matrix = self.matrix
        at = place.tolist()
        for i, (blob,) in enumerate(
            conn.execute("SELECT embedding FROM memory_chunks ORDER BY rowid")
        ):
            matrix[at[i]] = np.frombuffer(blob, dtype=np.float32)
        for lo in range(0, count, 4096):
            block = matrix[lo : min(count, lo + 4096)].astype(np.float64)
            self.inv_norms[lo : lo + len(block)] = 1.0 / np.sqrt((block * block).sum(axis=1))
            self.norms[lo : lo + len(block)] = row_norms(matrix[lo : lo + len(block)])
        self.alive[:count] = True
        self.n = self.sorted_n = count
        for axis_index in range(len(AXES)):
            by_code = np.argsort(self.codes[axis_index, :count], kind="stable").astype(np.int32)
            self._by_code.append(by_code)
            self._sorted_codes.append(self.codes[axis_index, by_code])
        self.seq = head
        return True

    def _put(
        self, chunk_id: str, axes: tuple[str | None, ...], blob: bytes, payload: Payload
    ) -> None:
        codes = [self._code(axis_index, value) for axis_index, value in enumerate(axes)]
        row = self.rows.get(chunk_id)
        if row is not None and self.codes[:, row].tolist() != codes:
            self._kill(chunk_id)  # its scope moved: its old place is in another group
            row = None
        if row is None:
            if self.n == len(self.alive):
                # Room for the tail a regroup allows, not a doubling: one write after a load
                # must not double the matrix.
                self._grow(self.n + max(16, min(self.n, max(4096, self.n // 8))))
            row = self.n
            self.n += 1
            self.rows[chunk_id] = row
            self.ids.append(chunk_id)
            self.revisions.append(0)
            self.keys.append("")
            self.records.append(None)
            self.codes[:, row] = codes
            self.alive[row] = True
        self._hold(row, payload)
        vector = np.frombuffer(blob, dtype=np.float32)
        self.matrix[row] = vector
        wide = vector.astype(np.float64)
        self.inv_norms[row] = 1.0 / float(np.sqrt(np.dot(wide, wide)))
        self.norms[row] = row_norms(vector[None, :])[0]

    def _code(self, axis_index: int, value: str | None) -> int:
        if value is None:
            return 0
        table = self.values[axis_index]
        code = table.get(value)
        if code is None:
            code = table[value] = len(table) + 1
        return code

    def _hold(self, row: int, payload: Payload) -> None:
        """Keep what a hit on ``row`` returns besides the vector (the record if short)."""
        revision, key, wide, record = payload
        self._drop_record(row)
        self.revisions[row] = revision
        self.keys[row] = key
        self.wide[row] = bool(wide)
        if len(record) <= RECORD_INLINE:
            self.records[row] = record
            self.record_bytes += len(record)

    def _drop_record(self, row: int) -> None:
        old = self.records[row]
        if old is not None:
            self.record_bytes -= len(old)
            self.records[row] = None

    def _kill(self, chunk_id: str) -> None:
        row = self.rows.pop(chunk_id, None)
        if row is not None:
            self.alive[row] = False
            self.codes[:, row] = 0
            self.dead += 1
            self._drop_record(row)

    def _grow(self, capacity: int) -> None:
        self.matrix = np.resize(self.matrix, (capacity, self.dim))
        self.inv_norms = np.resize(self.inv_norms, capacity)
        self.norms = np.resize(self.norms, capacity)
        codes = np.zeros((len(AXES), capacity), dtype=np.int32)
        codes[:, : self.n] = self.codes[:, : self.n]
        self.codes = codes
        alive = np.zeros(capacity, dtype=bool)
        alive[: self.n] = self.alive[: self.n]
        self.alive = alive
        wide = np.zeros(capacity, dtype=bool)
        wide[: self.n] = self.wide[: self.n]
        self.wide = wide

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

    def search(self, rows: I64 | None, query: F32, top_k: int, with_vectors: bool) -> Gathered:
        """The exact top_k among ``rows`` (``admitted``'s answer), and what the mirror holds
        of those hits, copied (call under the lock), so the hits are built after it is
        released."""
        ranked, hit_rows = self._top(rows, query, top_k)
        keys: list[str] = []
        wide: list[bool] = []
        vectors = None
        if with_vectors:
            at = np.array(hit_rows, dtype=np.int64)
            keys = pick(self.keys, hit_rows)
            wide = self.wide[at].tolist()
            vectors = row_lists(self.matrix, at)
        return Gathered(
            ranked,
            pick(self.revisions, hit_rows),
            keys,
            pick(self.records, hit_rows),
            wide,
            vectors,
        )

    def _top(
        self, rows: I64 | None, query: F32, top_k: int
    ) -> tuple[list[tuple[str, float]], list[int]]:
        """The exact top_k among ``rows`` as (id, score), and their rows."""
        if rows is None:
            # ``dot``: the same BLAS dot as ``@`` on 1-d arrays, without the gufunc machinery
            unit: F32 = query * np.float32(1.0 / math.sqrt(float(query.dot(query))))
            scores: F32 = self.matrix[: self.n] @ unit
            scores *= self.inv_norms[: self.n]
            if self.dead:
                scores[~self.alive[: self.n]] = -np.inf
            picked = candidates(scores, top_k)
        else:
            if len(rows) == 0:
                return [], []
            picked = scoped_candidates(self.matrix, self.inv_norms, rows, query, top_k)
        if not len(picked):
            return [], []
        ids = self.ids
        settled = settled_top(self.matrix, picked, query, self.norms, top_k)
        if settled is not None:  # no tie: the scores alone order; only the hits' ids are read
            at, hit_scores = settled
            return list(zip(pick(ids, at), hit_scores, strict=True)), at
        exact = cosine_rows(self.matrix, picked, query, self.norms)
        ranked = rank([ids[r] for r in picked.tolist()], exact, top_k)  # ties: by id
        return ranked, [self.rows[cid] for cid, _ in ranked]
