"""One log formatter for the app, uvicorn and gunicorn: structlog, JSON lines, allow-listed.

Every record, whoever logs it, goes through ``ProcessorFormatter`` with the same chain:
level, logger, timestamp, the call line's fields lifted out of its ``extra``, access lines
rebuilt from method, known path (never the query string) and status, tracebacks reduced to
frame locations and the exception type (no locals, no message: either may quote content),
and finally an allow-list: a key not listed here is dropped, not printed.
"""

from __future__ import annotations

import logging
import logging.config
import traceback
from collections.abc import Mapping, MutableMapping
from typing import Any

import orjson
import structlog
from structlog.typing import EventDict, Processor

from ratatoskr.core.visible import json_visible
from ratatoskr.wire.calllog import ANSWERING

ALLOWED_KEYS = frozenset(
    {
        "timestamp",
        "level",
        "logger",
        "event",
        "pid",
        # the call line (wire.calllog)
        "request_id",
        "plane",
        "verb",
        "actor",
        "outcome",
        "status",
        "duration_ms",
        "counts",
        "replayed",
        # access lines
        "method",
        "path",
        "http_version",
        # redacted tracebacks
        "exception",
        # the server's own lines
        "setting",
        "key_file",
        "bind",
        "workers",
        # the replication supervisor and Litestream's own lines (server.replication)
        "source",
        "replica",
        "txid",
        "error",
        "child_pid",
        "exit_status",
        "restarts",
        "backoff_s",
        # the supervisor's checkpoint while Litestream is down (bytes)
        "wal_bytes_before",
        "wal_bytes_after",
        "wal_max_bytes",
        # the operator console's audit lines (console.audit): which record, opened from where
        "record_id",
        "client",
    }
)
CALL_FIELDS = ("request_id", "plane", "verb", "actor", "outcome", "status", "duration_ms")
KNOWN_PATHS = frozenset(
    {
        "/bifrost/handshake",
        "/bifrost/memory-call",
        "/bifrost/affect-call",
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
    }
)
ACCESS_LOGGERS = frozenset({"uvicorn.access", "gunicorn.access"})
MAX_FRAMES = 12


def _record(event_dict: EventDict) -> logging.LogRecord | None:
    record = event_dict.get("_record")
    return record if isinstance(record, logging.LogRecord) else None


def add_pid(_: Any, __: str, event_dict: EventDict) -> EventDict:
    record = _record(event_dict)
    if record is not None:
        event_dict["pid"] = record.process
    return event_dict


def lift_call_line(_: Any, __: str, event_dict: EventDict) -> EventDict:
    """The wire's call line carries its fields in ``extra={"bifrost": ...}``; lift them."""
    record = _record(event_dict)
    fields = getattr(record, "bifrost", None) if record is not None else None
    if not isinstance(fields, Mapping):
        return event_dict
    event_dict["event"] = "bifrost.call"
    for name in CALL_FIELDS:
        if name in fields:
            event_dict[name] = fields[name]
    counts = {
        k: v
        for k, v in fields.items()
        if k not in CALL_FIELDS and k != "replayed" and isinstance(v, int)
    }
    if counts:
        event_dict["counts"] = counts
    if fields.get("replayed") is True:
        event_dict["replayed"] = True
    return event_dict


def lift_fields(_: Any, __: str, event_dict: EventDict) -> EventDict:
    """A record logged with ``extra={"fields": {...}}`` carries its fields there; the
    allow-list still decides which of them are printed."""
    record = _record(event_dict)
    fields = getattr(record, "fields", None) if record is not None else None
    if isinstance(fields, Mapping):
        for name, value in fields.items():
            event_dict.setdefault(str(name), value)
    return event_dict


def path_without_query(raw: object) -> str:
    """A request path safe to log: no query string, and only a route this server serves."""
    path = str(raw).split("?", 1)[0].split("#", 1)[0]
    return path if path in KNOWN_PATHS else "<other>"


def rebuild_access_line(_: Any, __: str, event_dict: EventDict) -> EventDict:
    """uvicorn's access message holds the full path with its query; keep method, path, status,
    and the request id of a wire call."""
    record = _record(event_dict)
    if record is None or record.name not in ACCESS_LOGGERS:
        return event_dict
    args = event_dict.pop("positional_args", None)
    event_dict["event"] = "http.access"
    if isinstance(args, tuple) and len(args) == 5:  # client, method, path, version, status
        _, method, path, version, status = args
        event_dict["method"] = str(method)[:16]
        event_dict["path"] = path_without_query(path)
        event_dict["http_version"] = str(version)[:8]
        event_dict["status"] = status if isinstance(status, int) else str(status)[:3]
    answering = ANSWERING.get()
    if answering is not None:  # a wire call's line: tied to its call line
        event_dict["request_id"] = answering
    return event_dict


def drop_positional_args(_: Any, __: str, event_dict: EventDict) -> EventDict:
    event_dict.pop("positional_args", None)
    return event_dict


def redact_exception(_: Any, __: str, event_dict: EventDict) -> EventDict:
    """A traceback as frame locations and the exception's type: no locals, no message."""
    exc_info = event_dict.pop("exc_info", None)
    event_dict.pop("stack_info", None)
    if exc_info is True:
        import sys

        exc_info = sys.exc_info()
    if isinstance(exc_info, BaseException):
        exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
    if isinstance(exc_info, tuple) and len(exc_info) == 3 and exc_info[0] is not None:
        kind, _value, tb = exc_info
        frames = traceback.extract_tb(tb)[-MAX_FRAMES:]
        event_dict["exception"] = {
            "type": getattr(kind, "__qualname__", "?"),
            "frames": [f"{f.filename}:{f.lineno}:{f.name}" for f in reversed(frames)],
        }
    return event_dict


def allow_list(_: Any, __: str, event_dict: EventDict) -> EventDict:
    """Keep the listed keys only: whatever else a library attached is dropped unread."""
    for key in [k for k in event_dict if k not in ALLOWED_KEYS]:
        del event_dict[key]
    return event_dict


def _json(obj: MutableMapping[str, Any], **_: Any) -> str:
    # an id or a value logged as a writer gave it must not drive the reader's terminal
    return json_visible(orjson.dumps(obj, default=str).decode())


def pre_chain() -> list[Processor]:
    """Processors every record runs through before the allow-list (stdlib and structlog)."""
    return [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        lift_call_line,
        lift_fields,
        rebuild_access_line,
        drop_positional_args,
        redact_exception,
    ]


class SafeFormatter(structlog.stdlib.ProcessorFormatter):
    """A record that cannot be formatted becomes a fixed line: logging's own error path
    (``handleError``) would print the record's message and arguments to stderr."""

    def format(self, record: logging.LogRecord) -> str:
        try:
            return super().format(record)
        except Exception:
            line = {"event": "unformattable log record", "logger": record.name}
            return orjson.dumps({**line, "level": record.levelname.lower()}).decode()


def formatter(log_format: str = "json") -> structlog.stdlib.ProcessorFormatter:
    """The one formatter: app, uvicorn and gunicorn handlers all use an instance of it."""
    renderer: Processor = (
        structlog.dev.ConsoleRenderer(colors=False)
        if log_format == "console"
        else structlog.processors.JSONRenderer(serializer=_json)
    )
    return SafeFormatter(
        foreign_pre_chain=pre_chain(),
        pass_foreign_args=True,
        processors=[
            add_pid,
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            drop_positional_args,
            redact_exception,
            allow_list,
            renderer,
        ],
    )


def logging_config(level: str = "info", log_format: str = "json") -> dict[str, Any]:
    """A ``dictConfig`` for every logger that matters; gunicorn takes it as ``logconfig_dict``.

    gunicorn's and uvicorn's loggers get the same handler and do not propagate (the uvicorn
    worker copies gunicorn's handlers onto uvicorn's loggers), the app logs through root.
    """
    upper = level.upper()
    handler = {"handlers": ["default"], "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "ratatoskr": {"()": f"{__name__}.formatter", "log_format": log_format},
        },
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "ratatoskr",
                "stream": "ext://sys.stdout",
            },
        },
        "root": {"level": upper, "handlers": ["default"]},
        "loggers": {
            "gunicorn.error": {"level": upper, **handler},
            "gunicorn.access": {"level": "INFO", **handler},
            "uvicorn": {"level": upper, **handler},
            "uvicorn.error": {"level": upper, **handler},
            "uvicorn.access": {"level": "INFO", **handler},
        },
    }


def configure_logging(level: str = "info", log_format: str = "json") -> None:
    """Install the formatter process-wide and point structlog's own loggers at it."""
    logging.raiseExceptions = False  # never print a failing record's arguments
    logging.config.dictConfig(logging_config(level, log_format))
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
