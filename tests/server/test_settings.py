"""Bad settings stop the start with a non-zero exit naming the setting, never the key; with
no settings at all a development key is generated with mode 0600 and only its path printed."""

from __future__ import annotations

import socket
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ratatoskr.cli.serve import dev_key_banner
from ratatoskr.memory.store import open_memory_store
from ratatoskr.server.settings import SettingsError, load_settings
from tests.server.harness import TENANT, Server, call, clean_env, free_port, ok

REPO = Path(__file__).resolve().parents[2]

SHORT_KEY = "zq-short-key-7a"


def _serve(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "RATATOSKR_MEMORY_DB": str(tmp_path / "m.db"),
        "RATATOSKR_AFFECT_DB": str(tmp_path / "a.db"),
        "RATATOSKR_HEIMDALL_KEY": "k" * 32,
        "RATATOSKR_MEMORY_EMBEDDING_DIM": "8",
    }
    return subprocess.run(
        [sys.executable, "-m", "ratatoskr", "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env=clean_env({**base, **env}),
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"RATATOSKR_MEMORY_EMBEDDING_DIM": "0"}, "RATATOSKR_MEMORY_EMBEDDING_DIM"),
        ({"RATATOSKR_MEMORY_EMBEDDING_DIM": "many"}, "RATATOSKR_MEMORY_EMBEDDING_DIM"),
        ({"RATATOSKR_HEIMDALL_KEY": SHORT_KEY}, "RATATOSKR_HEIMDALL_KEY"),
        ({"RATATOSKR_LOG_FORMAT": "xml"}, "RATATOSKR_LOG_FORMAT"),
    ],
)
def test_a_bad_setting_exits_non_zero_naming_it(
    tmp_path: Path, env: dict[str, str], setting: str
) -> None:
    done = _serve(tmp_path, **env)
    assert done.returncode != 0
    assert setting in done.stderr
    assert SHORT_KEY not in done.stderr + done.stdout


def test_an_unwritable_database_path_exits_non_zero_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where a directory should be")
    done = _serve(tmp_path, RATATOSKR_AFFECT_DB=str(blocker / "affect.db"))
    assert done.returncode != 0
    assert "RATATOSKR_AFFECT_DB" in done.stderr


def test_a_size_cap_too_small_for_a_new_file_is_named(tmp_path: Path) -> None:
    """A cap the file cannot be created under stops the start naming the cap, not the file."""
    done = _serve(
        tmp_path, RATATOSKR_SQLITE_MAX_DB_BYTES=str(1 << 20), RATATOSKR_MEMORY_EMBEDDING_DIM="768"
    )
    assert done.returncode != 0
    assert "RATATOSKR_SQLITE_MAX_DB_BYTES: 1,048,576 bytes is too small" in done.stderr
    assert "cannot be opened as a database" not in done.stderr
    assert _serve(tmp_path, RATATOSKR_SQLITE_MAX_DB_BYTES=str(1 << 20)).returncode != 0


@pytest.mark.parametrize("cap", [2 << 20, 4 << 20])
def test_a_size_cap_the_first_chunk_would_pass_is_refused_and_no_file_is_left(
    tmp_path: Path, cap: int
) -> None:
    """A new memory file fits under 2 and 4 MiB, but its first chunk at dimension 768 takes
    it to 4.5 MiB (sqlite-vec allocates a block of 1,024 vectors): such a cap would start a
    server that can store nothing. The refused start removes the file it made."""
    done = _serve(
        tmp_path, RATATOSKR_SQLITE_MAX_DB_BYTES=str(cap), RATATOSKR_MEMORY_EMBEDDING_DIM="768"
    )
    assert done.returncode == 2
    assert f"RATATOSKR_SQLITE_MAX_DB_BYTES: {cap:,} bytes is too small" in done.stderr
    assert "first chunk at dimension 768" in done.stderr
    assert not list(tmp_path.glob("m.db*"))
    cap5 = {"RATATOSKR_SQLITE_MAX_DB_BYTES": str(5 << 20), "RATATOSKR_MEMORY_EMBEDDING_DIM": "768"}
    server = Server(tmp_path, env=cap5).start()
    try:  # the size it names is enough: the first chunk is stored
        chunk = {"id": "c1", "embedding": [1.0] + [0.0] * 767, "scope": TENANT}
        args = {"records": [chunk], "idempotency_key": "k"}
        assert ok(call(server.url, "memory", "upsert_many", args)) == {
            "upserted": 1,
            "replayed": False,
        }
    finally:
        server.kill()


def test_a_refused_start_leaves_no_half_made_file(tmp_path: Path) -> None:
    done = _serve(
        tmp_path, RATATOSKR_SQLITE_MAX_DB_BYTES=str(1 << 20), RATATOSKR_MEMORY_EMBEDDING_DIM="768"
    )
    assert done.returncode == 2 and "1,048,576 bytes is too small" in done.stderr
    assert not list(tmp_path.glob("m.db*"))


def test_a_bad_mirror_budget_is_named_as_itself(tmp_path: Path) -> None:
    done = _serve(tmp_path, RATATOSKR_MEMORY_MIRROR_BYTES="-1")
    assert done.returncode == 2
    assert "ratatoskr serve: RATATOSKR_MEMORY_MIRROR_BYTES must be >= 0" in done.stderr
    assert "RATATOSKR_MEMORY_DB" not in done.stderr
    assert not list(tmp_path.glob("*.db"))


def test_a_database_of_another_dimension_names_the_dimension(tmp_path: Path) -> None:
    open_memory_store(str(tmp_path / "m.db"), embedding_dim=4).close()
    done = _serve(tmp_path)
    assert done.returncode != 0
    assert "RATATOSKR_MEMORY_EMBEDDING_DIM" in done.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RATATOSKR_PORT", "70000"),
        ("RATATOSKR_WORKERS", "0"),
        ("RATATOSKR_MAX_BODY_BYTES", "-1"),
        ("RATATOSKR_MAX_TOKEN_TTL", "soon"),
        ("RATATOSKR_ALLOW_UNSCOPED_TOKENS", "perhaps"),
        ("RATATOSKR_LOG_LEVEL", "loud"),
        ("RATATOSKR_SQLITE_SYNCHRONOUS", "OFF"),
        ("RATATOSKR_HEIMDALL_KEY_FILE", "/nonexistent/key"),
        ("RATATOSKR_AUTH_TARPIT_MS", "-1"),
        ("RATATOSKR_AUTH_TARPIT_MS", "10001"),
        ("RATATOSKR_AUTH_TARPIT_MAX", "0"),
        ("RATATOSKR_AUTH_TARPIT_MAX", "lots"),
        ("RATATOSKR_STORE_THREADS", "0"),
        ("RATATOSKR_STORE_THREADS", "257"),
    ],
)
def test_load_settings_names_each_bad_setting(tmp_path: Path, name: str, value: str) -> None:
    env = {"RATATOSKR_HEIMDALL_KEY": "k" * 32, name: value}
    if name == "RATATOSKR_HEIMDALL_KEY_FILE":
        env.pop("RATATOSKR_HEIMDALL_KEY")
    with pytest.raises(SettingsError, match=name):
        load_settings(env, cwd=tmp_path)


def test_the_tarpit_defaults_and_its_off_switch(tmp_path: Path) -> None:
    key = {"RATATOSKR_HEIMDALL_KEY": "k" * 32}
    defaults = load_settings(key, cwd=tmp_path)
    assert (defaults.auth_tarpit_ms, defaults.auth_tarpit_max) == (250, 512)
    off = load_settings({**key, "RATATOSKR_AUTH_TARPIT_MS": "0"}, cwd=tmp_path)
    assert off.auth_tarpit_ms == 0


def test_commits_are_durable_by_default_and_normal_is_a_choice(tmp_path: Path) -> None:
    key = {"RATATOSKR_HEIMDALL_KEY": "k" * 32}
    assert load_settings(key, cwd=tmp_path).database.synchronous == "FULL"
    chosen = load_settings({**key, "RATATOSKR_SQLITE_SYNCHRONOUS": "normal"}, cwd=tmp_path)
    assert chosen.database.synchronous == "NORMAL"


def test_defaults_generate_a_private_key_and_print_only_its_path(tmp_path: Path) -> None:
    server = Server(tmp_path, settings=False)
    try:
        server.start()
        key_file = tmp_path / "data" / "heimdall.key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        assert len(bytes.fromhex(key)) >= 32
        first_line = server.stderr_path.read_text().splitlines()[0]
        assert str(key_file) in first_line
        # stdout is JSON lines only, for a log shipper
        stdout = server.stdout_path.read_text().splitlines()
        assert stdout and all(line.startswith("{") for line in stdout)
        assert f"serving {server.url} with 2 workers" in server.stdout_path.read_text()
        assert "ratatoskr call" in server.output()
        # the example call names this server, which is not on the default port
        assert f"call memory health --scope tenant=acme --url {server.url}" in server.output()
        assert f"ratatoskr: serving {server.url} with 2 workers" in server.output()
        assert key not in server.output()
        assert (tmp_path / "data" / "memory.db").exists()
        assert (tmp_path / "data" / "affect.db").exists()
        assert httpx.get(server.url + "/readyz").status_code == 200
        assert server.terminate() == 0
    finally:
        server.kill()
    # a second start reuses the key rather than replacing it
    again = load_settings({}, cwd=tmp_path, generate_dev_key=True)
    assert again.dev_key_file == key_file and not again.dev_key_generated
    assert key_file.read_text().strip() == key


def test_a_development_key_that_cannot_be_made_names_the_setting_to_give(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file where the key's directory would go")
    env = {
        "RATATOSKR_MEMORY_DB": str(tmp_path / "m.db"),
        "RATATOSKR_AFFECT_DB": str(tmp_path / "a.db"),
    }
    with pytest.raises(SettingsError) as caught:
        load_settings(env, cwd=tmp_path, generate_dev_key=True)
    assert "development key" in str(caught.value) and "cannot be created" in str(caught.value)
    assert "RATATOSKR_HEIMDALL_KEY_FILE" in str(caught.value)


GUNICORN = [sys.executable, "-m", "gunicorn", "-c", str(REPO / "deploy" / "gunicorn.conf.py")]


@pytest.mark.parametrize("command", ["serve", "bare gunicorn"])
def test_a_port_another_server_listens_on_is_refused(tmp_path: Path, command: str) -> None:
    """Workers bind with SO_REUSEPORT, which would let a second server share the port (and
    half its connections) with the first: serve, and gunicorn on the deploy config, refuse
    to start instead."""
    port = free_port()
    env = {
        "RATATOSKR_MEMORY_DB": str(tmp_path / "m.db"),
        "RATATOSKR_AFFECT_DB": str(tmp_path / "a.db"),
        "RATATOSKR_HEIMDALL_KEY": "k" * 32,
        "RATATOSKR_PORT": str(port),
    }
    argv = [sys.executable, "-m", "ratatoskr", "serve"] if command == "serve" else GUNICORN
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", port))
        other.listen()
        done = subprocess.run(
            argv, cwd=tmp_path, env=clean_env(env), capture_output=True, text=True, timeout=30
        )
    assert done.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in done.stdout + done.stderr
    # each names the way its own command line picks another port
    another = "--port picks another" if command == "serve" else "gunicorn's -b picks another"
    assert another in done.stdout + done.stderr


@pytest.mark.parametrize("flag", ["--port", "--workers"])
def test_a_flag_that_is_no_number_is_named_without_internals(tmp_path: Path, flag: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ratatoskr", "serve", flag, "abc"],
        cwd=tmp_path,
        env=clean_env({"RATATOSKR_HEIMDALL_KEY": "k" * 32}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"argument {flag}: " in done.stderr and "1.." in done.stderr
    assert "invalid" not in done.stderr and "_port" not in done.stderr


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [
        ("RATATOSKR_WORKERS", "two", "RATATOSKR_WORKERS must be an integer"),
        ("RATATOSKR_HOST", "no-such-host.invalid", "RATATOSKR_HOST: no-such-host.invalid"),
        ("PROMETHEUS_MULTIPROC_DIR", "/proc/no/such/dir", "PROMETHEUS_MULTIPROC_DIR: "),
    ],
)
def test_a_bad_start_setting_is_named_without_a_traceback(
    tmp_path: Path, setting: str, value: str, named: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ratatoskr", "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env=clean_env({"RATATOSKR_HEIMDALL_KEY": "k" * 32, setting: value}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and "Traceback" not in done.stderr


def test_replication_settings_and_what_they_change(tmp_path: Path) -> None:
    key = {"RATATOSKR_HEIMDALL_KEY": "k" * 32}
    off = load_settings(key, cwd=tmp_path)
    assert off.replica is None and off.database.app_checkpoints
    assert off.database.replica_max_lag is None
    url = "s3://backups/ratatoskr?endpoint=http%3A%2F%2F127.0.0.1%3A9000"
    on = load_settings({**key, "RATATOSKR_REPLICA_URL": url}, cwd=tmp_path)
    assert on.replica is not None and on.replica.url == url
    assert (on.replica.max_lag, on.replica.sync_interval_ms) == (60, 2000)
    assert not on.database.app_checkpoints and on.database.replica_max_lag == 60
    assert url not in repr(on)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RATATOSKR_REPLICA_URL", "ftp://backups/secret-path-31"),
        ("RATATOSKR_REPLICA_URL", "file://relative/secret-path-31"),
        ("RATATOSKR_REPLICA_URL", "sftp://u:pw@host:notaport/secret-path-31"),
        ("RATATOSKR_REPLICA_URL", "webdav://host:99999/secret-path-31"),
        ("RATATOSKR_REPLICA_URL", "sftp://u:p@[::1/secret-path-31"),
        ("RATATOSKR_REPLICA_MAX_LAG", "0"),
        ("RATATOSKR_REPLICA_SYNC_INTERVAL_MS", "10"),
        ("RATATOSKR_REPLICA_WAL_MAX_MB", "0"),
        ("RATATOSKR_REPLICA_WAL_MAX_MB", "65537"),
        ("RATATOSKR_REPLICA_WAL_MAX_MB", "1.5"),
    ],
)
def test_bad_replication_settings_are_named_and_never_quoted(
    tmp_path: Path, name: str, value: str
) -> None:
    env = {"RATATOSKR_HEIMDALL_KEY": "k" * 32, "RATATOSKR_REPLICA_URL": "file:///backups/r"}
    with pytest.raises(SettingsError, match=name) as caught:
        load_settings({**env, name: value}, cwd=tmp_path)
    assert "secret-path-31" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RATATOSKR_REPLICA_MAX_LAG", "soon"),
        ("RATATOSKR_REPLICA_SYNC_INTERVAL_MS", "10"),
        ("RATATOSKR_REPLICA_WAL_MAX_MB", "-1"),
    ],
)
def test_a_bad_replication_setting_is_refused_before_replication_is_on(
    tmp_path: Path, name: str, value: str
) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings({"RATATOSKR_HEIMDALL_KEY": "k" * 32, name: value}, cwd=tmp_path)


def test_serve_refuses_a_bad_replica_url_naming_the_setting(tmp_path: Path) -> None:
    done = _serve(tmp_path, RATATOSKR_REPLICA_URL="gopher://host/secret-path-31")
    assert done.returncode == 2
    assert "RATATOSKR_REPLICA_URL" in done.stderr
    assert "secret-path-31" not in done.stderr + done.stdout


def test_the_key_banner_says_the_key_files_mode_and_warns_when_others_can_read_it(
    tmp_path: Path,
) -> None:
    key_file = tmp_path / "heimdall.key"
    key_file.write_text("ab" * 32)
    key_file.chmod(0o600)
    banner = dev_key_banner(str(key_file), generated=False)
    assert "(mode 0600;" in banner and "warning" not in banner
    key_file.chmod(0o644)
    banner = dev_key_banner(str(key_file), generated=False)
    assert "(mode 0644;" in banner
    assert f"warning: other users can read the key: chmod 600 {key_file}" in banner
    assert "ab" * 32 not in banner
