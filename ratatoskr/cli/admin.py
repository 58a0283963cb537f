"""``ratatoskr admin``: the operator surface on the host, straight on the planes' storage.

Every command opens the SQLite files as the server does (WAL, busy timeout), or the
PostgreSQL database the server uses, so it runs while a server serves them. Exit status: 0
done, 1 a problem found or a removal not confirmed, 2 bad input. Nothing here prints record
content except ``admin get``, nor any key or token.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ratatoskr.cli import admin_migrate
from ratatoskr.cli import admin_output as show
from ratatoskr.cli.admin_runner import (
    add_command,
    common_options,
    filter_options,
    selected_filter,
)
from ratatoskr.core.filters import AFFECT, FACETS, MEMORY, PLANES, Filter
from ratatoskr.core.locations import AFFECT_DB_ENV, MEMORY_DB_ENV
from ratatoskr.core.visible import defanged
from ratatoskr.ops import explore as explore_ops
from ratatoskr.ops import forget as forget_ops
from ratatoskr.ops import importer, listing, maintenance
from ratatoskr.ops import restore as restore_ops
from ratatoskr.ops.filters import parse_scope
from ratatoskr.ops.stores import Stores
from ratatoskr.sqlite.replica import REPLICA_URL_ENV, replica_settings_from_env

_PLANE_ENVS = {MEMORY: MEMORY_DB_ENV, AFFECT: AFFECT_DB_ENV}
_ALL_FACETS = sorted({f for facets in FACETS.values() for f in facets})


# -- handlers --------------------------------------------------------------------------


def _list(args: argparse.Namespace, stores: Stores) -> int:
    page = listing.list_records(
        stores.get(args.plane),
        args.plane,
        selected_filter(args),
        limit=args.limit,
        cursor=args.cursor,
    )
    show.emit_json(page) if args.json else show.render_list(page)
    return 0


def _explore(args: argparse.Namespace, stores: Stores) -> int:
    page = explore_ops.explore(
        stores.get(args.plane),
        args.plane,
        args.facet,
        selected_filter(args),
        limit=args.limit,
        scan_limit=args.scan_limit,
    )
    show.emit_json(page) if args.json else show.render_explore(page)
    return 0


def _get(args: argparse.Namespace, stores: Stores) -> int:
    listing.check_get_ids(args.ids)  # before the database is opened
    hits = listing.get_records(stores.get(args.plane), args.ids)
    show.emit_json(hits) if args.json else show.render_get(hits, full=args.full)
    return 0


def _records_in(planes: dict[str, dict[str, Any]]) -> int:
    """The records a removal's counts hold (its idempotency entries and flags apart)."""
    return sum(
        count
        for counts in planes.values()
        for kind, count in counts.items()
        if kind != "idempotency" and isinstance(count, int) and not isinstance(count, bool)
    )


def _confirm(
    args: argparse.Namespace, report: dict[str, Any], title: str, incomplete: str | None = None
) -> int:
    """Show what a removal did or would do; without --yes nothing was removed (exit 1)."""
    removed = bool(args.yes and not args.dry_run)
    if args.json:
        show.emit_json({**report, "removed": removed})
    else:
        if incomplete is not None:
            note = f"incomplete: removed from the planes shown only; {incomplete}."
        elif removed:
            note = "removed."
        elif args.dry_run:
            note = "dry run: nothing removed."
        elif not _records_in(report["planes"]):
            note = "nothing matches: no record to remove."
        else:
            note = "nothing removed: add --yes to remove these records."
        for plane, location in report.get("not_examined", {}).items():
            note += (
                f"\nnot examined: the {plane} plane (no database at {location}; "
                f"--{plane}-db or {_PLANE_ENVS[plane]} names it if it is elsewhere)."
            )
        show.render_counts(title if removed else f"{title} (would remove)", report["planes"], note)
    return 0 if removed or args.dry_run else 1


def _forget(args: argparse.Namespace, stores: Stores) -> int:
    flt: Filter | None = selected_filter(args)
    ids = args.ids or None
    kind = None
    if ids is not None and flt is not None:  # only a kind may narrow ids (an affect state
        if flt.scope or flt.origin is not None:  # and an event may share one)
            raise ValueError("give --ids or a filter (--scope/--narrow), not both")
        kind, flt = flt.kind, None
    elif flt is not None and flt.is_empty():
        raise ValueError("refusing an empty filter: give --ids, --scope or --narrow")
    store = stores.get(args.plane)
    dry = args.dry_run or not args.yes
    counts = forget_ops.forget(store, ids=ids, flt=flt, kind=kind, dry_run=dry)
    return _confirm(args, {"plane": args.plane, "planes": {args.plane: counts}}, "forget")


def _erase(args: argparse.Namespace, stores: Stores) -> int:
    scope = parse_scope(args.scope)
    if not scope:
        raise ValueError("refusing an empty scope: give --scope axis=value")
    if not stores.present():
        raise ValueError("no database found (see --memory-db, --affect-db)")
    title = f"erase {show.describe_scope(scope)}"
    try:
        report = forget_ops.erase(stores, scope, dry_run=args.dry_run or not args.yes)
    except forget_ops.EraseRefused as exc:
        print(f"ratatoskr admin erase: {defanged(str(exc))}", file=sys.stderr)
        return 2
    except forget_ops.EraseIncomplete as exc:  # what was removed is shown, then why not all
        failed = {"plane": exc.plane, "reason": exc.reason}
        _confirm(
            args,
            {**exc.report, "incomplete": failed},
            title,
            incomplete=f"the {exc.plane} plane not erased",
        )
        print(f"ratatoskr admin erase: {defanged(str(exc))}", file=sys.stderr)
        return 2
    code = _confirm(args, report, title)
    if report["removed"] and not args.json:
        for warning in forget_ops.erase_warnings(report):
            print(f"warning: {warning}", file=sys.stderr)
    return code


def _stats(args: argparse.Namespace, stores: Stores) -> int:
    report = maintenance.stats(stores)
    try:
        replica = replica_settings_from_env(os.environ)
    except ValueError:  # serve names the problem; stats still shows the files
        replica = None
    if replica is not None:
        report["replication"] = restore_ops.replication_stats(
            stores.paths, replica.max_lag, time.time()
        )
    show.emit_json(report) if args.json else show.render_stats(report)
    return 0


def _check(args: argparse.Namespace, stores: Stores) -> int:
    report = maintenance.check(stores)
    show.emit_json(report) if args.json else show.render_check(report)
    return 0 if report["ok"] else 1


def _backup(args: argparse.Namespace, stores: Stores) -> int:
    def copied(plane: str, size: int) -> None:
        if not args.json:
            show.console(stderr=True).print(f"copied {plane} ({size:,} bytes)")

    report = maintenance.backup(stores, args.to, verify=not args.no_verify, on_copied=copied)
    if args.json:
        show.emit_json(report)
    else:
        for plane, info in report["planes"].items():
            print(f"{plane} -> {info['path']}")
        if report["jti"] is not None:
            ledger = report["jti"]
            print(f"jti ledger -> {ledger['path']} ({ledger['entries']:,} unexpired entries)")
        if "check" in report:
            show.render_check(report["check"])
    return 0 if report.get("check", {"ok": True})["ok"] else 1


def _restore(args: argparse.Namespace, stores: Stores) -> int:
    restore_ops.check_sqlite_targets(stores.paths)
    url = args.source or os.environ.get(REPLICA_URL_ENV, "")
    if not url.strip():
        raise ValueError(f"give --from URL or set {REPLICA_URL_ENV}")
    setting = "--from" if args.source else REPLICA_URL_ENV
    restorer: restore_ops.Restorer | None = None
    try:
        restorer = restore_ops.Restorer(stores.paths, url, setting=setting)
        report = restorer.run(timestamp=args.timestamp, force=args.force)
        report["check"] = maintenance.check(stores)
    except (KeyboardInterrupt, SystemExit):  # stopped: say what is there
        if restorer is not None and restorer.placed:
            print(
                "ratatoskr admin restore: the restored files are in place; the check was "
                "stopped before it finished: run ratatoskr admin check",
                file=sys.stderr,
            )
        raise
    except restore_ops.RestoreRefused as exc:
        print(f"ratatoskr admin restore: {exc}", file=sys.stderr)
        return 1
    except restore_ops.RestoreFailed as exc:
        print(f"ratatoskr admin restore: {exc}", file=sys.stderr)
        return 2
    show.emit_json(report) if args.json else show.render_restore(report)
    return 0 if report["check"]["ok"] else 1


def _prune(args: argparse.Namespace, stores: Stores) -> int:
    report = maintenance.prune(stores)
    if args.json:
        show.emit_json(report)
    else:
        for plane, n in report["idempotency"].items():
            print(f"{plane}: {n:,} expired idempotency entr{'y' if n == 1 else 'ies'} pruned")
        for path, n in report["jti"].items():
            print(f"jti ledger {path}: {n:,} expired entr{'y' if n == 1 else 'ies'} pruned")
    return 0


def _import(args: argparse.Namespace, stores: Stores) -> int:
    # the arguments and the file first: a refused import creates no database
    importer.check_arguments(args.plane, args.kind, args.batch)
    total = importer.count_lines(args.file)
    store = stores.get(args.plane, create=True)
    columns = (
        TextColumn("import {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("lines"),
        TimeElapsedColumn(),
    )
    progress = Progress(*columns, console=show.console(stderr=True), disable=args.json)
    with progress:
        task = progress.add_task(escape(defanged(os.path.basename(args.file))), total=total)
        report = importer.import_jsonl(
            store,
            args.plane,
            args.file,
            kind=args.kind,
            batch=args.batch,
            on_line=lambda n: progress.update(task, completed=n),
        )
    if args.json:
        show.emit_json(report)
    else:
        print(
            f"{report['records']:,} {report['kind']} record(s) in {report['batches']} batch(es): "
            f"{report['written']:,} written, {report['replayed_batches']} batch(es) replayed"
        )
    return 0


def _ui(args: argparse.Namespace, stores: Stores) -> int:
    from ratatoskr.console.serve import serve

    return serve(
        stores,
        host=args.host,
        port=args.port,
        allow_remote=args.allow_remote,
        operator=args.operator,
        as_json=args.json,
    )


def _port(value: str) -> int:
    port = int(value) if value.strip().isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError("a port is 0..65535 (0: any free one)")
    return port


# -- registration ------------------------------------------------------------------------


def _plane(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plane", choices=PLANES, help="memory or affect")


def register(commands: Any) -> None:
    admin = commands.add_parser(
        "admin",
        help="operate on the plane files: list, explore, get, forget, erase, check, back up",
        description="Operator commands that work directly on the database files, also while "
        "a server runs. Add --json for scripts.",
    )
    sub = admin.add_subparsers(dest="admin_command", metavar="ADMIN_COMMAND", required=True)
    common = common_options()

    p = add_command(
        sub,
        "list",
        "list the records a filter admits (ids, scope, revision; never content)",
        "ratatoskr admin list memory --scope tenant=acme --narrow end_user=u7 --limit 100",
        _list,
        common,
    )
    _plane(p)
    filter_options(p)
    p.add_argument("--limit", type=int, default=listing.DEFAULT_LIST_LIMIT, help="1..500")
    p.add_argument("--cursor", help="the cursor the previous page printed")

    p = add_command(
        sub,
        "explore",
        "count records per value of a facet, to drill down with --narrow",
        "ratatoskr admin explore memory --facet end_user --scope tenant=acme",
        _explore,
        common,
    )
    _plane(p)
    p.add_argument(
        "--facet",
        required=True,
        choices=_ALL_FACETS,
        help="tenant, group, end_user, agent_self; origin (memory); kind (affect)",
    )
    filter_options(p)
    p.add_argument("--limit", type=int, default=explore_ops.DEFAULT_BUCKETS, help="buckets, 1..500")
    p.add_argument(
        "--scan-limit",
        type=int,
        default=explore_ops.DEFAULT_SCAN_LIMIT,
        help="1..50,000 (counts are exact here: aggregated in SQL)",
    )

    p = add_command(
        sub,
        "get",
        "print whole records by id, in the order named (shows content)",
        "ratatoskr admin get memory c1 c2",
        _get,
        common,
    )
    _plane(p)
    p.add_argument("ids", nargs="+", metavar="ID", help=f"1..{listing.MAX_GET_IDS} ids")
    p.add_argument("--full", action="store_true", help="print embeddings too")

    p = add_command(
        sub,
        "forget",
        "remove records of one plane by id or by a non-empty filter",
        "ratatoskr admin forget affect --scope tenant=acme --narrow kind=event --dry-run",
        _forget,
        common,
    )
    _plane(p)
    p.add_argument(
        "--ids",
        nargs="+",
        action="extend",  # repeated, every list counts, as --scope and --narrow do
        metavar="ID",
        help="remove these ids (--narrow kind=K: of that kind)",
    )
    filter_options(p)
    p.add_argument("--dry-run", action="store_true", help="only count")
    p.add_argument("--yes", action="store_true", help="really remove")

    p = add_command(
        sub,
        "erase",
        "erase a subject from both planes, leaving no trace in the files",
        "ratatoskr admin erase --scope tenant=acme --scope end_user=u7 --yes",
        _erase,
        common,
    )
    p.add_argument("--scope", action="append", default=[], metavar="AXIS=VALUE", required=True)
    p.add_argument("--dry-run", action="store_true", help="only count")
    p.add_argument("--yes", action="store_true", help="really erase")

    add_command(
        sub,
        "stats",
        "records, file sizes, caches and schema per plane",
        "ratatoskr admin stats --memory-db /srv/ratatoskr/memory.db",
        _stats,
        common,
    )
    add_command(
        sub,
        "check",
        "integrity, schema, chunk/vector consistency; exit 1 on a problem",
        "ratatoskr admin check && echo healthy",
        _check,
        common,
    )

    p = add_command(
        sub,
        "backup",
        "consistent online copies of both files (then checked)",
        "ratatoskr admin backup --to /backups/ratatoskr-$(date +%F)",
        _backup,
        common,
    )
    p.add_argument("--to", required=True, metavar="DIR")
    p.add_argument("--no-verify", action="store_true", help="skip checking the copies")

    p = add_command(
        sub,
        "restore",
        "restore both planes (and the jti ledger) from a Litestream replica, then check them",
        'ratatoskr admin restore --from "$RATATOSKR_REPLICA_URL" --timestamp 2026-12-01T09:30:00Z',
        _restore,
        common,
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="URL",
        help=f"the replica URL ratatoskr serve replicated to (default {REPLICA_URL_ENV})",
    )
    p.add_argument(
        "--timestamp", metavar="TIME", help="the state as of this ISO 8601 time (default: latest)"
    )
    p.add_argument("--force", action="store_true", help="replace files that exist")

    add_command(
        sub,
        "prune",
        "drop expired idempotency and jti entries",
        "ratatoskr admin prune",
        _prune,
        common,
    )

    p = add_command(
        sub,
        "import",
        "load a JSON-lines file in batches (rerun to resume after a failure)",
        "ratatoskr admin import memory chunks.jsonl --batch 500 --dim 768",
        _import,
        common,
    )
    _plane(p)
    p.add_argument("file", metavar="FILE.jsonl")
    p.add_argument(
        "--kind",
        choices=("chunk", "state", "event"),
        help="what each line is: chunk (memory, the default there), or state or event "
        "(affect: one of them must be named)",
    )
    p.add_argument(
        "--batch", type=int, default=importer.DEFAULT_BATCH, help="records per call, 1..1000"
    )

    p = add_command(
        sub,
        "ui",
        "a local web console: explore, drill down, open a record, forget and erase",
        "ratatoskr admin ui --port 8765   # then open the URL it prints",
        _ui,
        common,
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="default 8765; 0 picks a free one")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a host other machines can reach (plain HTTP: prefer an SSH tunnel)",
    )
    p.add_argument("--operator", help="who the audit log names (default: your login name)")
    p = add_command(
        sub, "migrate", admin_migrate.HELP, admin_migrate.EXAMPLE, admin_migrate.run, common
    )
    admin_migrate.add_arguments(p)
