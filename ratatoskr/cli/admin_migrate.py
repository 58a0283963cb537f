"""``ratatoskr admin migrate --to postgresql://...``: the SQLite files into PostgreSQL."""

from __future__ import annotations

import argparse
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ratatoskr.cli import admin_output as show
from ratatoskr.core.filters import PLANES
from ratatoskr.ops import migrate as migrate_ops
from ratatoskr.ops.stores import Stores

HELP = "copy both planes from their SQLite files into PostgreSQL (resumable, then checked)"
EXAMPLE = (
    "ratatoskr admin migrate --memory-db data/memory.db --affect-db data/affect.db \\\n"
    "      --to 'postgresql://ratatoskr@db.internal/ratatoskr?sslmode=verify-full'"
)


def run(args: argparse.Namespace, stores: Stores) -> int:
    columns = (
        TextColumn("migrate {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        TimeElapsedColumn(),
    )
    progress = Progress(*columns, console=show.console(stderr=True), disable=args.json)
    totals = {p: migrate_ops.source_rows(stores, p) for p in PLANES if stores.exists(p)}
    tasks: dict[str, Any] = {}

    def advance(plane: str, rows: int) -> None:
        """A plane's bar, drawn once rows of it are copied: a run refused before any (a
        migration finished earlier) shows no empty bars above its message."""
        if plane not in tasks:
            tasks[plane] = progress.add_task(plane, total=totals.get(plane))
        progress.advance(tasks[plane], rows)

    with progress:
        report = migrate_ops.migrate(stores, args.to, progress=advance)
    if args.json:
        show.emit_json(report)
    else:
        for plane, info in report["planes"].items():
            verdict = "checked: identical" if info["checked"] else "CHECK FAILED: they differ"
            print(
                f"{plane}: {info['copied']:,} record(s) copied this run, "
                f"{info['rows']:,} row(s) in all, {verdict}"
            )
        print(f"target: {report['target']}")
        for plane, why in report["not_migrated"].items():
            print(
                f"not migrated: the {plane} plane ({why}; --{plane}-db names it if it is elsewhere)"
            )
    return 0 if report["ok"] else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--to", required=True, metavar="URL", help="the PostgreSQL database (postgresql://...)"
    )
