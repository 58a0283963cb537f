"""docs/client.md against the client: every class its Errors section names is exported
from ``ratatoskr.client``, and every example runs as written, twice."""

from __future__ import annotations

import builtins
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

import ratatoskr.client as client_module
from tests.client.conftest import passed_on
from tests.server.harness import KEY, Server, clean_env

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def test_every_class_the_doc_names_is_exported() -> None:
    errors = DOC.read_text().split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([A-Z][a-z]+(?:[A-Z][a-z]*)+)`", errors))
    ours = {name for name in named if not hasattr(builtins, name)}  # not TypeError, ...
    assert "MayHaveRun" in ours and "RevisionMismatch" in ours
    missing = sorted(name for name in ours if name not in client_module.__all__)
    assert missing == []
    assert isinstance(client_module.MayHaveRun("x"), OSError)


# -- every example of the doc, run as a reader runs it --------------------------------------


def python_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)


def shell_examples() -> list[list[str]]:
    found = re.findall(r"```console\n(.*?)```", DOC.read_text(), re.DOTALL)
    lines = [line[2:] for block in found for line in block.splitlines() if line.startswith("$ ")]
    return [shlex.split(line) for line in lines]


@pytest.fixture(scope="module")
def doc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of the examples' own: they write as the doc's tenant ``acme``, whose ``c1``
    other tests (the README's first run) write too."""
    served = Server(tmp_path_factory.mktemp("doc-server"), workers=1, env={**passed_on()})
    try:
        yield served.start()
        assert served.terminate() == 0
    finally:
        served.kill()


def run_example(server: Server, cwd: Path, code: str) -> list[str]:
    env = clean_env({"RATATOSKR_HEIMDALL_KEY": KEY, "RATATOSKR_URL": server.url})
    ran = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-"],
        input=code,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.splitlines()


def test_every_example_runs_and_runs_again(doc_server: Server, tmp_path: Path) -> None:
    """Each Python example of the doc, in order, twice: the first stores ``c1`` and finds
    it, and says so again on a second run (no ``IdempotencyConflict``); then the shell's."""
    first, concurrent, stale = python_examples()
    for _ in range(2):
        assert run_example(doc_server, tmp_path, first) == ["c1 1.0 likes tea"]
    assert run_example(doc_server, tmp_path, concurrent) == ["[1, 1, 1, 1]"]
    for _ in range(2):
        said = run_example(doc_server, tmp_path, stale)
        assert said == ["[{'id': 'c1', 'expected': 0, 'actual': 1}]"]
    env = clean_env({"RATATOSKR_HEIMDALL_KEY": KEY, "RATATOSKR_URL": doc_server.url})
    (command,) = shell_examples()
    assert command[0] == "ratatoskr"
    got = subprocess.run(
        [sys.executable, "-m", "ratatoskr", *command[1:]], capture_output=True, env=env, timeout=60
    )
    assert got.returncode == 0, got.stderr
    assert orjson.loads(got.stdout)["result"]["distillate"] == "likes tea"
