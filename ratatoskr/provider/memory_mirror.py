"""A per-process float32 mirror of every chunk's vector and scope, for exact search at the
speed of numpy.

SQLite stays the source of truth. Every change to ``memory_chunks`` (from any process, any
tool: triggers write it) appends the chunk id to ``memory_changes``; before each search the
mirror reads the log's head inside the search's own read transaction and applies what it has
not seen, so a search sees every write committed before it began (read-your-writes across
workers). A mirror that fell behind the pruned log, or saw the log go backwards (a restored
file), reloads whole.

Ranking is two-step and exact: float32 scores over the admitted rows pick ``top_k + margin``
candidates (widened to every row within ``SCORE_EPSILON`` of the k-th when the cut is
crowded), then ``cosine.cosine_scores`` recomputes them in float64, the same function the
reference store uses.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import apsw
import numpy as np
import numpy.typing as npt

from ratatoskr.provider.cosine import F32, cosine_scores, rank
from ratatoskr.wire.scope import AXES, Scope

MIRROR_BYTES_ENV = "RATATOSKR_MEMORY_MIRROR_BYTES"
DEFAULT_MIRROR_BYTES = 4 << 30
CANDIDATE_MARGIN = 8
SCORE_EPSILON = 2e-4
PYTHON_BYTES_PER_ROW = 160  # the id string, its dict entry and list slot, measured roughly
_FETCH_BATCH = 500

I64 = npt.NDArray[np.int64]


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


class VectorMirror:
    """Vectors, inverse norms and axis codes of every live chunk, in row order."""

    def __init__(self, dim: int, max_bytes: int) -> None:
        self.dim = dim
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.seq = -1  # last change applied; -1: never loaded
        self.over_budget = False
        self._reset(0)

    @property
    def bytes_per_row(self) -> int:
        return self.dim * 4 + 4 + 4 * len(AXES) + 1 + PYTHON_BYTES_PER_ROW

    def _reset(self, capacity: int) -> None:
        self.n = 0
        self.matrix: F32 = np.zeros((capacity, self.dim), dtype=np.float32)
        self.inv_norms: F32 = np.zeros(capacity, dtype=np.float32)
        self.codes = np.zeros((len(AXES), capacity), dtype=np.int32)
        self.alive = np.zeros(capacity, dtype=bool)
        self.dead = 0
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.values: list[dict[str, int]] = [{} for _ in AXES]

    # -- keeping in step ---------------------------------------------------------------

    def sync(self, conn: apsw.Connection) -> bool:
        """Bring the mirror to the snapshot of ``conn``'s open read transaction.

        False when the mirror cannot serve this snapshot (over budget, or already ahead of
        it because another thread synced to a newer one); the caller then searches in SQL.
        """
        head, floor = conn.execute(
            "SELECT (SELECT max(seq) FROM memory_changes), (SELECT min(seq) FROM memory_changes)"
        ).fetchall()[0]
        head = int(head or 0)
        if head == self.seq:
            return not self.over_budget
        behind = floor is not None and self.seq < int(floor) - 1
        if self.seq > head or self.seq < 0 or behind or self.over_budget:
            count = conn.execute("SELECT count(*) FROM memory_chunks").fetchall()[0][0]
            return self._reload(conn, head, int(count))
        changed = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT chunk_id FROM memory_changes WHERE seq > ?", (self.seq,)
            ).fetchall()
        ]
        for start in range(0, len(changed), _FETCH_BATCH):
            part = changed[start : start + _FETCH_BATCH]
            found = self._fetch(conn, f"WHERE chunk_id IN ({','.join('?' * len(part))})", part)
            seen = set()
            for row in found:
                self._put(*row)
                seen.add(row[0])
            for chunk_id in part:
                if chunk_id not in seen:
                    self._kill(chunk_id)
        self.seq = head
        if (self.n - self.dead) * self.bytes_per_row > self.max_bytes:
            return self._reload(conn, head, self.n - self.dead)
        if self.dead > 1024 and self.dead > self.n // 4:
            self._compact()
        return True

    def _reload(self, conn: apsw.Connection, head: int, count: int) -> bool:
        self.seq = head
        if count * self.bytes_per_row > self.max_bytes:
            self.over_budget = True
            self._reset(0)
            return False
        self.over_budget = False
        self._reset(max(count, 16))
        for row in self._fetch(conn, "", []):
            self._put(*row)
        return True

    @staticmethod
    def _fetch(conn: apsw.Connection, where: str, params: Sequence[str]) -> Any:
        return conn.execute(
            "SELECT chunk_id, tenant, grp, end_user, agent_self, embedding "
            f"FROM memory_chunks {where}",
            params,
        )

    def _put(
        self,
        chunk_id: str,
        tenant: str | None,
        grp: str | None,
        end_user: str | None,
        agent_self: str | None,
        blob: bytes,
    ) -> None:
        row = self.rows.get(chunk_id)
        if row is None:
            if self.n == len(self.alive):
                self._grow(max(16, self.n * 2))
            row = self.n
            self.n += 1
            self.rows[chunk_id] = row
            self.ids.append(chunk_id)
        vector = np.frombuffer(blob, dtype=np.float32)
        self.matrix[row] = vector
        norm = float(np.sqrt(np.dot(vector.astype(np.float64), vector.astype(np.float64))))
        self.inv_norms[row] = 1.0 / norm
        for axis_index, value in enumerate((tenant, grp, end_user, agent_self)):
            self.codes[axis_index, row] = self._code(axis_index, value)
        self.alive[row] = True

    def _code(self, axis_index: int, value: str | None) -> int:
        if value is None:
            return 0
        table = self.values[axis_index]
        code = table.get(value)
        if code is None:
            code = table[value] = len(table) + 1
        return code

    def _kill(self, chunk_id: str) -> None:
        row = self.rows.pop(chunk_id, None)
        if row is not None:
            self.alive[row] = False
            self.codes[:, row] = 0
            self.dead += 1

    def _grow(self, capacity: int) -> None:
        self.matrix = np.resize(self.matrix, (capacity, self.dim))
        self.inv_norms = np.resize(self.inv_norms, capacity)
        codes = np.zeros((len(AXES), capacity), dtype=np.int32)
        codes[:, : self.n] = self.codes[:, : self.n]
        self.codes = codes
        alive = np.zeros(capacity, dtype=bool)
        alive[: self.n] = self.alive[: self.n]
        self.alive = alive

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[: self.n])
        ids = [self.ids[i] for i in keep]
        matrix, inv, codes = self.matrix[keep], self.inv_norms[keep], self.codes[:, keep]
        values = self.values
        self._reset(max(16, len(keep)))
        self.values = values
        self.n = len(keep)
        self.matrix[: self.n], self.inv_norms[: self.n], self.codes[:, : self.n] = (
            matrix,
            inv,
            codes,
        )
        self.alive[: self.n] = True
        self.ids = ids
        self.rows = {cid: i for i, cid in enumerate(ids)}

    # -- search ------------------------------------------------------------------------

    def admitted(self, scope_all: Scope, scope_any: Sequence[Scope]) -> I64 | None:
        """Rows the filter admits; ``None`` means every live row (no filter at all)."""
        n = self.n
        mask: npt.NDArray[np.bool_] | None = None
        for axis, value in scope_all.items():
            hit = self._axis_mask(axis, value)
            mask = hit if mask is None else mask & hit
        if scope_any and all(scope_any):
            union = np.zeros(n, dtype=bool)
            for element in scope_any:
                branch: npt.NDArray[np.bool_] | None = None
                for axis, value in element.items():
                    hit = self._axis_mask(axis, value)
                    branch = hit if branch is None else branch & hit
                assert branch is not None
                union |= branch
            mask = union if mask is None else mask & union
        if mask is None:
            return None if self.dead == 0 else np.flatnonzero(self.alive[:n])
        return np.flatnonzero(mask)

    def _axis_mask(self, axis: str, value: str) -> npt.NDArray[np.bool_]:
        axis_index = AXES.index(axis)
        code = self.values[axis_index].get(value)
        if code is None:
            return np.zeros(self.n, dtype=bool)
        return np.asarray(self.codes[axis_index, : self.n] == code)

    def rank(
        self, query: F32, top_k: int, scope_all: Scope, scope_any: Sequence[Scope]
    ) -> list[tuple[str, float]]:
        rows = self.admitted(scope_all, scope_any)
        if rows is None:
            scores = self.matrix[: self.n] @ query * self.inv_norms[: self.n]
            index: I64 = np.arange(self.n)
        else:
            if len(rows) == 0:
                return []
            scores = self.matrix[rows] @ query * self.inv_norms[rows]
            index = rows
        scores = scores / np.float32(np.linalg.norm(query))
        want = top_k + CANDIDATE_MARGIN
        if len(scores) > want:
            top = np.argpartition(-scores, want - 1)[:want]
            kth = np.partition(-scores[top], top_k - 1)[top_k - 1]
            bound = -kth - SCORE_EPSILON
            if float(scores[top].min()) >= bound:  # a crowded cut: take every near tie
                top = np.flatnonzero(scores >= bound)
            candidates = index[top]
        else:
            candidates = index
        exact = cosine_scores(self.matrix[candidates], query)
        return rank([self.ids[int(r)] for r in candidates], exact, top_k)
