"""Which stores the admin commands work on, and opening them as the server does.

Locations (a file path, or a ``postgresql://`` URL) come from flags, else the server's
environment variables, else ``./data``. The memory store records its own embedding
dimension, so an operator rarely passes ``--dim``; a command never creates a plane store it
was only asked to read. A URL is shown with its password masked.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import apsw

from ratatoskr.affect.interface import AffectStore
from ratatoskr.core.errors import BifrostError, Unavailable
from ratatoskr.core.filters import AFFECT, MEMORY, PLANES
from ratatoskr.core.locations import (
    AFFECT_DB_ENV,
    DEFAULT_AFFECT_DB,
    DEFAULT_MEMORY_DB,
    DIM_ENV,
    MAX_DIM,
    MEMORY_DB_ENV,
)
from ratatoskr.memory.admin_sql import stored_dim
from ratatoskr.memory.interface import MemoryStore
from ratatoskr.memory.postgres.schema import stored_dim as pg_stored_dim
from ratatoskr.ops.filters import check_plane
from ratatoskr.ops.locations import describe, is_postgres, ledger_location, open_affect, open_memory
from ratatoskr.postgres.probe import component_version
from ratatoskr.postgres.url import LocationError, check_location
from ratatoskr.sqlite.database import SchemaError

DEFAULT_PATHS = {MEMORY: DEFAULT_MEMORY_DB, AFFECT: DEFAULT_AFFECT_DB}
_ENVS = {MEMORY: MEMORY_DB_ENV, AFFECT: AFFECT_DB_ENV}

PlaneStore = MemoryStore | AffectStore
# What opening or reading a plane file raises; the operator sees the message.
STORE_ERRORS = (SchemaError, ValueError, BifrostError, apsw.Error)


@dataclass(frozen=True)
class Paths:
    """The two plane files, the jti ledger if named, and the dimension if forced;
    ``named``, the planes whose location a flag or an environment variable gave (not the
    default under ``./data``)."""

    memory: str
    affect: str
    jti: str | None = None
    dim: int | None = None
    named: frozenset[str] = frozenset()

    @classmethod
    def resolve(
        cls,
        env: Mapping[str, str],
        *,
        memory: str | None = None,
        affect: str | None = None,
        jti: str | None = None,
        dim: int | None = None,
    ) -> Paths:
        if dim is None and env.get(DIM_ENV):
            try:
                dim = int(env[DIM_ENV])
            except ValueError:
                raise ValueError(f"{DIM_ENV} must be an integer in 1..{MAX_DIM}") from None
        if dim is not None and not 1 <= dim <= MAX_DIM:
            raise ValueError(f"the embedding dimension must be an integer in 1..{MAX_DIM}")
        for flag, given in (("--memory-db", memory), ("--affect-db", affect), ("--jti-db", jti)):
            if given is not None and not given.strip():
                # a script's unset variable: never taken for the files under ./data
                raise ValueError(f"{flag} is empty: name a file or a postgresql:// URL")
        # an empty variable is unset, as the server reads it: the same files it serves
        memory = memory or env.get(MEMORY_DB_ENV)
        affect = affect or env.get(AFFECT_DB_ENV)
        # a URL-like location that is no PostgreSQL URL (a typo such as ``postgress://``)
        # is refused before anything is opened, named by its setting, never quoted: it
        # may hold a password, and it must not be taken for a file path
        for plane, flag, given in (
            (MEMORY, "--memory-db", memory),
            (AFFECT, "--affect-db", affect),
            (None, "--jti-db", jti),
        ):
            if given:
                try:
                    check_location(given)
                except LocationError as exc:
                    where = flag if plane is None else f"{flag} or {_ENVS[plane]}"
                    raise ValueError(f"{where}: {exc}") from None
        named = frozenset(p for p, given in ((MEMORY, memory), (AFFECT, affect)) if given)
        return cls(
            memory or DEFAULT_PATHS[MEMORY], affect or DEFAULT_PATHS[AFFECT], jti, dim, named
        )

    def of(self, plane: str) -> str:
        return self.memory if check_plane(plane) == MEMORY else self.affect

    def shown(self, plane: str) -> str:
        """The plane's location as output may show it (a URL's password masked)."""
        return describe(self.of(plane))

    def jti_files(self) -> list[str]:
        """The named ledger, else the ledger beside each plane file or in its database
        (``ledger_location``), each once."""
        if self.jti is not None:
            if not is_postgres(self.jti) and not os.path.isfile(self.jti):
                # a ledger named and missing is a typo, never "nothing to prune"
                raise ValueError(f"no jti ledger found at {describe(self.jti)} (see --jti-db)")
            return [self.jti]
        return list(dict.fromkeys(ledger_location(self.of(p)) for p in PLANES))


@contextmanager
def _naming(plane: str, path: str) -> Iterator[None]:
    """A file that cannot be opened is named in the message, with its plane: a command
    given both plane files (stats, backup) otherwise says only what is wrong, not where."""
    try:
        yield
    except (SchemaError, apsw.Error) as exc:
        shown = describe(path)
        if shown in str(exc):
            raise
        raise SchemaError(f"the {plane} plane's file {shown}: {exc}") from None


def _stored_dim(location: str) -> int:
    if not is_postgres(location):
        return stored_dim(location)
    found = pg_stored_dim(location)
    if found is None:
        raise SchemaError("the database holds no memory store (no embedding dimension recorded)")
    return found


class Stores:
    """The plane stores one command works on, opened on first use and closed together."""

    def __init__(self, paths: Paths, *, clock: Callable[[], float] = time.time) -> None:
        self.paths = paths
        self.clock = clock
        self._memory: MemoryStore | None = None
        self._affect: AffectStore | None = None

    def exists(self, plane: str) -> bool:
        location = self.paths.of(plane)
        if is_postgres(location):
            return component_version(location, check_plane(plane)) is not None
        return os.path.isfile(location)

    def present(self, *, unreachable: dict[str, str] | None = None) -> list[str]:
        """The planes whose file exists (or whose tables a database holds), in plane order.
        A plane named by a flag or an environment variable that is not there is an error,
        not a plane left out: an erase or a backup must not quietly miss a plane for a
        misspelt path or the wrong database. With ``unreachable``, a database that cannot
        be reached is noted there (plane: reason) and counted in, not raised."""
        present = []
        for plane in PLANES:
            try:
                if self.exists(plane):
                    present.append(plane)
            except Unavailable as exc:
                if unreachable is None:
                    raise
                unreachable[plane] = exc.message  # a check reports it as the plane's problem
                present.append(plane)
        missing = [p for p in PLANES if p in self.paths.named and p not in present]
        if missing:
            named = "; ".join(
                f"{self.paths.shown(p)} (the {p} plane's, named by --{p}-db or {_ENVS[p]})"
                for p in missing
            )
            if all(is_postgres(self.paths.of(p)) for p in missing):
                raise ValueError(f"no {' or '.join(missing)} plane in the database at {named}")
            raise ValueError(f"no database found at {named}")
        return present

    def _path(self, plane: str, create: bool, exists: bool | None = None) -> tuple[str, bool]:
        """The plane's file and whether it exists (``exists``, when the caller asked
        already); a missing file is an error unless ``create``."""
        path = self.paths.of(plane)
        if exists is None:
            exists = self.exists(plane)
        if not exists and not create:
            raise ValueError(f"no {plane} database at {describe(path)} (see --{plane}-db)")
        if not exists and not is_postgres(path):  # as serve does: ./data on a fresh checkout
            try:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            except OSError as exc:
                raise ValueError(
                    f"the directory of {describe(path)} cannot be created ({exc.strerror}; "
                    f"see --{plane}-db)"
                ) from None
        return path, exists

    def memory(self, *, create: bool = False) -> MemoryStore:
        if self._memory is None:
            exists = self.exists(MEMORY)  # asked once: on PostgreSQL, a connection
            if create and not exists and self.paths.dim is None:
                # refused before ``_path`` makes the new file's directory
                raise ValueError(f"a new memory database needs --dim or {DIM_ENV}")
            path, exists = self._path(MEMORY, create, exists)
            with _naming(MEMORY, path):
                # an existing file knows its own dimension: --dim (or the variable, set
                # for another deployment in the operator's shell) only creates one
                dim = _stored_dim(path) if exists else self.paths.dim
                if dim is None:
                    raise ValueError(f"a new memory database needs --dim or {DIM_ENV}")
                # operator commands never search: no mirror to load in the background
                self._memory = open_memory(
                    path, embedding_dim=dim, clock=self.clock, mirror_bytes=0
                )
        return self._memory

    def affect(self, *, create: bool = False) -> AffectStore:
        if self._affect is None:
            path, _ = self._path(AFFECT, create)
            with _naming(AFFECT, path):
                self._affect = open_affect(path, clock=self.clock)
        return self._affect

    def get(self, plane: str, *, create: bool = False) -> PlaneStore:
        """The store of ``plane``; a missing file is an error unless ``create``."""
        if check_plane(plane) == MEMORY:
            return self.memory(create=create)
        return self.affect(create=create)

    def close(self) -> None:
        for store in (self._memory, self._affect):
            if store is not None:
                store.close()
        self._memory = self._affect = None

    def __enter__(self) -> Stores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
