"""Where a regroup builds its copy: in arrays the process touched before (the rows the
last regroup replaced, or the room the load made), since memory touched for the first
time costs page faults, and with huge pages compaction, taken from the searches beside
it. Whatever those arrays held never reaches a search."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratatoskr.memory.search import build
from ratatoskr.memory.search import mirror as memory_mirror
from ratatoskr.memory.search.holds import holding
from tests.memory.helpers import DIM, settled
from tests.memory.test_tail import filled, small_regroups  # noqa: F401 - a fixture


@pytest.mark.usefixtures("small_regroups")
def test_a_regroup_builds_its_copy_in_the_arrays_the_last_one_replaced(tmp_path: Path) -> None:
    """The second regroup reuses the first one's replaced arrays (memory touched before
    costs no page faults); whatever they held past the rows never reaches a search."""
    pair = filled(tmp_path, 9)
    ours = pair.ours
    worker = ours.engine.worker
    assert ours.mirror is not None and worker is not None
    replaced = []
    for regroups in (1, 2):
        with holding("regroup-released", worker) as released:
            with holding("regroup-built", worker) as built:
                # the deletes commit after the rest: fewer than a regroup's minimum, so a
                # worker that regroups between the two commits has no second regroup due
                pair.write(20, rewrite=70, delete=memory_mirror.REGROUP_MIN - 2)
                pair.agree()  # searched: a regroup is due
                assert built.reached.wait(30)
                replaced.append(ours.mirror.matrix)  # the rows this regroup replaces
                pair.agree()
            assert released.reached.wait(30)
            spare = worker._spare  # kept for the next regroup: its arrays, none of its objects
            assert spare is not None and spare.matrix is replaced[-1]
            assert not len(spare.rows) and not spare.values  # its id map and code tables too
            held = spare.ids.tolist() + spare.keys.tolist() + spare.records.tolist()
            assert held and all(value is None for value in held)
            pair.agree()

        def regrouped(m: memory_mirror.VectorMirror, r: int = regroups) -> bool:
            return m.regroups >= r

        assert ours.engine.wait_until(regrouped, 30)
        pair.agree()
    assert ours.mirror.matrix is replaced[0]  # the first regroup replaced it, the second reused it
    settled(ours)
    pair.agree()
    ours.close()


@pytest.mark.usefixtures("small_regroups")
def test_the_load_makes_room_for_the_first_regroups_copy(tmp_path: Path) -> None:
    """A load whose copy fits the budget also makes the arrays the first regroup builds in
    (memory first touched then, while searches run in SQL, not beside the searches)."""
    pair = filled(tmp_path, 13)
    ours, worker = pair.ours, pair.ours.engine.worker
    assert ours.mirror is not None and worker is not None
    spare = worker._spare
    assert spare is not None and len(spare.alive) >= 400 + memory_mirror.headroom(400)
    pair.write(40, rewrite=60)  # grown by about what makes a regroup due
    pair.agree()  # searched: a regroup is due
    assert ours.engine.wait_until(lambda m: m.regroups >= 1, 30)
    assert ours.mirror.matrix is spare.matrix  # the copy was built in it
    settled(ours)
    pair.agree()
    ours.close()


def test_a_load_whose_copy_does_not_fit_makes_no_room_for_it(tmp_path: Path) -> None:
    pair = filled(tmp_path, 14, mirror_bytes=memory_mirror.bytes_per_row(DIM) * 700)
    assert pair.ours.engine.worker is not None and pair.ours.engine.worker._spare is None
    pair.ours.close()


def test_a_copys_arrays_take_the_next_regroup_of_a_store_grown_a_little(tmp_path: Path) -> None:
    """A copy has room past its own rows and headroom, so the regroup after it, of a store
    that grew a few rows meanwhile, builds in its arrays rather than in new memory."""
    pair = filled(tmp_path, 12)
    live = pair.ours.mirror
    assert live is not None
    copy = build._room(live, live.n, None)
    assert len(copy.alive) == build.capacity(live.n) > live.n + memory_mirror.headroom(live.n)
    grown = live.n + live.n // 20
    assert build._room(live, grown, copy).matrix is copy.matrix
    much = build.capacity(live.n)  # past the room: new arrays
    assert build._room(live, much, copy).matrix is not copy.matrix
    pair.ours.close()
