"""A batch of chunks into ``memory_chunks`` through binary ``COPY``.

One ``COPY ... (FORMAT BINARY)`` stream, built here in a few struct calls a row (psycopg's
``write_row`` dumps value by value, and pgvector's adapter converts floats one at a time),
goes straight into ``memory_chunks`` when no chunk of the batch exists yet, the common case;
otherwise into ``memory_staging`` (a temporary table of the connection, emptied at commit),
then one ``INSERT ... SELECT ... ON CONFLICT DO UPDATE`` moves it over. Under ``REPEATABLE
READ`` a chunk another server inserted meanwhile fails the statement (a unique violation or
a serialization failure), and the store retries the whole transaction, which then sees it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
import orjson

from ratatoskr.memory import rules
from ratatoskr.postgres.database import Conn

COLUMNS = (
    "chunk_id, revision, tenant, grp, end_user, agent_self, origin, scope_json, updated_at, "
    "embedding, vector_key, vector_f64, record_json"
)
Existing = dict[str, tuple[int, dict[str, str]]]  # id -> (revision, scope) of stored chunks
_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)
_FIELDS = struct.pack(">h", 13)
_NULL = struct.pack(">i", -1)
_SORTED = orjson.OPT_SORT_KEYS
_UPSERT = f"""INSERT INTO memory_chunks ({COLUMNS}) SELECT {COLUMNS} FROM memory_staging
    ON CONFLICT (chunk_id) DO UPDATE SET revision = excluded.revision,
        tenant = excluded.tenant, grp = excluded.grp, end_user = excluded.end_user,
        agent_self = excluded.agent_self, origin = excluded.origin,
        scope_json = excluded.scope_json, updated_at = excluded.updated_at,
        embedding = excluded.embedding, vector_key = excluded.vector_key,
        vector_f64 = excluded.vector_f64, record_json = excluded.record_json"""


def _field(value: str | bytes | None) -> bytes:
    if value is None:
        return _NULL
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return struct.pack(">i", len(raw)) + raw


def _rows(
    chunks: list[rules.Chunk], existing: Existing, now: float, no_tenant: str | None
) -> Iterator[bytes]:
    updated = struct.pack(">id", 8, now)
    dim = len(chunks[0].vector)
    # every vector in big-endian at once; each row takes its slice of the one buffer
    vectors = np.stack([c.vector for c in chunks]).astype(">f4").tobytes()
    width = 4 * dim
    vector_head = struct.pack(">ihh", 4 + width, dim, 0)
    for i, c in enumerate(chunks):
        scope = c.scope
        known = existing.get(c.chunk_id)
        yield b"".join(
            (
                _FIELDS,
                _field(c.chunk_id),
                struct.pack(">ii", 4, known[0] + 1 if known else 1),
                _field(scope.get("tenant", no_tenant)),
                _field(scope.get("group")),
                _field(scope.get("end_user")),
                _field(scope.get("agent_self")),
                _field(c.origin),
                _field(orjson.dumps(scope, option=_SORTED)),
                updated,
                vector_head,
                vectors[i * width : (i + 1) * width],
                _field(c.vector_key),
                _field(c.exact),
                _field(c.rest_json),
            )
        )


def copy_payload(
    chunks: list[rules.Chunk], existing: Existing, now: float, no_tenant: str | None = None
) -> bytes:
    """The whole binary ``COPY`` stream of a batch: header, one tuple per chunk, trailer
    (a chunk without a tenant gets ``no_tenant``: NULL, or ``""`` when partitioned)."""
    return b"".join((_HEADER, *_rows(chunks, existing, now, no_tenant), _TRAILER))


def write_chunks(
    conn: Conn,
    chunks: list[rules.Chunk],
    existing: Existing,
    now: float,
    *,
    partitioned: bool = False,
) -> None:
    """Insert or rewrite ``chunks`` (``existing``: the stored revisions of those that are).
    On a table partitioned by tenant a rewrite may move a chunk to another partition, and
    no unique key spans the partitions: the stored rows are deleted and the batch copied
    in (the caller holds the locks of its ids)."""
    if partitioned:
        if existing:
            doomed = [cid.encode("utf-8") for cid in existing]
            conn.execute("DELETE FROM memory_chunks WHERE chunk_id = ANY(%s)", (doomed,))
        payload = copy_payload(chunks, existing, now, "")
        statement = f"COPY memory_chunks ({COLUMNS}) FROM STDIN (FORMAT BINARY)"
        with conn.cursor() as cur, cur.copy(statement) as copy:
            copy.write(payload)
        return
    payload = copy_payload(chunks, existing, now)
    target = "memory_chunks"
    if existing:
        conn.execute(
            "CREATE TEMPORARY TABLE IF NOT EXISTS memory_staging "
            "(LIKE memory_chunks) ON COMMIT DELETE ROWS"
        )
        target = "memory_staging"
    with (
        conn.cursor() as cur,
        cur.copy(f"COPY {target} ({COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        copy.write(payload)
    if existing:
        conn.execute(_UPSERT)
