"""Which ``upsert_many`` payloads are "the same": replay or conflict.

The contract pins the relation: two payloads are the same when the SHA-256 of their
canonical JSON is. Writing a batch's vectors as JSON text only to hash it costs more than the
rest of the batch (500 x 768 floats: ~12 ms of float formatting, ~6 ms of SHA-256 over
7.6 MB), so when every vector value is a JSON float the store computes the ``v3:`` form:

    SHA-256 over a tag, the record count, the canonical JSON of ``expected_revisions``, per
    record its vector key (one letter) and the canonical JSON of the record without its
    vector (which the store makes anyway, to store it), then the SHA-256 of the vectors:
    ``f`` and their float32 bytes when float32 holds every value exactly (the common case),
    else ``d`` and their float64 bytes, record after record

It decides exactly what the pinned digest decides:

- the form is a function of the canonical JSON. A float is written with a point or an
  exponent and an integer without, so "every vector value is a float" can be read off the
  text; a float's shortest round-trip text and its float64 value determine each other
  (``-0.0`` included; non-finite numbers never get this far); and whether float32 holds a
  float64 value exactly is a function of the value, as widening float32 to float64 is exact
  and one to one;
- it is injective: every part has a known length or ends itself (a JSON value, a one-letter
  key), the count says how many vectors of ``dim`` values the bytes hold, and the letter
  says their width.

The inner SHA-256 runs on a thread of its own (``BackgroundSha256``: hashlib releases the GIL
while it hashes), beside the per-record checks.

A batch whose vectors hold an integer (``1`` and ``1.0`` are different payloads to the pin,
the same float64) keeps the pinned digest as it is. An entry holding the pinned form is
compared in that form, computed then, once (``UpsertDigest.matches``).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any

from ratatoskr.core.canonical import canonical_json, digest
from ratatoskr.memory.packed import plain_record

V3 = "v3:"
VECTOR_KEY_TAGS = {"embedding": b"e", "vector": b"v"}
# Below this many bytes a thread costs more (~50-100 µs to start) than the hash it takes over.
THREAD_MIN_BYTES = 256 * 1024


class BackgroundSha256:
    """The SHA-256 of ``data``, computed on another thread when ``data`` is large, so the
    caller's own work (the per-record checks of a batch) runs meanwhile on the other core."""

    def __init__(self, data: Any) -> None:
        self._hash = hashlib.sha256()
        self._thread: threading.Thread | None = None
        if memoryview(data).nbytes < THREAD_MIN_BYTES:
            self._hash.update(data)
        else:
            self._thread = threading.Thread(
                target=self._hash.update, args=(data,), name="ratatoskr-digest", daemon=True
            )
            self._thread.start()

    def digest(self) -> bytes:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self._hash.digest()


def pinned_digest(records: list[Any], expected_revisions: Any) -> str:
    """The contract's digest: SHA-256 of the canonical JSON of the payload."""
    return digest({"records": records, "expected_revisions": expected_revisions}, "records")


def _records_part(h: Any, keys: list[str], rest_json: list[bytes], expected: Any) -> None:
    h.update(canonical_json(expected, "expected_revisions"))
    for key, rest in zip(keys, rest_json, strict=True):
        h.update(VECTOR_KEY_TAGS[key])
        h.update(rest)


def vector_digest(
    keys: list[str],
    rest_json: list[bytes],
    expected_revisions: Any,
    all_narrow: bool,
    vectors_sha256: bytes,
) -> str:
    """The ``v3:`` form, for a batch whose every vector value is a float: ``keys`` and
    ``rest_json`` per record (its vector key, its canonical JSON without the vector), and
    ``vectors_sha256`` the SHA-256 of all the vectors' bytes, record after record: float32
    when ``all_narrow`` (float32 holds every value exactly), else float64."""
    h = hashlib.sha256(b"ratatoskr upsert_many v3\n%d\n" % len(keys))
    _records_part(h, keys, rest_json, expected_revisions)
    h.update(b"f" if all_narrow else b"d")
    h.update(vectors_sha256)
    return V3 + h.hexdigest()


@dataclass(frozen=True)
class UpsertDigest:
    """A call's digest, and what it needs to compare with an entry in the pinned form."""

    value: str
    records: list[Any]
    expected_revisions: Any

    def matches(self, stored: str) -> bool:
        if stored == self.value:
            return True
        if not self.value.startswith(V3):
            return False
        if stored.startswith(V3):
            return False
        records = [plain_record(r) if type(r) is dict else r for r in self.records]
        return stored == pinned_digest(records, self.expected_revisions)
