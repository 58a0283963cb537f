"""The ``upsert_many`` digest: replay or conflict exactly as the pinned SHA-256 of canonical
JSON decides, whichever form the store computes (``ratatoskr/memory/digest.py``)."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.core.errors import IdempotencyConflict
from ratatoskr.memory import rules
from ratatoskr.memory.digest import V3, BackgroundSha256, pinned_digest
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from tests.memory.helpers import CTX, DIM, chunk, vec


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RatatoskrMemoryStore]:
    s = open_memory_store(str(tmp_path / "m.db"), embedding_dim=DIM)
    yield s
    s.close()


def parsed(records: list[Any], expected: Any = None) -> rules.UpsertCall:
    return rules.parse_upsert(records, "k", expected, None, DIM)


def same_to_the_pin(a: tuple[list[Any], Any], b: tuple[list[Any], Any]) -> bool:
    return pinned_digest(*a) == pinned_digest(*b)


def same_to_the_store(a: tuple[list[Any], Any], b: tuple[list[Any], Any]) -> bool:
    first, second = parsed(*a).digest, parsed(*b).digest
    return first.matches(second.value) and second.matches(first.value)


# A value of a vector: floats near the interesting edges, float32 values (the digest hashes
# those vectors narrow), and integers now and then.
values = st.one_of(
    st.floats(min_value=-1e30, max_value=1e30, allow_nan=False, allow_subnormal=True),
    st.floats(min_value=-(2.0**100), max_value=2.0**100, allow_nan=False, width=32),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 1e-45, 5e-324]),
    st.integers(min_value=-3, max_value=3),
)
vectors = st.lists(values, min_size=DIM, max_size=DIM).filter(lambda v: any(x != 0 for x in v))
narrow_vectors = st.lists(
    st.floats(min_value=-(2.0**100), max_value=2.0**100, allow_nan=False, width=32),
    min_size=DIM,
    max_size=DIM,
).filter(lambda v: any(x != 0 for x in v))


@st.composite
def payloads(draw: st.DrawFn) -> tuple[list[Any], Any]:
    n = draw(st.integers(min_value=1, max_value=3))
    records = []
    narrow = draw(st.booleans())  # every vector float32-exact, as most batches are
    for i in range(n):
        key = draw(st.sampled_from(["embedding", "vector"]))
        vector = draw(narrow_vectors if narrow else vectors)
        record = {"id": f"c{i}", key: vector, "distillate": draw(st.text(max_size=5))}
        records.append(record)
    expected = draw(st.sampled_from([None, {"c0": 0}]))
    return records, expected


def mutate(payload: tuple[list[Any], Any], how: int, where: int) -> tuple[list[Any], Any]:
    """A payload that is the same, or differs in one small way the digest must see."""
    records, expected = copy.deepcopy(payload)
    record = records[where % len(records)]
    key = "embedding" if "embedding" in record else "vector"
    vector = record[key]
    j = where % DIM
    if how == 1:  # an integer written as a float, or back
        vector[j] = float(vector[j]) if isinstance(vector[j], int) else int(vector[j])
    elif how == 2:  # the next float up
        vector[j] = float(vector[j]) + max(abs(float(vector[j])) * 2**-52, 5e-324)
    elif how == 3:  # a zero's sign
        vector[j] = -vector[j] if vector[j] == 0 else vector[j]
    elif how == 4:  # the other vector key
        record["vector" if key == "embedding" else "embedding"] = record.pop(key)
    elif how == 5:  # a field beside the vector
        record["distillate"] += "!"
    elif how == 6:  # the same record with its keys in another order
        records[where % len(records)] = dict(reversed(list(record.items())))
    elif how == 7:
        expected = None if expected else {"c0": 0}
    return records, expected


@given(payloads(), st.integers(min_value=0, max_value=7), st.integers(min_value=0, max_value=99))
def test_same_payload_exactly_when_the_pinned_digest_says_so(
    payload: tuple[list[Any], Any], how: int, where: int
) -> None:
    other = mutate(payload, how, where)
    try:
        parsed(*other)
    except Exception:  # the mutation made it invalid (an all-zero vector, say)
        return
    assert same_to_the_store(payload, other) == same_to_the_pin(payload, other)


def test_a_float_batch_is_hashed_in_the_v3_form_and_an_integer_batch_as_pinned() -> None:
    floats = [chunk("a", vec(0.25, 0.5))]
    integers = [chunk("a", [1] + [0] * (DIM - 1))]
    assert parsed(floats).digest.value.startswith(V3)
    assert parsed(integers).digest.value == pinned_digest(integers, None)


def test_one_and_one_point_zero_are_different_payloads(store: RatatoskrMemoryStore) -> None:
    store.upsert_many([chunk("a", vec(1.0))], idempotency_key="k", ctx=CTX)
    with pytest.raises(IdempotencyConflict):
        store.upsert_many([chunk("a", [1] + [0.0] * (DIM - 1))], idempotency_key="k", ctx=CTX)


def test_an_entry_holding_the_pinned_digest_still_replays(store: RatatoskrMemoryStore) -> None:
    """An entry holding the pinned digest (a batch with an integer in a vector) is compared in the
    pinned form: a retry replays, a different payload conflicts."""
    records = [chunk("a", vec(0.1, 0.2)), chunk("b", vec(0.3))]
    store.upsert_many(records, idempotency_key="k", ctx=CTX)
    with store.db.write() as conn:
        conn.execute("UPDATE memory_idempotency SET digest = ?", (pinned_digest(records, None),))
    again = store.upsert_many(copy.deepcopy(records), idempotency_key="k", ctx=CTX)
    assert again == {"upserted": 2, "replayed": True}
    with pytest.raises(IdempotencyConflict):
        store.upsert_many([chunk("a", vec(0.1, 0.25))], idempotency_key="k", ctx=CTX)
    record = store.get("a")
    assert record is not None and record["revision"] == 1


def test_a_large_buffer_is_hashed_on_another_thread_to_the_same_sha256() -> None:
    """Past ``THREAD_MIN_BYTES`` (a 500 x 768 batch is 1.5 MB) the vectors are hashed on a
    thread; below it in line. Either way the SHA-256 of the bytes."""
    big = np.arange(500 * 768, dtype=np.float32)
    small = big[:10]
    threaded, inline = BackgroundSha256(big), BackgroundSha256(small)
    assert threaded._thread is not None and inline._thread is None
    assert threaded.digest() == hashlib.sha256(big.tobytes()).digest()
    assert inline.digest() == hashlib.sha256(small.tobytes()).digest()
