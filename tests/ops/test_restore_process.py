"""``admin restore`` as a process: what ``ps`` shows of it and how it ends when stopped.

Litestream restores from an sftp replica whose host accepts the connection and never
answers, so the restore is under way for as long as the test needs it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ratatoskr.sqlite.litestream_run import WORKDIR_PREFIX
from tests.ops.conftest import Files
from tests.server.harness import clean_env, poll

PASSWORD = "pw-9d2e71"


@pytest.fixture
def silent_host() -> Iterator[int]:
    """A TCP port that takes connections into its backlog and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield int(listener.getsockname()[1])


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(p) for p in text]
    return found


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def exec_done(pid: int) -> bool:
    """True once the child runs litestream (or has ended, so its line is final)."""
    try:
        shown = command_line(pid)
    except FileNotFoundError:
        return True
    return "litestream" in shown or not alive(pid)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_restore_keeps_the_url_off_the_command_line_and_sigterm_ends_litestream_too(
    files: Files, silent_host: int
) -> None:
    for path in list(files.dir.iterdir()):
        path.unlink()
    url = f"sftp://backup:{PASSWORD}@127.0.0.1:{silent_host}/srv/replica"
    env = clean_env(
        {
            "RATATOSKR_MEMORY_DB": str(files.memory),
            "RATATOSKR_AFFECT_DB": str(files.affect),
            "RATATOSKR_REPLICA_URL": url,
        }
    )
    restore = subprocess.Popen(
        [sys.executable, "-m", "ratatoskr", "admin", "restore"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        litestream = poll(
            lambda: next(iter(children(restore.pid)), None), 30, "litestream to start"
        )
        # Between fork and the end of exec the child's command line reads empty or as
        # Python's; wait for the one it runs with.
        shown = poll(
            lambda: command_line(litestream) if exec_done(litestream) else None,
            30,
            "litestream's command line",
        )
        assert "litestream" in shown and "restore" in shown
        assert PASSWORD not in shown and "sftp://" not in shown
        mine = [
            d
            for d in os.listdir(tempfile.gettempdir())
            if d.startswith(f"{WORKDIR_PREFIX}{restore.pid}-")
        ]
        assert len(mine) == 1
        workdir = Path(tempfile.gettempdir(), mine[0])
        assert workdir.stat().st_mode & 0o077 == 0
        restore.send_signal(signal.SIGTERM)
        _, err = restore.communicate(timeout=30)
        assert restore.returncode == 143
        assert PASSWORD not in err and "Traceback" not in err
        poll(lambda: True if not alive(litestream) else None, 10, "litestream to end")
        assert not workdir.exists()  # the config with the password is gone
        assert [p.name for p in files.dir.iterdir()] == []  # nothing half-restored
    finally:
        if restore.poll() is None:
            restore.kill()
            restore.wait()
