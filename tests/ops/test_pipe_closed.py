"""An admin command whose reader goes away (``| head``) stops quietly, as ``cat`` does:
exit 141 (128 + SIGPIPE) and nothing on stderr, rather than a "Broken pipe" error."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from tests.ops.conftest import Files


def test_a_closed_pipe_ends_the_command_quietly(filled: Files) -> None:
    ids = [f"c{i:04d}" for i in range(1, 121)]
    command = [sys.executable, "-m", "ratatoskr", "admin", "get", "memory", *ids, "--full"]
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)  # less than the output: the writer must wait
    with subprocess.Popen(command, stdout=write, stderr=subprocess.PIPE, env=os.environ) as proc:
        os.close(write)
        with os.fdopen(read, "rb") as reader:
            assert reader.read(100)  # the first lines, then the reader goes away
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141, err
    assert err == b""
