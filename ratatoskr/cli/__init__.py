"""The ``ratatoskr`` command line: one sub-command module per concern."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ratatoskr import __version__
from ratatoskr.core.blas import single_threaded

single_threaded()  # before any command imports numpy


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ratatoskr",
        description="Durable memory and affect provider for Worldtree (Bifrost wire v0.6).",
    )
    parser.add_argument("--version", action="version", version=f"ratatoskr {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from ratatoskr.cli import admin, call, serve, token

    for module in (serve, token, call, admin):
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        sys.stderr.close()
        return 0
