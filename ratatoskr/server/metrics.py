"""Prometheus metrics: the wire's call observer plus store gauges refreshed at each scrape.

Under gunicorn every worker writes its samples to ``PROMETHEUS_MULTIPROC_DIR`` (set by
``ratatoskr serve`` before prometheus_client is first imported: the value class is chosen at
import) and a scrape, whichever worker answers it, sums the files of all workers. Without
that variable (tests, plain uvicorn) the metrics live in this object's own registry.

Labels are bounded sets chosen by the server (plane, verb the plane knows, outcome code,
failure reason, record kind), never ids, actors or content.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as prom_multiprocess
from prometheus_client import values as prom_values

from ratatoskr.core.admin import AdminStore
from ratatoskr.wire.calllog import CallRecord
from ratatoskr.wire.plane import Plane

N = TypeVar("N", int, float)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
HEALTH_VALUES = {"ok": 2, "degraded": 1, "down": 0}
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


def multiprocess_dir() -> str | None:
    path = os.environ.get(MULTIPROC_ENV)
    return path if path else None


def values_are_multiprocess() -> bool:
    """Whether samples go to files: decided when prometheus_client was first imported, so a
    variable set later (after the import) must not switch the exposition to the files."""
    return getattr(prom_values.ValueClass, "__name__", "") == "MmapedValue"


class Metrics:
    """The server's metrics; a ``CallObserver`` for the wire."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "ratatoskr_requests",
            "Bifrost calls answered, by plane, verb and wire outcome code",
            ["plane", "verb", "code"],
            registry=r,
        )
        self.duration = Histogram(
            "ratatoskr_request_duration_seconds",
            "Time to answer a Bifrost call",
            ["plane", "verb"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.auth_failures = Counter(
            "ratatoskr_auth_failures",
            "Calls refused by token checks, by reason",
            ["reason"],
            registry=r,
        )
        self.replays = Counter(
            "ratatoskr_idempotent_replays",
            "Writes answered from the idempotency cache",
            ["plane", "verb"],
            registry=r,
        )
        self.records = Gauge(
            "ratatoskr_store_records",
            "Records stored, by plane and kind (refreshed at each scrape)",
            ["plane", "kind"],
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.db_bytes = Gauge(
            "ratatoskr_db_bytes",
            "Size of a plane's SQLite file and its WAL (PostgreSQL: its tables and indexes)",
            ["plane"],
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.db_max_bytes = Gauge(
            "ratatoskr_db_max_bytes",
            "A plane file's size cap (RATATOSKR_SQLITE_MAX_DB_BYTES); absent when uncapped",
            ["plane"],
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.db_capped_bytes = Gauge(
            "ratatoskr_db_capped_bytes",
            "What the size cap limits: a plane file's pages in use, without its WAL; "
            "absent when uncapped",
            ["plane"],
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.health = Gauge(
            "ratatoskr_plane_health",
            "Plane health: 2 ok, 1 degraded, 0 down",
            ["plane"],
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.replica_lag = Gauge(
            "ratatoskr_replication_lag_seconds",
            "Seconds since Litestream last brought a plane's replica up to date (+Inf: no "
            "supervisor reports it); only while RATATOSKR_REPLICA_URL is set",
            ["plane"],
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.pg_pool = Gauge(
            "ratatoskr_pg_pool_connections",
            "PostgreSQL connections of a plane's pools, by state (open, idle, waiting: callers "
            "waiting for one), summed over the workers",
            ["plane", "state"],
            multiprocess_mode="livesum",
            registry=r,
        )
        self.pg_retries = Gauge(
            "ratatoskr_pg_transaction_retries",
            "Transactions retried after a serialization failure or deadlock since the workers "
            "started, summed over the workers",
            ["plane"],
            multiprocess_mode="livesum",
            registry=r,
        )
        self._known_verbs: dict[str, frozenset[str]] = {"handshake": frozenset({"handshake"})}

    def know_planes(self, planes: Iterable[Plane]) -> None:
        """The verbs each plane serves: only those become label values."""
        for plane in planes:
            self._known_verbs[plane.name] = frozenset(plane.table.verb_names)

    def know_plane_names(self, names: Iterable[str]) -> None:
        """Planes not open yet: their calls are counted under their name (verb unknown)."""
        for name in names:
            self._known_verbs.setdefault(name, frozenset())

    def mark_down(self, names: Iterable[str]) -> None:
        """The health gauge of planes whose stores are not open: down."""
        for name in names:
            self.health.labels(name).set(HEALTH_VALUES["down"])

    # -- the wire's observer --------------------------------------------------------------

    def call_finished(self, record: CallRecord, duration_seconds: float) -> None:
        plane = "handshake" if record.plane == "*" else record.plane
        verbs = self._known_verbs.get(plane, frozenset())
        if plane not in self._known_verbs:
            plane = "unknown"
        verb = record.verb if record.verb in verbs else "unknown"
        self.requests.labels(plane, verb, record.outcome).inc()
        self.duration.labels(plane, verb).observe(duration_seconds)
        if record.outcome.startswith("auth."):
            self.auth_failures.labels(record.outcome.removeprefix("auth.")).inc()
        if record.replayed:
            self.replays.labels(plane, verb).inc()

    # -- scrape ---------------------------------------------------------------------------

    def refresh(
        self, planes: Mapping[str, Plane], healths: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        """Set the store gauges from the stores themselves (runs in the threadpool);
        ``healths``: each plane's health, when the caller asked them already."""
        for name, plane in planes.items():
            health = healths[name] if healths is not None else plane.health()
            self.health.labels(name).set(HEALTH_VALUES.get(str(health.get("status")), 0))
            store = plane.store
            if not isinstance(store, AdminStore):
                continue  # a reference store: nothing on disk to measure
            pool = store.pool_stats()
            if pool is not None:
                for state in ("open", "idle", "waiting"):
                    self.pg_pool.labels(name, state).set(pool[state])
                self.pg_retries.labels(name).set(pool["retries"])
            if health.get("status") == "down":
                # each read would wait out the pool's timeout: a scrape must answer in time
                # to carry the plane-down reading the alert needs (the gauges keep the last)
                continue
            stored = _guarded(store.storage_bytes)
            if stored is None:
                continue
            self.db_bytes.labels(name).set(stored)
            lag = _guarded(store.replication_lag)
            if lag is not None:
                self.replica_lag.labels(name).set(lag)
            cap = store.storage_cap()
            if cap is not None:
                self.db_max_bytes.labels(name).set(cap)
                capped = _guarded(store.capped_bytes)
                if capped is not None:
                    self.db_capped_bytes.labels(name).set(capped)
            for kind, count in _record_counts(store).items():
                # the gauge has always named kinds in the plural: chunks, states, events
                self.records.labels(name, f"{kind}s").set(count)

    def exposition(self) -> bytes:
        """The text format: all workers' files under gunicorn, this registry otherwise."""
        path = multiprocess_dir()
        if path is None or not values_are_multiprocess():
            return bytes(generate_latest(self.registry))
        registry = CollectorRegistry()
        prom_multiprocess.MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
        return bytes(generate_latest(registry))


def _guarded(measure: Callable[[], N | None]) -> N | None:
    """A gauge's reading, or None when the store cannot be read now (health says why)."""
    try:
        return measure()
    except Exception:
        return None


def _record_counts(store: AdminStore) -> dict[str, int]:
    """Records per kind; a store that cannot answer reports nothing (health says why)."""
    try:
        return store.record_counts()
    except Exception:
        return {}


def mark_process_dead(pid: int) -> None:
    """gunicorn's ``child_exit``: drop a dead worker's live gauges from the sums."""
    path = multiprocess_dir()
    if path is not None:
        prom_multiprocess.mark_process_dead(pid, path)  # type: ignore[no-untyped-call]


# prometheus_client's sample files, ``<type>[_<gauge mode>]_<pid>.db``: all a wipe removes
SAMPLE_FILE = re.compile(r"(counter|histogram|summary|gauge_[a-z]+)_\d+\.db")


def wipe_multiprocess_dir() -> None:
    """gunicorn's ``on_starting``: samples of a previous run must not be summed into this one."""
    path = multiprocess_dir()
    if path is None:
        return
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        if SAMPLE_FILE.fullmatch(name):  # never another file: the directory may hold others
            os.unlink(os.path.join(path, name))
