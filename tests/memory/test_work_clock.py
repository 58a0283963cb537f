"""The worker's CPU time by phase: each phase is charged its own time, not its nested
phases', and nothing outside a phase."""

from __future__ import annotations

import time

from ratatoskr.memory.search.work_clock import WorkClock


def _spin(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_a_phase_is_charged_its_own_time_and_not_its_nested_phases() -> None:
    clock = WorkClock()
    _spin(0.02)  # outside any phase: charged to none
    with clock.phase("outer"):
        _spin(0.02)
        with clock.phase("inner"):
            _spin(0.05)
        _spin(0.02)
    spent = clock.seconds()
    assert set(spent) == {"outer", "inner"}
    assert 0.04 <= spent["outer"] < 0.05 + 0.02  # its two spins, not the inner one's
    assert 0.05 <= spent["inner"] < 0.05 + 0.02


def test_a_phase_entered_again_adds_up_and_seconds_is_a_copy() -> None:
    clock = WorkClock()
    for _ in range(3):
        with clock.phase("step"):
            _spin(0.01)
    copy = clock.seconds()
    copy["step"] = 0.0
    assert clock.seconds()["step"] >= 0.03


def test_a_phase_left_by_an_exception_ends_there() -> None:
    """The worker's failures are retried: the phase it failed in must not go on counting."""
    clock = WorkClock()
    try:
        with clock.phase("failing"):
            raise ValueError
    except ValueError:
        pass
    with clock.phase("after"):
        _spin(0.02)
    spent = clock.seconds()
    assert spent["after"] >= 0.02 and spent["failing"] < 0.01
