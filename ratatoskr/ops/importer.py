"""``admin import``: load a JSON-lines file into a plane in batches, resumably.

Each batch is prepared as the wire prepares the verb's call (``memory.calls``,
``affect.calls``) and goes through the store's own write (``upsert_parsed``, ``put_parsed``
or ``append_parsed``) with an idempotency key derived from the file's name, the batch's
index and the batch's bytes. A rerun after a failure therefore replays every
batch that was stored (nothing written twice, no revision bumped) and continues with the
first that was not; fixing one bad line changes only its own batch's key. Errors name line
numbers and fields, never a line's content.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import orjson

from ratatoskr.affect import calls as affect_calls
from ratatoskr.affect.interface import AffectStore
from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import BifrostError, Unavailable
from ratatoskr.core.filters import AFFECT, MEMORY
from ratatoskr.memory import calls as memory_calls
from ratatoskr.memory.interface import MemoryStore
from ratatoskr.memory.rules import ID_KEYS
from ratatoskr.ops.listing import check_limit
from ratatoskr.ops.stores import PlaneStore

DEFAULT_BATCH = 200
MAX_BATCH = 1000
ACTOR = "ratatoskr-admin-import"
KINDS = {MEMORY: ("chunk",), AFFECT: ("state", "event")}  # the default first
_ITEM = re.compile(r"^(records|events)\[(\d+)\]")


class ImportFailed(ValueError):
    """A line the store refused (or that is not a JSON object); what came before is stored."""

    def __init__(self, message: str, *, line: int, stored: int, batches: int) -> None:
        super().__init__(message)
        self.line = line
        self.stored = stored
        self.batches = batches


@dataclass
class _Batch:
    lines: list[int]
    records: list[Any]
    raw: list[bytes]


def check_arguments(plane: str, kind: str | None, batch: int) -> str:
    """The kind of record to import, once ``kind`` and ``batch`` are known good: checked
    before a store is opened (or created). A plane of one kind (memory) needs none; the
    affect plane holds two, and a file of events read as states would store them all, as
    states, without a word: there ``kind`` must be named."""
    if kind is None and len(KINDS[plane]) > 1:
        raise ValueError(
            f"the {plane} plane holds {' and '.join(k + 's' for k in KINDS[plane])}: "
            f"say which the file holds with --kind {' or --kind '.join(KINDS[plane])}"
        )
    kind = kind or KINDS[plane][0]
    if kind not in KINDS[plane]:
        raise ValueError(f"kind for the {plane} plane must be one of {', '.join(KINDS[plane])}")
    check_limit(batch, MAX_BATCH, "batch")
    return kind


def count_lines(path: str) -> int:
    """The input's lines (for the progress bar); an input that cannot be read is refused
    by name, before a store is opened."""
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory, not a JSON Lines file")
    try:
        with open(path, "rb") as handle:
            return sum(1 for _ in handle)
    except OSError as exc:
        raise ValueError(f"{path} cannot be read ({exc.strerror})") from None


def batch_key(path: str, kind: str, index: int, raw: list[bytes]) -> str:
    """The batch's idempotency key: same file name, index and bytes, same key."""
    h = hashlib.sha256()
    for part in (os.path.basename(path).encode(), kind.encode(), str(index).encode(), *raw):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return f"import:{kind}:{index}:{h.hexdigest()[:40]}"


def import_jsonl(
    store: PlaneStore,
    plane: str,
    path: str,
    *,
    kind: str | None = None,
    batch: int = DEFAULT_BATCH,
    on_line: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Import ``path`` into ``store``; ``on_line`` gets the number of lines consumed so far."""
    kind = check_arguments(plane, kind, batch)
    store.ready_to_write()  # a store that takes no write (read-only, mid-migration) says so
    tally = {"records": 0, "written": 0, "batches": 0, "replayed_batches": 0}
    current = _Batch([], [], [])
    ctx = CallContext(actor=ACTOR)
    seen: dict[bytes, int] = {}  # a digest of each id read so far: the line it was on

    def flush() -> None:
        if not current.records:
            return
        key = batch_key(path, kind, tally["batches"], current.raw)
        try:
            result = _write(store, kind, current.records, key, ctx)
        except Unavailable:
            raise
        except BifrostError as exc:
            line, message = _locate(str(exc), current.lines)
            raise ImportFailed(
                message, line=line, stored=tally["records"], batches=tally["batches"]
            ) from None
        tally["batches"] += 1
        tally["records"] += len(current.records)
        replayed = bool(result.get("replayed"))
        tally["replayed_batches"] += int(replayed)
        if not replayed:
            count = result.get("upserted", result.get("written", result.get("appended", 0)))
            tally["written"] += int(count)
        current.lines.clear()
        current.records.clear()
        current.raw.clear()

    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            text = raw.strip()
            if text:
                try:
                    record = orjson.loads(text)
                except orjson.JSONDecodeError:
                    record = None
                if not isinstance(record, dict):
                    raise ImportFailed(
                        f"line {number}: not a JSON object",
                        line=number,
                        stored=tally["records"],
                        batches=tally["batches"],
                    )
                digest = _id_digest(record)
                first = number if digest is None else seen.setdefault(digest, number)
                if first != number:
                    # refused wherever the two fall, whatever --batch: a batch holding both
                    # would be refused whole, two batches would silently keep the later one
                    raise ImportFailed(
                        f"line {number}: the same id as line {first} (a file names each "
                        "record once)",
                        line=number,
                        stored=tally["records"],
                        batches=tally["batches"],
                    )
                current.lines.append(number)
                current.records.append(record)
                current.raw.append(text)
                if len(current.records) == batch:
                    flush()
            if on_line is not None:
                on_line(number)
        flush()
    return {"plane": plane, "kind": kind, "file": os.path.basename(path), **tally}


def _id_digest(record: dict[str, Any]) -> bytes | None:
    """A short digest of the record's id (the first id key it holds), so a large file's ids
    cost little memory; None without one (the store refuses that record, by its line)."""
    key = next((k for k in ID_KEYS if k in record), None)
    if key is None:
        return None
    return hashlib.blake2b(orjson.dumps(record[key]), digest_size=16).digest()


def _write(
    store: PlaneStore, kind: str, records: list[Any], key: str, ctx: CallContext
) -> dict[str, Any]:
    """One batch prepared as the wire prepares the verb's call, then the store's write."""
    args: dict[str, Any] = {"idempotency_key": key, "idempotency_class": "durable"}
    if kind == "chunk":
        memory = cast(MemoryStore, store)
        call = memory_calls.prepare_upsert({**args, "records": records}, ctx, memory.embedding_dim)
        return memory.upsert_parsed(call, ctx)
    affect = cast(AffectStore, store)
    if kind == "state":
        return affect.put_parsed(affect_calls.prepare_put({**args, "records": records}, ctx), ctx)
    return affect.append_parsed(affect_calls.prepare_append({**args, "events": records}, ctx), ctx)


def _locate(message: str, lines: list[int]) -> tuple[int, str]:
    """Turn ``records[i]`` in a store error into the file's line number."""
    found = _ITEM.match(message)
    if found and int(found.group(2)) < len(lines):
        line = lines[int(found.group(2))]
        return line, f"line {line}: the record{message[found.end() :]}"
    return lines[0], f"lines {lines[0]}..{lines[-1]}: {message}"
