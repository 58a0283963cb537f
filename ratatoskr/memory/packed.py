"""Vectors read from a request body straight into float32 (``_body.c``, see ``body.py``),
standing in their record where orjson would have put a list of floats.

A ``PackedVector`` is a row of its ``PackedBatch``: the batch's float32 bytes, and the
float64 bytes of the rows float32 does not hold exactly (or that hold a value out of its
range). ``values()`` is the list orjson would have made, to the bit: the float64 bytes when
kept, else the float32 values widened (exact, as float32 held every value). Code that needs
plain lists (a fault to name, a digest in an older form, the reference store) calls
``unpack``; the common batch is checked and stored without a Python float per value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ratatoskr.memory.vector_pack import ALL_ZERO, BAD_VALUE

VECTOR_KEY_OF = {ord("e"): "embedding", ord("v"): "vector"}


@dataclass(frozen=True)
class PackedBatch:
    """What ``split_vectors`` read: per vector its float32 row, its float64 bytes when
    kept, its ``vector_pack`` flags, its key and its length."""

    narrow: bytes
    exact: list[bytes | None]
    flags: bytes
    keys: list[str]
    lengths: list[int]
    offsets: list[int]  # each row's first value in ``narrow``

    @classmethod
    def of(
        cls, narrow: bytes, exact: list[bytes | None], flags: bytes, keys: bytes, lengths: list[int]
    ) -> PackedBatch:
        offsets = np.concatenate(([0], np.cumsum(lengths[:-1], dtype=np.int64))).tolist()
        return cls(narrow, exact, flags, [VECTOR_KEY_OF[k] for k in keys], lengths, offsets)

    def row(self, index: int) -> np.ndarray[Any, np.dtype[np.float32]]:
        return np.frombuffer(
            self.narrow, dtype=np.float32, count=self.lengths[index], offset=4 * self.offsets[index]
        )

    def plain(self, dim: int) -> bool:
        """Every row ``dim`` long, finite in float32 and not all zero: checked as a batch."""
        return all(n == dim for n in self.lengths) and not any(
            f & (BAD_VALUE | ALL_ZERO) for f in self.flags
        )


class PackedVector:
    """Row ``index`` of ``batch``, in place of the list of floats it was in the body."""

    __slots__ = ("batch", "index")

    def __init__(self, batch: PackedBatch, index: int) -> None:
        self.batch = batch
        self.index = index

    def values(self) -> list[float]:
        exact = self.batch.exact[self.index]
        if exact is not None:
            wide: list[float] = np.frombuffer(exact, dtype=np.float64).tolist()
            return wide
        narrow: list[float] = self.batch.row(self.index).tolist()  # each widened exactly
        return narrow

    def __repr__(self) -> str:  # never the values
        return f"PackedVector(row {self.index}, {self.batch.lengths[self.index]} values)"


def packed_batch(records: Any) -> PackedBatch | None:
    """The batch whose rows ``records`` hold in order, one per record under its key, or
    ``None`` (records of the Python API, or a list not as ``split_vectors`` left it)."""
    if type(records) is not list or not records or type(records[0]) is not dict:
        return None
    first = records[0].get("embedding", records[0].get("vector"))
    if not isinstance(first, PackedVector):
        return None
    batch = first.batch
    if len(batch.keys) != len(records):
        return None
    for i, (record, key) in enumerate(zip(records, batch.keys, strict=True)):
        if type(record) is not dict:
            return None
        value = record.get(key)
        if not isinstance(value, PackedVector) or value.batch is not batch or value.index != i:
            return None
    return batch


def batch_for(records: Any, dim: int) -> PackedBatch | None:
    """The batch ``records`` hold when its rows are plainly valid vectors of ``dim``
    values (checked as a batch); otherwise ``None``, every packed vector unpacked first so
    the record-by-record checks see the lists the body held."""
    batch = packed_batch(records)
    if batch is not None and batch.plain(dim):
        return batch
    unpack(records, dim)
    return None


def unpack(records: Any, dim: int | None = None) -> None:
    """Every packed vector of ``records`` (a list of records) back to its list of floats,
    in place: what the body held, for the checks that name a fault. ``body.VectorSplit``
    packs every record's vector or none, so records whose first holds none hold none.

    With ``dim``, a vector of another length becomes ``[]``: the checks read only its
    length to refuse it (``records[i] (id x).embedding must be a list of dim numbers``, the
    same answer), and a hostile vector a million values long never becomes a million
    Python floats."""
    if type(records) is not list or not records or not _holds_packed(records[0]):
        return
    for record in records:
        if type(record) is dict:
            for key in ("embedding", "vector"):
                value = record.get(key)
                if isinstance(value, PackedVector):
                    wrong = dim is not None and value.batch.lengths[value.index] != dim
                    record[key] = [] if wrong else value.values()


def _holds_packed(record: Any) -> bool:
    return type(record) is dict and any(
        isinstance(record.get(k), PackedVector) for k in ("embedding", "vector")
    )


def plain_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its vectors as lists (a copy when it held a packed one)."""
    if not _holds_packed(record):
        return record
    return {k: v.values() if isinstance(v, PackedVector) else v for k, v in record.items()}
