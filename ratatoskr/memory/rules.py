"""What a valid memory call is: the pins of the memory contract, shared by both stores.

Everything here runs before any storage is touched, and every failure names the field and
the record id, never a value.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from ratatoskr.core import idempotency
from ratatoskr.core.canonical import canonical_json, check_json_value
from ratatoskr.core.errors import InvalidArguments
from ratatoskr.core.record_ids import MAX_ID_CHARS as MAX_ID_CHARS
from ratatoskr.core.record_ids import MAX_IDS as MAX_IDS
from ratatoskr.core.record_ids import check_id as check_id
from ratatoskr.core.record_ids import check_ids as check_ids
from ratatoskr.core.record_ids import with_revision as with_revision
from ratatoskr.core.scope import (
    AXES,
    MAX_VALUE_CHARS,
    Scope,
    confine_filter,
    require_inside,
    validate_filter,
    validate_scope,
)
from ratatoskr.memory.digest import (
    BackgroundSha256,
    UpsertDigest,
    pinned_digest,
    vector_digest,
)
from ratatoskr.memory.packed import PackedBatch, batch_for
from ratatoskr.memory.search.cosine import F32
from ratatoskr.memory.vector_pack import ACCELERATED, ALL_ZERO, BAD_VALUE, INEXACT
from ratatoskr.memory.vector_rules import F32_ROUNDS_TO_INF as F32_ROUNDS_TO_INF
from ratatoskr.memory.vector_rules import check_query as check_query
from ratatoskr.memory.vector_rules import check_vector as check_vector

MAX_RECORDS = 1000
MAX_TOP_K = 1000
ID_KEYS = ("id", "chunk_id", "memory_id")
VECTOR_KEYS = ("embedding", "vector")
INJECTED = "injected_context"

CAPABILITIES: dict[str, Any] = {
    "relational_edges_supported": False,
    "optimistic_locking_supported": True,
    "atomic_supersede_supported": False,
    "transaction_supported": False,
    "filterable_metadata_fields": [],
}
LIMITS = {"max_records": MAX_RECORDS, "max_ids": MAX_IDS, "max_top_k": MAX_TOP_K}


@dataclass(slots=True)
class Chunk:
    """A record as the store reads it: the structural surface, the vector as float32 (what
    is ranked), the float64 bytes when float32 does not hold every value exactly (else
    ``None``), and the canonical JSON of everything but the vector. Not frozen: a frozen
    dataclass sets each field through ``object.__setattr__``, 3x the cost of making one,
    and a batch makes 500."""

    chunk_id: str
    vector: F32
    exact: bytes | None
    vector_key: str
    scope: Scope
    origin: str | None
    record: dict[str, Any]
    rest_json: bytes


@dataclass(frozen=True)
class UpsertCall:
    chunks: list[Chunk]
    idempotency_key: str
    idempotency_class: str
    expected_revisions: dict[str, int] | None
    digest: UpsertDigest


@dataclass(frozen=True)
class SearchCall:
    vector: F32
    top_k: int
    scope_all: Scope
    scope_any: list[Scope]
    include_embedding: bool


def record_id(record: dict[str, Any], field: str) -> str:
    for key in ID_KEYS:
        if key in record:
            return check_id(record[key], f"{field}.{key}")
    raise InvalidArguments(f"{field} has no id (one of {', '.join(ID_KEYS)})")


def parse_chunk(
    record: Any, index: int, dim: int, checked: tuple[F32, bytes | None] | None = None
) -> Chunk:
    """One record, checked. ``checked`` carries its vector when ``check_vectors`` already
    validated every vector of the batch at once; then a common record takes the one pass
    of ``plain_chunk``, and any other is checked field by field (``check_chunk``)."""
    if checked is not None:
        plain = plain_chunk(record, checked)
        if plain is not None:
            return plain
    return check_chunk(record, index, dim, checked)


def check_chunk(
    record: Any, index: int, dim: int, checked: tuple[F32, bytes | None] | None = None
) -> Chunk:
    """One record checked field by field, the first fault named with its field and id."""
    field = f"records[{index}]"
    if not isinstance(record, dict):
        raise InvalidArguments(f"{field} must be an object")
    chunk_id = record_id(record, field)
    where = f"{field} (id {chunk_id})"
    vector_key = next((k for k in VECTOR_KEYS if k in record), None)
    if vector_key is None:
        raise InvalidArguments(f"{where} has no embedding")
    if checked is None:
        vector, wide = check_vector(record[vector_key], dim, f"{where}.{vector_key}")
        same = np.array_equal(vector.astype(np.float64), wide)
        checked = (vector, None if same else wide.tobytes())
    # validated, not copied: the chunk lives for the call, and a copy per record is 500
    # more live objects for the garbage collector to count (each collection walks the
    # batch's fresh embedding lists)
    scope = record.get("scope", {})
    validate_scope(scope, f"{where}.scope")
    origin = record.get("origin")
    if origin is not None and not isinstance(origin, str):
        raise InvalidArguments(f"{where}.origin must be a string")
    has_source = record.get("injection_source") is not None
    if origin == INJECTED and not has_source:
        raise InvalidArguments(f"{where}: origin injected_context requires injection_source")
    if origin != INJECTED and has_source:
        raise InvalidArguments(f"{where}: injection_source is only allowed on injected_context")
    rest = {k: v for k, v in record.items() if k != vector_key}
    check_json_value(rest, where)
    return Chunk(
        chunk_id,
        checked[0],
        checked[1],
        vector_key,
        scope,
        origin,
        record,
        canonical_json(rest, where),
    )


_AXIS_NAMES = frozenset(AXES)
_SORTED = orjson.OPT_SORT_KEYS
_INF = float("inf")


def plain_chunk(record: Any, checked: tuple[F32, bytes | None]) -> Chunk | None:
    """``parse_chunk`` for the common record, in one pass with no field names built: a
    record keyed ``id``, exact built-in types, scope values and top-level values plain.
    ``None`` when anything is not plainly valid (or would need a closer look); then
    ``check_chunk`` decides and names the fault as always. ~3 µs a record
    where ``parse_chunk`` takes ~9 (a tenth of a 500-record batch's time in the store)."""
    if type(record) is not dict:
        return None
    chunk_id = record.get("id")
    if type(chunk_id) is not str or not 0 < len(chunk_id) <= MAX_ID_CHARS:
        return None
    if not chunk_id.isascii():
        return None  # check_chunk checks UTF-8
    key = "embedding" if "embedding" in record else "vector"
    scope = record.get("scope", {})
    if type(scope) is not dict:
        return None
    for axis, value in scope.items():
        if (
            axis not in _AXIS_NAMES
            or type(value) is not str
            or not 0 < len(value) <= MAX_VALUE_CHARS
        ):
            return None
    origin = record.get("origin")
    if origin is not None and type(origin) is not str:
        return None
    if (origin == INJECTED) != (record.get("injection_source") is not None):
        return None
    rest = record.copy()
    del rest[key]
    for name, value in rest.items():
        if type(name) is not str:
            return None
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None or name == "scope":
            continue
        if kind is float:
            if not -_INF < value < _INF:
                return None
        elif kind is dict or kind is list:
            try:
                check_json_value(value, "value", None, 1)
            except InvalidArguments:
                return None
        else:
            return None
    try:
        rest_json = orjson.dumps(rest, option=_SORTED)
    except (TypeError, orjson.JSONEncodeError):
        return None
    return Chunk(chunk_id, checked[0], checked[1], key, scope, origin, record, rest_json)


@dataclass(frozen=True)
class CheckedVectors:
    """A batch's vectors checked at once: per record its float32 vector (a row of
    ``narrow``) and its float64 bytes when float32 does not hold it exactly; all the float64
    bytes (``wide``: made when first asked for, from the two, when the vectors came packed),
    and whether every value was a JSON float (what the ``v3:`` digest needs)."""

    narrow: npt.NDArray[np.float32]  # one row per record
    exact: list[bytes | None]
    keys: list[str]
    given_wide: bytes | None
    all_floats: bool

    @property
    def wide(self) -> bytes:
        if self.given_wide is not None:
            return self.given_wide
        rows = [
            e if e is not None else self.narrow[i].astype(np.float64).tobytes()
            for i, e in enumerate(self.exact)
        ]
        return b"".join(rows)


def check_vectors(
    records: list[Any],
    dim: int,
    accelerator: ModuleType | None = ACCELERATED,
    packed: PackedBatch | None = None,
) -> CheckedVectors | None:
    """Every record's vector checked in one pass, or ``None`` when any record or vector is
    not plainly valid: the caller then checks record by record, which names the first fault
    exactly as before.

    ``packed``: the records' vectors as ``body.split_upsert`` read them, already packed,
    checked and flagged (``packed.plain(dim)``), every value a JSON float.

    With the C accelerator and every value a float, one C pass packs and checks the batch
    (``narrow_float_lists``: ~1.5 ms for 500 x 768). Otherwise ``array('d', ...)``
    converts at ~20 ns a value and refuses anything but numbers, except booleans and
    integers, which it converts; those become integral float64 values, so only the vectors
    holding an integral value are looked at element by element (a type check of every
    entry costs as much as the conversion itself), and numpy checks the values."""
    if packed is not None:
        narrow = np.frombuffer(packed.narrow, dtype=np.float32).reshape(len(records), dim)
        return CheckedVectors(narrow, packed.exact, packed.keys, None, True)
    vectors: list[Any] = []
    keys: list[str] = []
    for record in records:
        if not isinstance(record, dict):
            return None
        key = "embedding" if "embedding" in record else "vector"
        vectors.append(record.get(key))
        keys.append(key)
    lists = None
    if accelerator is not None:
        lists = accelerator.narrow_float_lists(vectors, dim, F32_ROUNDS_TO_INF)
    if lists is not None:
        converted, narrow_bytes, flags = lists
        if any(flag & (BAD_VALUE | ALL_ZERO) for flag in flags):
            return None
        wide = np.frombuffer(converted, dtype=np.float64).reshape(len(vectors), dim)
        narrow = np.frombuffer(narrow_bytes, dtype=np.float32).reshape(len(vectors), dim)
        exact = [wide[i].tobytes() if flag & INEXACT else None for i, flag in enumerate(flags)]
        return CheckedVectors(narrow, exact, keys, converted, True)
    if any(type(v) is not list or len(v) != dim for v in vectors):
        return None
    try:
        converted = b"".join([array("d", vector).tobytes() for vector in vectors])
    except (TypeError, OverflowError):
        return None
    wide = np.frombuffer(converted, dtype=np.float64).reshape(len(vectors), dim)
    if not bool((np.abs(wide).max(axis=1) < F32_ROUNDS_TO_INF).all()):
        return None
    all_floats = True
    for i in np.flatnonzero((np.rint(wide) == wide).any(axis=1)).tolist():
        types = set(map(type, vectors[i]))
        if bool in types:
            return None
        all_floats = all_floats and types == {float}
    narrow = wide.astype(np.float32)
    if not bool(narrow.any(axis=1).all()):
        return None
    inexact = (narrow.astype(np.float64) != wide).any(axis=1).tolist()
    exact = [wide[i].tobytes() if inexact[i] else None for i in range(len(vectors))]
    return CheckedVectors(narrow, exact, keys, converted, all_floats)


def parse_upsert(
    records: Any,
    idempotency_key: Any,
    expected_revisions: Any,
    idempotency_class: Any,
    dim: int,
) -> UpsertCall:
    key = idempotency.parse_key(idempotency_key)
    klass = idempotency.parse_class(idempotency_class)
    if not isinstance(records, list) or not 1 <= len(records) <= MAX_RECORDS:
        raise InvalidArguments(f"records must be a list of 1..{MAX_RECORDS} objects")
    checked = check_vectors(records, dim, packed=batch_for(records, dim))
    vectors_hash = None
    all_narrow = False
    if checked is not None and checked.all_floats:
        # the vectors' digest on another thread, beside the per-record checks below
        all_narrow = all(e is None for e in checked.exact)
        vectors_hash = BackgroundSha256(checked.narrow if all_narrow else checked.wide)
    if checked is None:
        chunks = [parse_chunk(r, i, dim) for i, r in enumerate(records)]
    else:
        # a tuple per record, gone once its chunk is made: a list of them kept alive would
        # add 500 objects for the garbage collector to count, and a collection passes over
        # every young embedding list (~1 ms each time for 500 x 768)
        narrow, exact = checked.narrow, checked.exact
        chunks = [parse_chunk(r, i, dim, (narrow[i], exact[i])) for i, r in enumerate(records)]
    ids = [c.chunk_id for c in chunks]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise InvalidArguments(f"records name the same id twice: {', '.join(dupes[:10])}")
    expected = parse_expected(expected_revisions, set(ids))
    expected_revisions = expected_revisions or None  # the digest's "expected_revisions or null"
    if checked is not None and vectors_hash is not None:
        rest = [c.rest_json for c in chunks]
        value = vector_digest(
            checked.keys, rest, expected_revisions, all_narrow, vectors_hash.digest()
        )
        digest = UpsertDigest(value, records, expected_revisions)
    else:
        digest = UpsertDigest(
            pinned_digest(records, expected_revisions), records, expected_revisions
        )
    return UpsertCall(chunks, key, klass, expected, digest)


def parse_expected(value: Any, ids: set[str]) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArguments("expected_revisions must be an object from id to revision")
    for chunk_id, revision in value.items():
        check_id(chunk_id, "expected_revisions key")
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            raise InvalidArguments(f"expected_revisions[{chunk_id}] must be an integer >= 0")
        if chunk_id not in ids:
            raise InvalidArguments(f"expected_revisions names {chunk_id}, which is not in records")
    return dict(value)


def parse_search(
    vector: Any,
    top_k: Any,
    scope_all: Any,
    scope_any: Any,
    metadata_filter: Any,
    include: Any,
    fidelity_target: Any,
    dim: int,
) -> SearchCall:
    query = check_query(vector, dim)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArguments(f"top_k must be an integer in 1..{MAX_TOP_K}")
    if metadata_filter not in (None, {}):
        raise InvalidArguments("metadata_filter is not supported (no filterable fields)")
    include_embedding = True
    if include is not None:
        if not isinstance(include, dict):
            raise InvalidArguments("include must be null or an object")
        if set(include) - {"embedding"}:
            raise InvalidArguments("include may only hold the key embedding")
        if "embedding" in include:
            if not isinstance(include["embedding"], bool):
                raise InvalidArguments("include.embedding must be a boolean")
            include_embedding = include["embedding"]
    if fidelity_target is not None and (
        isinstance(fidelity_target, bool)
        or not isinstance(fidelity_target, int | float)
        or not 0 < fidelity_target <= 1
    ):
        raise InvalidArguments("fidelity_target must be null or a number in (0, 1]")
    all_: Scope
    any_: list[Scope] = []
    if scope_any is None and isinstance(scope_all, dict):  # ``validate_filter``'s answer
        all_ = validate_scope(scope_all, "scope_all")
    else:
        all_, any_ = validate_filter(scope_all, scope_any)
    return SearchCall(query, top_k, all_, any_, include_embedding)


def confine_search(call: SearchCall, token_scope: Mapping[str, str]) -> SearchCall:
    all_, any_ = confine_filter(call.scope_all, call.scope_any, token_scope)
    return SearchCall(call.vector, call.top_k, all_, any_, call.include_embedding)


def confine_writes(chunks: list[Chunk], token_scope: Mapping[str, str]) -> None:
    if not token_scope:
        return  # an unconfined token: every scope lies inside it
    for chunk in chunks:
        require_inside(chunk.scope, token_scope, f"record {chunk.chunk_id}")


def search_hit(
    record: dict[str, Any], chunk_id: str, score: float, revision: int, include_embedding: bool
) -> dict[str, Any]:
    """One search result: the chunk verbatim, its score, its recalled view and revision.
    ``record`` is the caller's to give away: without the embedding it is copied only when
    it holds a vector key (a record read back without its vector usually holds none)."""
    chunk = record
    if not include_embedding and ("embedding" in record or "vector" in record):  # VECTOR_KEYS
        chunk = {k: v for k, v in record.items() if k not in VECTOR_KEYS}
    # the contract's ``chunk["distillate"] or chunk``: a null, empty, zero or false
    # distillate recalls the whole chunk, as an absent one does
    view = chunk.get("distillate") or chunk
    return {
        "chunk": chunk,
        "chunk_id": chunk_id,
        "score": score,
        "recalled_view": view,
        "revision": revision,
    }
