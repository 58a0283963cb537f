"""Decoding an ``upsert_many`` or ``search`` body with its vectors read straight into
float32, where orjson would make a Python float of every value (~70 % of an upsert_many's
decode: 384,000 floats for 500 x 768, each read once by the C pass that packs them).

``_body.c``'s ``split_vectors`` parses the vectors (``args.records[i].embedding`` or
``.vector``; ``args.vector``) into a ``PackedBatch`` and hands back the body with each
replaced by ``[]``; ``decode_object`` (orjson, the wide-integer check) then reads what is
left, and each ``[]`` becomes the ``PackedVector`` of its row. The same JSON is accepted and
refused, with the same answer, because:

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

from types import ModuleType
from typing import Any

from ratatoskr.memory.accelerators import BODY
from ratatoskr.memory.packed import PackedBatch, PackedVector
from ratatoskr.memory.rules import F32_ROUNDS_TO_INF
from ratatoskr.wire.envelope import decode_object

# without 128-bit integers every number would take the slow path: orjson is faster then
SPLIT: ModuleType | None = BODY if BODY is not None and BODY.FAST_PATH else None

RECORDS, QUERY = 0, 1


def decode_upsert(body: bytes, accelerator: ModuleType | None = SPLIT) -> dict[str, Any]:
    """``decode_object(body)``, each record's vector a ``PackedVector`` where it can be."""
    split = _split(body, RECORDS, accelerator)
    if split is None:
        return decode_object(body)
    obj, batch = split
    args = obj.get("args")
    records = args.get("records") if type(args) is dict else None
    if type(records) is not list or len(records) != len(batch.keys):
        return decode_object(body)
    for i, (record, key) in enumerate(zip(records, batch.keys, strict=True)):
        if type(record) is not dict or record.get(key) != []:
            return decode_object(body)
        record[key] = PackedVector(batch, i)
    return obj


def decode_search(body: bytes, accelerator: ModuleType | None = SPLIT) -> dict[str, Any]:
    """``decode_object(body)``, the query vector a ``PackedVector`` where it can be."""
    split = _split(body, QUERY, accelerator)
    if split is None:
        return decode_object(body)
    obj, batch = split
    args = obj.get("args")
    if type(args) is not dict or args.get("vector") != [] or len(batch.keys) != 1:
        return decode_object(body)
    args["vector"] = PackedVector(batch, 0)
    return obj


def _split(
    body: bytes, mode: int, accelerator: ModuleType | None
) -> tuple[dict[str, Any], PackedBatch] | None:
    if accelerator is None:
        return None
    split = accelerator.split_vectors(body, mode, F32_ROUNDS_TO_INF)
    if split is None:
        return None
    reduced, narrow, exact, flags, keys, lengths = split
    obj = decode_object(reduced)  # refuses what the body would be refused for
    return obj, PackedBatch.of(narrow, exact, flags, keys, lengths)
