"""A log line may name a value a writer chose (an actor, an operator's record id): JSON lets
DEL, the C1 controls and the bidi overrides through raw, and a terminal showing the log would
act on them, so each log line writes them as ``\\u`` escapes, holding the same values."""

from __future__ import annotations

import logging
import unicodedata

import orjson

from ratatoskr.server.logs import formatter

ACTOR = "worldtree\u202eevil\x7f\x9b31m\u2066"


def test_a_log_line_escapes_what_a_terminal_would_act_on() -> None:
    record = logging.LogRecord("ratatoskr.wire", logging.INFO, __file__, 1, "call", None, None)
    record.fields = {"actor": ACTOR, "plane": "memory"}
    line = formatter("json").format(record)
    raw = [c for c in line if unicodedata.category(c) in {"Cc", "Cf"}]
    assert raw == [], line
    assert "\\u202e" in line and "\\u007f" in line and "\\u009b" in line
    assert orjson.loads(line)["actor"] == ACTOR  # the same value, read back
