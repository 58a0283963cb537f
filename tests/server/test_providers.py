"""The single-plane dev servers (``ratatoskr-memory-provider``, ``ratatoskr-affect-provider``):
their command line, and the one jti ledger they share with ``ratatoskr serve``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.server.harness import (
    TENANT,
    Server,
    clean_env,
    envelope,
    free_port,
    poll,
    post,
    token,
)


def _script(plane: str) -> str:
    return str(Path(sys.executable).parent / f"ratatoskr-{plane}-provider")


def test_help_prints_the_usage_and_starts_nothing(tmp_path: Path) -> None:
    for plane in ("memory", "affect"):
        ran = subprocess.run(
            [_script(plane), "--help"],
            cwd=tmp_path,
            env=clean_env({}),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ran.returncode == 0 and f"usage: ratatoskr-{plane}-provider" in ran.stdout
        wrong = subprocess.run(
            [_script(plane), "--port", "1"],
            cwd=tmp_path,
            env=clean_env({}),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert wrong.returncode == 2 and "takes no arguments" in wrong.stderr
    assert list(tmp_path.iterdir()) == []  # no ./data, no key, no database


def test_a_token_used_on_the_affect_provider_is_refused_by_serve_over_the_same_files(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path).start()
    port = free_port()
    env = {**server.env, "RATATOSKR_PORT": str(port)}
    env.pop("PROMETHEUS_MULTIPROC_DIR")
    with open(tmp_path / "provider.out", "wb") as out:
        provider = subprocess.Popen(
            [_script("affect")], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        url = f"http://127.0.0.1:{port}"

        def up() -> bool | None:
            assert provider.poll() is None, (tmp_path / "provider.out").read_text()
            try:
                return httpx.get(url + "/healthz", timeout=2).status_code == 200 or None
            except httpx.HTTPError:
                return None

        poll(up, 30, "the affect provider")
        body = envelope(
            "put_many",
            {"records": [{"id": "s1", "scope": TENANT, "mood": "calm"}], "idempotency_key": "k1"},
        )
        bearer = token(body, "affect", "put_many")
        first = post(url, "/bifrost/affect-call", body, bearer)
        assert first.status_code == 200, first.text
        again = post(server.url, "/bifrost/affect-call", body, bearer)
        assert again.status_code == 401 and again.json()["error"]["code"] == "auth.token_replayed"
        assert (tmp_path / "data" / "memory.jti.db").is_file()
        assert not (tmp_path / "data" / "affect.jti.db").exists()
    finally:
        provider.terminate()
        provider.wait(30)
        server.terminate()


def test_on_another_port_the_example_call_names_the_url(tmp_path: Path) -> None:
    """The start line's example call goes to the provider's own port, not to 8000 (where
    another server may answer)."""
    port = free_port()
    env = clean_env({"RATATOSKR_PORT": str(port), "RATATOSKR_MEMORY_EMBEDDING_DIM": "8"})
    proc = subprocess.Popen(
        [_script("memory")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def up() -> bool | None:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200 or None
        except httpx.HTTPError:
            return None

    try:
        poll(up, 60, "the provider up")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    hint = [line for line in err.splitlines() if "try, in a second shell" in line]
    assert len(hint) == 1 and hint[0].endswith(f"--url http://127.0.0.1:{port}"), err
