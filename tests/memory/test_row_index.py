"""The mirror's id -> row map split across shards answers exactly as one dict would."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.memory.search.row_index import SHARDS, RowIndex

IDS = st.text(min_size=1, max_size=6)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), IDS, st.integers(0, 10**6)),
        st.tuples(
            st.just("assign"), st.lists(IDS, max_size=40, unique=True), st.integers(0, 10**6)
        ),
        st.tuples(st.just("update"), st.lists(IDS, max_size=10), st.integers(0, 10**6)),
        st.tuples(st.just("discard"), st.lists(IDS, max_size=10), st.just(0)),
    ),
    max_size=60,
)


@given(OPS)
def test_every_change_leaves_the_mapping_a_dict_would_hold(
    ops: list[tuple[str, object, int]],
) -> None:
    index, reference = RowIndex(), dict[str, int]()
    for op, key, row in ops:
        if op == "set":
            assert isinstance(key, str)
            index[key] = reference[key] = row
        elif op == "assign":
            assert isinstance(key, list)
            ids = np.array(key, dtype=object)
            rows = np.arange(row, row + len(key), dtype=np.int64)
            index.assign(ids, rows)
            reference.update(zip(key, rows.tolist(), strict=True))
        elif op == "discard":
            assert isinstance(key, list)
            index.discard(key)
            for cid in key:
                reference.pop(cid, None)
        else:
            assert isinstance(key, list)
            pairs = [(cid, row + i) for i, cid in enumerate(key)]
            index.update(pairs)
            reference.update(pairs)
    assert len(index) == len(reference)
    assert dict(index.items()) == reference
    assert sorted(index) == sorted(reference)
    for cid, row in reference.items():
        assert index[cid] == row
    asked = [*reference, "\x00absent"]
    assert index.rows_of(asked) == [reference.get(cid, -1) for cid in asked]


def test_a_large_block_spreads_over_every_shard_and_keeps_each_row() -> None:
    ids = np.array([f"chunk-{i:07d}" for i in range(50_000)], dtype=object)
    rows = np.arange(50_000, dtype=np.int64)[::-1].copy()
    index = RowIndex()
    index.assign(ids, rows)
    assert len(index) == 50_000
    assert all(len(shard) for shard in index._shards) and len(index._shards) == SHARDS
    assert max(map(len, index._shards)) < 2 * 50_000 // SHARDS
    assert [index[cid] for cid in ids[:5].tolist()] == rows[:5].tolist()
    index.assign(ids[:10], np.zeros(10, dtype=np.int64))  # a block reassigned: no duplicates
    assert len(index) == 50_000 and index["chunk-0000009"] == 0
