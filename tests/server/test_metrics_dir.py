"""The metrics directory's wipe at start removes prometheus_client's sample files of an
earlier run and nothing else: ``PROMETHEUS_MULTIPROC_DIR`` may name a directory that holds
other files, the plane files included."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratatoskr.server.metrics import wipe_multiprocess_dir


def test_the_wipe_removes_only_sample_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = ["counter_41.db", "histogram_41.db", "gauge_livesum_41.db", "gauge_max_7.db"]
    kept = ["memory.db", "affect.db", "memory.jti.db", "notes.db", "counter.db", "readme.txt"]
    for name in samples + kept:
        (tmp_path / name).write_bytes(b"x")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    wipe_multiprocess_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)
