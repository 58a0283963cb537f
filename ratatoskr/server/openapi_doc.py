"""Write ``docs/openapi.json`` (``python -m ratatoskr.server.openapi_doc``): both planes, as
``ratatoskr serve`` serves them at the default dimension."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from ratatoskr.affect.verbs import AFFECT_TABLE
from ratatoskr.memory.verbs import memory_table
from ratatoskr.wire.openapi import openapi_document


def render() -> bytes:
    document = openapi_document([memory_table(768), AFFECT_TABLE])
    return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"


def main(argv: list[str] | None = None) -> int:
    target = Path((argv or sys.argv[1:] or ["docs/openapi.json"])[0])
    target.write_bytes(render())
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
