"""How an ``admin`` command is parsed and run: the options every command shares, the
filter options, and the runner that opens the stores, ends on SIGTERM as on Ctrl-C and
turns what went wrong into a message and an exit status (1 an import stopped at a line, 2
bad input or a store that cannot be opened)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from ratatoskr.cli import admin_output as show
from ratatoskr.core.filters import Filter
from ratatoskr.core.visible import defanged
from ratatoskr.ops import importer
from ratatoskr.ops.filters import parse_pairs, parse_scope
from ratatoskr.ops.stores import STORE_ERRORS, Paths, Stores

Handler = Callable[[argparse.Namespace, Stores], int]


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    files = common.add_argument_group("files")
    files.add_argument("--memory-db", help="file or postgresql:// URL (RATATOSKR_MEMORY_DB)")
    files.add_argument("--affect-db", help="file or postgresql:// URL (RATATOSKR_AFFECT_DB)")
    files.add_argument(
        "--jti-db",
        help="jti ledger (default: the server's, beside the memory plane or in its database)",
    )
    files.add_argument(
        "--dim",
        type=int,
        help="memory embedding dimension for a new file (RATATOSKR_MEMORY_EMBEDDING_DIM); "
        "an existing file knows its own",
    )
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    return common


def filter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scope",
        action="append",
        default=[],
        metavar="AXIS=VALUE",
        help="keep records whose scope holds this pair (repeat; axes tenant, group, "
        "end_user, agent_self)",
    )
    parser.add_argument(
        "--narrow",
        action="append",
        default=[],
        metavar="FACET=VALUE",
        help="drill into an explore bucket (repeat): a scope axis, origin (memory) or "
        "kind (affect: state, event)",
    )


def selected_filter(args: argparse.Namespace) -> Filter:
    flt = Filter(scope=parse_scope(args.scope))
    return parse_pairs(args.plane, args.narrow, flt)


def add_command(
    sub: Any, name: str, help_: str, example: str, handler: Handler, common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help_,
        description=help_,
        epilog="example:\n  " + example,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=runner(handler), admin_command=name)
    return parser


def end_on_sigterm() -> None:
    """SIGTERM (``kill``, ``timeout``, a job runner) ends a command as Ctrl-C does: through
    its cleanup, staged files removed and a child such as Litestream killed (exit 143)."""

    def terminated(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, terminated)


def runner(handler: Handler) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        end_on_sigterm()
        try:
            paths = Paths.resolve(
                os.environ,
                memory=args.memory_db,
                affect=args.affect_db,
                jti=args.jti_db,
                dim=args.dim,
            )
            with Stores(paths) as stores:
                return handler(args, stores)
        except importer.ImportFailed as exc:
            if getattr(args, "json", False):  # what a script needs to report and resume
                show.emit_json(
                    {
                        "ok": False,
                        "error": str(exc),
                        "line": exc.line,
                        "stored": exc.stored,
                        "batches": exc.batches,
                    }
                )
            print(f"ratatoskr admin import: {defanged(str(exc))}", file=sys.stderr)
            print(
                f"{exc.stored:,} record(s) in {exc.batches} batch(es) before it are stored; "
                "fix the line and run the same command again to continue",
                file=sys.stderr,
            )
            return 1
        except BrokenPipeError:  # the reader went away (``| head``): stop, as cat does
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + signal.SIGPIPE
        except (*STORE_ERRORS, OSError) as exc:  # a message may name a stored id
            print(f"ratatoskr admin {args.admin_command}: {defanged(str(exc))}", file=sys.stderr)
            return 2

    return run
