"""Vectors between numpy and PostgreSQL, in binary, without pgvector's per-float Python work.

- a query vector goes out as a binary ``real[]`` parameter (``Float4Array``), cast to
  ``vector`` in SQL: ``real[]`` is a built-in type, so no connection needs pgvector's type
  oid looked up first (a pooled connection may predate the extension);
- a stored vector comes back as the raw bytes of pgvector's binary form (a query run with
  ``binary=True`` hands over an unknown type's bytes): two int16 (dim, unused), then dim
  big-endian float32, read by ``parse_vector`` in one numpy call;
- ``vector_field`` is that same binary form, for ``COPY ... (FORMAT BINARY)``.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

F32 = npt.NDArray[np.float32]
FLOAT4_OID = 700
FLOAT4_ARRAY_OID = 1021
_BIG_F32 = np.dtype(">f4")
_ELEMENT = np.dtype([("length", ">i4"), ("value", ">f4")])


class Float4Array:
    """A float32 vector to send as a binary ``real[]`` parameter."""

    __slots__ = ("values",)

    def __init__(self, values: F32) -> None:
        self.values = values


class Float4ArrayDumper(Dumper):
    format = Format.BINARY
    oid = FLOAT4_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        values = obj.values
        out = np.empty(len(values), dtype=_ELEMENT)
        out["length"] = 4
        out["value"] = values
        return struct.pack(">iiiii", 1, 0, FLOAT4_OID, len(values), 1) + out.tobytes()


def register_types(conn: psycopg.Connection[Any]) -> None:
    """The pool's ``configure``: the dumpers this package sends."""
    conn.adapters.register_dumper(Float4Array, Float4ArrayDumper)


def vector_field(vector: F32) -> bytes:
    """pgvector's binary form of ``vector``: what ``COPY (FORMAT BINARY)`` takes."""
    return struct.pack(">hh", len(vector), 0) + vector.astype(_BIG_F32).tobytes()


def parse_vector(raw: bytes | memoryview) -> F32:
    """A vector read in binary (``vector_field``'s layout) as native float32."""
    return np.frombuffer(raw, dtype=_BIG_F32, offset=4).astype(np.float32)
