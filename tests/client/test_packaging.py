"""The built package carries ``ratatoskr/py.typed``, so a user's type checker reads the
client's hints (PEP 561) instead of refusing the import as untyped."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_built_package_is_marked_typed(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(
        ROOT / "ratatoskr",
        tmp_path / "ratatoskr",
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.h"),
    )
    built = tmp_path / "built"
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(built)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert (built / "ratatoskr" / "client" / "sync.py").is_file()
    assert (built / "ratatoskr" / "py.typed").is_file()
