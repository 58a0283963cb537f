"""How ``ratatoskr admin`` shows results: aligned rich tables for people, JSON for scripts.

Only ids, scope values, counts, sizes and paths are ever rendered here; record content
reaches the screen through ``render_get`` alone. A stored id or value is written as the
console writes it (``core.visible``): as it is when plain, else quoted with every control,
bidi or other invisible character escaped, so nothing a writer stored acts on the terminal;
``--json`` prints the exact values (JSON escapes what it must).
"""

from __future__ import annotations

import shlex
import unicodedata
from typing import Any

import orjson
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ratatoskr.core.scope import AXES
from ratatoskr.core.visible import defanged, invisible, json_visible, shown
from ratatoskr.sqlite.replica import SILENT_AFTER

MAX_TABLE_WIDTH = 100_000


def console(*, stderr: bool = False) -> Console:
    """A console bound at call time (so redirected and captured output both work). No
    markup: ids and scope values are stored data, and ``[/]`` in one must print as it is."""
    return Console(stderr=stderr, highlight=False, soft_wrap=False, markup=False)


_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS


def emit_json(value: Any) -> None:
    print(json_visible(orjson.dumps(value, option=_JSON_OPTIONS).decode()))


def _table(out: Console, title: str) -> Table:
    """An aligned table under a title line (a table title would wrap to the table's width)."""
    out.print(title)
    return Table(box=box.SIMPLE_HEAD, pad_edge=False)


def print_table(out: Console, table: Table) -> None:
    """``table`` at its natural width when the terminal is narrower: the terminal wraps the
    lines, but an id or a value stays whole on its line (folded in a cell, it could no
    longer be copied into the next command)."""
    natural = Measurement.get(out, out.options.update(width=MAX_TABLE_WIDTH), table).maximum
    if natural <= out.width:
        out.print(table)
        return
    wide = Console(
        file=out.file,
        width=natural,
        highlight=False,
        soft_wrap=False,
        markup=False,
        color_system=out.color_system,  # type: ignore[arg-type]
    )
    wide.print(table)


def describe_filter(flt: dict[str, Any]) -> str:
    pairs = [f"{k}={shown(v)}" for k, v in flt.get("scope", {}).items()]
    pairs += [f"{k}={shown(flt[k])}" for k in ("origin", "kind") if k in flt]
    return " ".join(pairs) or "everything"


def describe_scope(scope: dict[str, str]) -> str:
    return " ".join(f"{k}={shown(v)}" for k, v in scope.items())


_NO_HINT = "(none: the value holds a NUL, which no command line passes; --json shows it)"
_SHELL_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "'": "\\'"}


def shell_word(word: str) -> str | None:
    """``word`` as one shell word that, pasted, gives back exactly ``word``: quoted as
    ``shlex`` quotes when it holds nothing invisible; else in ``$'...'`` (bash, zsh, ksh,
    busybox sh; POSIX.1-2024), each invisible character as its UTF-8 bytes in octal (three
    digits: a digit after one is never taken into it), so the hint itself holds nothing a
    terminal acts on. None for a word holding a NUL, which no command line can pass."""
    if "\0" in word:
        return None
    composed = unicodedata.is_normalized("NFC", word)  # else its combining marks as bytes
    if composed and not any(invisible(c) for c in word):
        return shlex.quote(word)
    out: list[str] = []
    for char in word:
        if char in _SHELL_SHORT:
            out.append(_SHELL_SHORT[char])
        elif invisible(char) or (not composed and unicodedata.category(char).startswith("M")):
            out.extend(f"\\{b:03o}" for b in char.encode("utf-8", "surrogatepass"))
        else:
            out.append(char)
    return "$'" + "".join(out) + "'"


def render_list(page: dict[str, Any]) -> None:
    out = console()
    records = page["records"]
    plane = page["plane"]
    table = _table(out, f"{plane} records ({describe_filter(page['filter'])})")
    if plane == "affect":
        table.add_column("kind")
    table.add_column("id", overflow="fold")
    axes = [a for a in AXES if any(a in item["scope"] for item in records)]
    for axis in axes:
        table.add_column(axis, overflow="fold")
    table.add_column("revision", justify="right")
    extra = "origin" if plane == "memory" else "at"
    table.add_column(extra, no_wrap=True)
    for item in records:
        row = [item["kind"]] if plane == "affect" else []
        row.append(shown(item["id"]))
        row += [shown(item["scope"][axis]) if axis in item["scope"] else "" for axis in axes]
        row.append("" if item["revision"] is None else str(item["revision"]))
        row.append("" if item.get(extra) is None else shown(item[extra]))
        table.add_row(*row)
    print_table(out, table)
    if page["next_cursor"]:
        out.print(
            f"{len(records)} shown; next page: --cursor {page['next_cursor']}", soft_wrap=True
        )
    else:
        out.print(f"{len(records)} shown; end of listing")


def render_explore(page: dict[str, Any]) -> None:
    out = console()
    title = f"{page['plane']} by {page['facet']} ({describe_filter(page['filter'])})"
    table = _table(out, title)
    table.add_column(page["facet"], overflow="fold")
    table.add_column("count", justify="right")
    table.add_column("drill down with", overflow="fold")
    for bucket in page["buckets"]:
        # quoted for the shell: a value is whatever a writer stored (spaces, $(...), quotes,
        # escape sequences)
        word = shell_word(bucket["narrow"])
        hint = _NO_HINT if word is None else f"--narrow {word}"
        table.add_row(shown(bucket["value"]), f"{bucket['count']:,}", hint)
    print_table(out, table)
    out.print(
        f"total {page['total']:,} · missing {page['missing']:,} · "
        f"more buckets {page['more_buckets']:,} · exact counts (truncated: no)"
    )


def render_get(hits: list[dict[str, Any]], *, full: bool) -> None:
    for hit in hits:
        record = dict(hit["record"])
        if not full:
            for key in ("embedding", "vector"):
                if isinstance(record.get(key), list):
                    record[key] = f"<{len(record[key])} numbers; --full shows them>"
        print(f"# {hit['kind']} {shown(hit['id'])}")
        # the same JSON, with what a terminal would act on (DEL, C1 controls, bidi
        # overrides: JSON lets them through) written as \u escapes
        print(json_visible(orjson.dumps(record, option=_JSON_OPTIONS).decode()))


def render_counts(title: str, planes: dict[str, dict[str, Any]], note: str) -> None:
    out = console()
    table = _table(out, title)
    for name in ("plane", "kind", "records"):
        table.add_column(name, justify="right" if name == "records" else "left")
    for plane, counts in planes.items():
        for kind, count in counts.items():
            if isinstance(count, bool):
                continue
            label = "idempotency entries" if kind == "idempotency" else kind
            table.add_row(plane, label, f"{count:,}")
    print_table(out, table)
    out.print(note, soft_wrap=True)


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{n} B"


def render_stats(report: dict[str, Any]) -> None:
    out = console()
    records = _table(out, "records")
    for name in ("plane", "kind", "records"):
        records.add_column(name, justify="right" if name == "records" else "left")
    for plane, info in report["planes"].items():
        for kind, count in info["records"].items():
            records.add_row(plane, kind, f"{count:,}")
    out.print(records)
    files = _table(out, "files")
    for name in ("plane", "file", "WAL", "idempotency", "expired", "schema", "dim", "sync"):
        files.add_column(name, justify="left" if name == "plane" else "right")
    for plane, info in report["planes"].items():
        files.add_row(
            plane,
            # PostgreSQL: the plane's tables with their indexes; its WAL is the server's
            _bytes(info["file_bytes"] if "file_bytes" in info else info["table_bytes"]),
            _bytes(info["wal_bytes"]) if "wal_bytes" in info else "-",
            f"{info['idempotency_entries']:,}",
            f"{info['idempotency_expired']:,}",
            f"{info['schema_version']} of {info['schema_latest']}",
            str(info.get("embedding_dim", "")),
            str(info.get("synchronous", "")),
        )
    out.print(files)
    for ledger in report["jti"]:
        if "problem" in ledger:
            out.print(f"jti ledger {ledger['path']}: {defanged(ledger['problem'])}", soft_wrap=True)
            continue
        sync = ledger.get("synchronous")  # PostgreSQL's durability is the server's own
        out.print(
            f"jti ledger {ledger['path']}: {ledger['entries']:,} ({ledger['expired']:,} expired)"
            + ("" if sync is None else f", synchronous {sync}"),
            soft_wrap=True,
        )
    if "replication" in report:
        render_replication(report["replication"])


def render_replication(info: dict[str, Any]) -> None:
    out = console()
    table = _table(out, f"replication (degraded past {info['max_lag_s']:g} s, {info['setting']})")
    for name in ("file", "status", "lag", "litestream", "restarts"):
        table.add_column(name, justify="right" if name in ("lag", "restarts") else "left")
    for name, state in info["files"].items():
        if not state["reporting"]:
            table.add_row(name, state["status"], "", "no supervisor has reported", "")
            continue
        table.add_row(
            name,
            state["status"],
            f"{state['lag_s']:,.1f} s",
            _litestream_column(state),
            str(state["restarts"]),
        )
    print_table(out, table)
    for name, state in info["files"].items():
        if state["reporting"]:
            out.print(f"{name} -> {state['replica']}", soft_wrap=True)


def _litestream_column(state: dict[str, Any]) -> str:
    if state.get("restorable") is False:
        return "replica holds nothing to restore from"
    if state["litestream_running"]:
        return "running"
    if state["supervisor_silent_s"] > SILENT_AFTER:
        return f"not running (supervisor silent {state['supervisor_silent_s']:,.0f} s)"
    return "not running"


def render_restore(report: dict[str, Any]) -> None:
    out = console()
    when = report["timestamp"] or "the latest position"
    out.print(f"restored from {report['from']} as of {when}", soft_wrap=True)
    table = _table(out, "restored files")
    for name in ("file", "position", "replicated at", "size", "took"):
        table.add_column(name, justify="right" if name in ("size", "took") else "left")
    for name, info in report["files"].items():
        at = info.get("replicated_at") or "?"
        took = f"{info['seconds']:.1f} s"
        table.add_row(name, info["txid"], at, _bytes(info["bytes"]), took)
    print_table(out, table)
    for name, info in report["files"].items():
        out.print(f"{name} -> {info['path']}", soft_wrap=True)
    for name in report["skipped"]:
        out.print(f"{name}: the replica holds none; it starts empty")
    render_check(report["check"])


def render_check(report: dict[str, Any]) -> None:
    out = console()
    # one line per plane and per problem, however long a path or URL: never cut by the
    # console's width (80 columns when not a terminal), so a script can read them
    checked = [*report["planes"].items(), *(("jti ledger", j) for j in report.get("jti", []))]
    for name, result in checked:
        if result["problems"]:
            count = len(result["problems"])
            out.print(f"{name}: {count} problem(s) in {result['path']}", soft_wrap=True)
            for problem in result["problems"]:  # a problem may name stored ids
                out.print(f"  - {defanged(problem)}", soft_wrap=True)
        else:
            out.print(f"{name}: ok ({result['path']})", soft_wrap=True)
    out.print("check passed" if report["ok"] else "check FAILED")
