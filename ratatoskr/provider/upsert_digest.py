"""Which ``upsert_many`` payloads are "the same": replay or conflict.

The contract pins the relation: two payloads are the same when the SHA-256 of their
canonical JSON is. Writing a batch's vectors as JSON text only to hash it costs more than the
rest of the batch (500 x 768 floats: ~12 ms of float formatting, ~6 ms of SHA-256 over
7.6 MB), so when every vector value is a JSON float the store hashes, in one SHA-256:

    a tag, the record count, the canonical JSON of ``expected_revisions``, per record its
    vector key (one letter) and the canonical JSON of the record without its vector (which
    the store makes anyway, to store it), then the vectors' float64 bytes in record order

and marks the result ``v2:``. It decides exactly what the pinned digest decides:

- the form is a function of the canonical JSON. A float is written with a point or an
  exponent and an integer without, so "every vector value is a float" can be read off the
  text, and a float's shortest round-trip text and its float64 value determine each other
  (``-0.0`` included; non-finite numbers never get this far);
- it is injective: every part has a known length or ends itself (a JSON value, a one-letter
  key), and the count says how many vectors of ``dim`` values the bytes hold.

A batch whose vectors hold an integer (``1`` and ``1.0`` are different payloads to the pin,
the same float64) keeps the pinned digest as it is. An entry written before ``v2:`` existed
holds the pinned digest; a call compares against it by building the canonical JSON then,
once (``UpsertDigest.matches``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ratatoskr.wire.canonical import canonical_json, digest

V2 = "v2:"
VECTOR_KEY_TAGS = {"embedding": b"e", "vector": b"v"}


def pinned_digest(records: list[Any], expected_revisions: Any) -> str:
    """The contract's digest: SHA-256 of the canonical JSON of the payload."""
    return digest({"records": records, "expected_revisions": expected_revisions}, "records")


def vector_digest(
    keys: list[str], rest_json: list[bytes], expected_revisions: Any, vectors: bytes
) -> str:
    """The ``v2:`` form, for a batch whose every vector value is a float: ``keys`` and
    ``rest_json`` per record (its vector key, its canonical JSON without the vector), and
    ``vectors`` the float64 bytes of all the vectors, record after record."""
    h = hashlib.sha256(b"ratatoskr upsert_many v2\n%d\n" % len(keys))
    h.update(canonical_json(expected_revisions, "expected_revisions"))
    for key, rest in zip(keys, rest_json, strict=True):
        h.update(VECTOR_KEY_TAGS[key])
        h.update(rest)
    h.update(vectors)
    return V2 + h.hexdigest()


@dataclass(frozen=True)
class UpsertDigest:
    """A call's digest, and what it needs to compare with an entry in the pinned form."""

    value: str
    records: list[Any]
    expected_revisions: Any

    def matches(self, stored: str) -> bool:
        if stored == self.value:
            return True
        if self.value.startswith(V2) and not stored.startswith(V2):
            return stored == pinned_digest(self.records, self.expected_revisions)
        return False
