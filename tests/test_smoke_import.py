"""The package imports and the CLI answers --help (the skeleton every entry point hangs on)."""

import subprocess
import sys


def test_python_dash_m_ratatoskr_prints_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ratatoskr", "--help"], capture_output=True, text=True, check=True
    )
    assert "ratatoskr" in out.stdout
