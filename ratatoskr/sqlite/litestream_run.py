"""Running the Litestream binary without exposing the replica URL's credentials.

The URL may carry a password (``sftp://user:pass@host/...``), so it never goes on a command
line, where ``ps`` shows it to every user of the host. Whoever runs Litestream (the
replication supervisor, ``admin restore``) writes a config naming the URL into a private
directory (mode 0700, the file 0600) and hands Litestream that path; the directory's name
carries the owner's pid, so a later run removes what a killed one left
(``sweep_stale_workdirs``). Litestream gets the environment without the server's own
settings (the signing key above all).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from typing import Any

from ratatoskr.sqlite.replica import CREDENTIAL_ENV

WORKDIR_PREFIX = "ratatoskr-litestream-"
# Litestream's words when a replica holds nothing to restore from (or nothing before a time)
NO_BACKUP = "no matching backup files available"
CONFIG_NAME = "litestream.yml"
UNSET_IF_EMPTY = frozenset({*CREDENTIAL_ENV, "GOOGLE_APPLICATION_CREDENTIALS"})
# the variables Litestream is not given: the server's own (its key above all)
WITHHELD_PREFIXES = ("RATATOSKR_", "PROMETHEUS_")


def private_workdir() -> str:
    """A new directory only this user can read, named for this process."""
    sweep_stale_workdirs()
    return tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")


def write_config(workdir: str, config: dict[str, Any]) -> str:
    """``config`` (JSON, which YAML reads) as ``workdir``'s 0600 config file: its path."""
    path = os.path.join(workdir, CONFIG_NAME)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(config, handle)
    return path


def litestream_env() -> dict[str, str]:
    """This process's environment as Litestream gets it: without ratatoskr's own settings
    and without empty credential variables (which Litestream would take as set; compose
    passes one it was not given as empty)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(WITHHELD_PREFIXES) and not (k in UNSET_IF_EMPTY and not v)
    }


def sweep_stale_workdirs() -> None:
    """Remove the private directories of processes that are gone (a SIGKILL leaves its
    config, which may hold the URL's credentials): ``ratatoskr-litestream-<pid>-*`` of this
    user whose process no longer exists."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        if not name.startswith(WORKDIR_PREFIX):
            continue
        pid = name[len(WORKDIR_PREFIX) :].partition("-")[0]
        path = os.path.join(root, name)
        with contextlib.suppress(OSError):
            if pid.isdigit() and os.stat(path).st_uid == os.getuid() and not pid_alive(int(pid)):
                shutil.rmtree(path, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (on this host)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
