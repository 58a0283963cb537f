"""The keys shared with Heimdall: a keyring for rotation, and where the keys come from.

One loader serves the server and the developer CLI, so both read the same settings the
same way. Errors name the setting, never the key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import orjson

from ratatoskr.core.errors import InvalidToken

MIN_KEY_BYTES = 32  # RFC 7518 section 3.2: an HS256 key is at least the hash size
KEY_ENV = "RATATOSKR_HEIMDALL_KEY"
KEY_FILE_ENV = "RATATOSKR_HEIMDALL_KEY_FILE"
KEYS_FILE_ENV = "RATATOSKR_HEIMDALL_KEYS_FILE"
DEFAULT_KEY_FILE = Path("data") / "heimdall.key"


def _check_key(key: bytes, setting: str) -> bytes:
    if not isinstance(key, bytes | bytearray):
        raise ValueError(f"{setting} must be bytes")
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(
            f"{setting} is shorter than {MIN_KEY_BYTES} bytes; HS256 needs a key of at least "
            f"{MIN_KEY_BYTES} bytes (RFC 7518 section 3.2)"
        )
    return bytes(key)


class Keyring:
    """Keys by ``kid`` plus a default for tokens without one; rotation adds a kid."""

    def __init__(
        self,
        default: bytes | None = None,
        keys: Mapping[str, bytes] | None = None,
        *,
        setting: str = KEY_ENV,
    ) -> None:
        self._default = None if default is None else _check_key(default, setting)
        self._keys = {
            kid: _check_key(key, f"{setting} (kid {kid})") for kid, key in (keys or {}).items()
        }
        if self._default is None and not self._keys:
            raise ValueError(f"{setting} holds no key")

    @property
    def kids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    @property
    def has_default(self) -> bool:
        return self._default is not None

    def key_for(self, kid: str | None) -> bytes:
        """The key a token names; an unknown kid, or no kid without a default, is refused."""
        if kid is None:
            if self._default is None:
                raise InvalidToken("the token names no kid and no default key is configured")
            return self._default
        key = self._keys.get(kid)
        if key is None:
            raise InvalidToken("the token names an unknown kid")
        return key

    def __repr__(self) -> str:  # never show a key
        return f"Keyring(default={self.has_default}, kids={list(self._keys)})"


def _read_key_file(path: str, setting: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError:
        raise ValueError(f"{setting} names a file that cannot be read") from None
    return data.strip()


def _read_keys_file(path: str) -> dict[str, bytes]:
    try:
        parsed = orjson.loads(Path(path).read_bytes())
    except OSError:
        raise ValueError(f"{KEYS_FILE_ENV} names a file that cannot be read") from None
    except orjson.JSONDecodeError:
        raise ValueError(f"{KEYS_FILE_ENV} is not a JSON object from kid to key") from None
    if not isinstance(parsed, dict) or not all(
        isinstance(kid, str) and kid and isinstance(key, str) for kid, key in parsed.items()
    ):
        raise ValueError(f"{KEYS_FILE_ENV} is not a JSON object from kid to key")
    if not parsed:  # a key file emptied by mistake must not fall back to a development key
        raise ValueError(f"{KEYS_FILE_ENV} names a file that holds no key")
    return {kid: key.encode() for kid, key in parsed.items()}


def keyring_from_env(env: Mapping[str, str] | None = None) -> Keyring | None:
    """The keyring the settings describe, or ``None`` when none of them is set.

    ``RATATOSKR_HEIMDALL_KEY`` (the key itself) or ``RATATOSKR_HEIMDALL_KEY_FILE`` (a file
    holding it) give the default key; ``RATATOSKR_HEIMDALL_KEYS_FILE`` (JSON ``{kid: key}``)
    gives the keys selected by a token's ``kid`` header.
    """
    env = os.environ if env is None else env
    for name in (KEY_ENV, KEY_FILE_ENV, KEYS_FILE_ENV):
        if name in env and not env[name].strip():
            # a secret that failed to arrive (an empty template value) is no "unset": it
            # must not start the server on a development key
            raise ValueError(f"{name} is set but empty: give it a value or unset it")
    default: bytes | None = None
    setting = KEY_ENV
    if env.get(KEY_ENV):
        default = env[KEY_ENV].encode()
    elif env.get(KEY_FILE_ENV):
        setting = KEY_FILE_ENV
        default = _read_key_file(env[KEY_FILE_ENV], KEY_FILE_ENV)
    keys = _read_keys_file(env[KEYS_FILE_ENV]) if env.get(KEYS_FILE_ENV) else {}
    if default is None and not keys:
        return None
    if default is not None:
        _check_key(default, setting)
    for kid, key in keys.items():
        _check_key(key, f"{KEYS_FILE_ENV} (kid {kid})")
    return Keyring(default, keys, setting=setting)


def load_keyring(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Keyring:
    """The keyring of the settings, else the key in ``./data/heimdall.key``.

    The server and the CLI both call this, so a developer's token always verifies against
    the server started from the same directory.
    """
    ring = keyring_from_env(env)
    if ring is not None:
        return ring
    path = (cwd or Path.cwd()) / DEFAULT_KEY_FILE
    if not path.is_file():
        raise ValueError(
            f"no Heimdall key: set {KEY_ENV}, {KEY_FILE_ENV} or {KEYS_FILE_ENV}, "
            f"or create {DEFAULT_KEY_FILE}"
        )
    return Keyring(_read_key_file(str(path), str(DEFAULT_KEY_FILE)), setting=str(DEFAULT_KEY_FILE))
