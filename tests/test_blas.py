"""numpy's BLAS on one thread in the processes ratatoskr starts (``ratatoskr.core.blas``)."""

from __future__ import annotations

import os
import subprocess
import sys

from ratatoskr.core.blas import THREAD_VARIABLES, single_threaded

COUNT_THREADS = "import numpy, os; print(len(os.listdir('/proc/self/task')))"


def _threads_after(entry: str) -> int:
    """The threads of a fresh interpreter that imports ``entry``, then numpy."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    code = f"import {entry}; {COUNT_THREADS}" if entry else COUNT_THREADS
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True)
    return int(out.stdout)


def test_the_command_line_and_gunicorn_config_load_blas_without_helper_threads() -> None:
    assert _threads_after("ratatoskr.cli") == 1
    assert _threads_after("ratatoskr.server.gunicorn_conf") == 1
    if (os.cpu_count() or 1) > 1:  # without them, OpenBLAS starts a helper per core
        assert _threads_after("") > 1


def test_a_setting_the_operator_made_is_kept() -> None:
    environ = {"OPENBLAS_NUM_THREADS": "4"}
    single_threaded(environ)
    assert environ["OPENBLAS_NUM_THREADS"] == "4"
    assert environ["OMP_NUM_THREADS"] == "1" and environ["MKL_NUM_THREADS"] == "1"
