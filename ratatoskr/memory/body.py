"""An ``upsert_many`` or ``search`` body's vectors read straight into float32, where orjson
would make a Python float of every value (~70 % of an upsert_many's decode: 384,000 floats
for 500 x 768, each read once by the C pass that packs them).

``_body.c``'s ``split_vectors`` parses the vectors (``args.records[i].embedding`` or
``.vector``; ``args.vector``) into a ``PackedBatch`` and hands back the body with each
replaced by ``[]``; the wire decodes what is left as it decodes any body (orjson, the
wide-integer check: ``wire.plane.decode_split``) and ``VectorSplit.restore`` makes each
``[]`` the ``PackedVector`` of its row. The same JSON is accepted and refused, with the
same answer, because:

- a replaced array is a valid JSON array of numbers each with a point or an exponent, which
  lies outside any string and follows a ``:``. ``[]`` starts and ends as it does, so orjson
  reads the rest of the body the same way with either: the reduced body is valid JSON
  exactly when the body is, and a refusal is the same refusal (``decode_object`` names no
  position). Only integers are checked for width, and the arrays hold none;
- the arrays are found at exactly those paths: a key with an escape, a key twice at any
  level of the path, a record with both vector keys or neither, anything not an object or
  an array where the path needs one: ``split_vectors`` answers ``None`` and the whole body
  goes to orjson, as before. So does a number orjson would refuse (beyond float64) and any
  array holding an integer (``1`` and ``1.0`` are different payloads to the digest);
- each number is correctly rounded to float64 (to the bit what orjson reads), then to
  float32 and flagged as ``_pack.c`` does, so the rules see the values they would have.

Without the C accelerator (no compiler at install, ``RATATOSKR_NO_ACCELERATORS=1``, or no
128-bit integers, when every number would take the slow path) the body is decoded by orjson
alone, as it always was.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ratatoskr.memory.accelerators import BODY
from ratatoskr.memory.packed import PackedBatch, PackedVector
from ratatoskr.memory.rules import F32_ROUNDS_TO_INF

# without 128-bit integers every number would take the slow path: orjson is faster then
SPLIT: ModuleType | None = BODY if BODY is not None and BODY.FAST_PATH else None

RECORDS, QUERY = 0, 1


@dataclass(frozen=True)
class VectorSplit:
    """A body's vectors, read: ``reduced`` is the body with each replaced by ``[]``, for
    the wire's JSON decode; ``restore`` then puts each vector back as its ``PackedVector``."""

    reduced: bytes
    batch: PackedBatch
    mode: int

    def restore(self, obj: dict[str, Any]) -> bool:
        """Each ``[]`` of the decoded reduced body replaced by its packed vector; ``False``
        (``obj`` untouched) when the decoded body is not of the shape the scan saw."""
        args = obj.get("args")
        if type(args) is not dict:
            return False
        keys = self.batch.keys
        if self.mode == QUERY:
            if args.get("vector") != [] or len(keys) != 1:
                return False
            args["vector"] = PackedVector(self.batch, 0)
            return True
        records = args.get("records")
        if type(records) is not list or len(records) != len(keys):
            return False
        for record, key in zip(records, keys, strict=True):
            if type(record) is not dict or record.get(key) != []:
                return False
        for i, (record, key) in enumerate(zip(records, keys, strict=True)):
            record[key] = PackedVector(self.batch, i)
        return True


def split_upsert(body: bytes, accelerator: ModuleType | None = SPLIT) -> VectorSplit | None:
    """The records' vectors of an ``upsert_many`` body, or ``None`` (decode it whole)."""
    return _split(body, RECORDS, accelerator)


def split_search(body: bytes, accelerator: ModuleType | None = SPLIT) -> VectorSplit | None:
    """The query vector of a ``search`` body, or ``None`` (decode it whole)."""
    return _split(body, QUERY, accelerator)


def _split(body: bytes, mode: int, accelerator: ModuleType | None) -> VectorSplit | None:
    if accelerator is None:
        return None
    split = accelerator.split_vectors(body, mode, F32_ROUNDS_TO_INF)
    if split is None:
        return None
    reduced, narrow, exact, flags, keys, lengths = split
    return VectorSplit(reduced, PackedBatch.of(narrow, exact, flags, keys, lengths), mode)
