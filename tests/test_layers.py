"""The layers depend one way: each package imports only the packages below it.

    cli, console      entry points
    server            app factory, settings, metrics, logs, gunicorn config, store threads
    ops               the operator API, over the plane stores' methods
    wire              the protocol: envelope, tokens, keys, replay, plane framework, HTTP
    memory, affect    the planes: rules, verb tables, stores, the search engine
    sqlite, postgres  the shared pieces of each storage backend
    core              errors, scope lattice, call context, canonical JSON, record ids

A plane's verb table uses the wire's plane types (``wire.plane``, ``wire.verbs``); the rest
of the wire is above the planes. ``provider`` holds the seed contract's names: it may reach
any layer, lazily, and nothing imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ratatoskr

ROOT = Path(ratatoskr.__file__).parent
WIRE_TYPES = {"ratatoskr.wire.plane", "ratatoskr.wire.verbs"}
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "sqlite": {"core"},
    "postgres": {"core", "sqlite"},
    "memory": {"core", "sqlite", "postgres"},
    "affect": {"core", "sqlite", "postgres", "memory"},
    "wire": {"core"},
    "ops": {"core", "sqlite", "postgres", "memory", "affect"},
    "server": {"core", "sqlite", "postgres", "memory", "affect", "wire", "ops"},
    "client": {"core", "wire"},
    "cli": {
        "core",
        "sqlite",
        "postgres",
        "memory",
        "affect",
        "wire",
        "ops",
        "server",
        "client",
        "console",
    },
    "console": {"core", "sqlite", "postgres", "memory", "affect", "ops", "server"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            package_dir = ROOT.parent.joinpath(*node.module.split("."))
            if package_dir.is_dir():  # ``from ratatoskr.wire import verbs``: the modules named
                found.update(f"{node.module}.{a.name}" for a in node.names)
            else:
                found.add(node.module)
    # ``from ratatoskr import __version__`` reads the package's own metadata
    return {n for n in found if n.startswith("ratatoskr.") and n != "ratatoskr.__version__"}


def _package(module: str) -> str:
    return module.split(".")[1]


def test_every_import_points_down() -> None:
    wrong: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if len(parts) < 2 or parts[0] == "provider":
            continue
        package = parts[0]
        assert package in ALLOWED, f"{package}/ is a new package: give it a layer here"
        for name in _imports(path):
            target = _package(name)
            if target == package or target in ALLOWED[package]:
                continue
            if package in ("memory", "affect") and any(
                name == t or name.startswith(t + ".") for t in WIRE_TYPES
            ):
                continue
            wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert wrong == []


def test_nothing_imports_the_seed_facade() -> None:
    users = [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if path.relative_to(ROOT).parts[0] != "provider"
        and any(_package(n) == "provider" for n in _imports(path))
    ]
    assert users == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycle() -> None:
    """No module reaches itself through imports, lazy ones inside functions included."""
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        graph[_module_name(path)] = set()
    for path in ROOT.rglob("*.py"):
        graph[_module_name(path)] = {n for n in _imports(path) if n in graph}
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            cycles.append(trail[trail.index(module) :] + [module])
            return
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*trail, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert cycles == []


def test_every_import_is_absolute() -> None:
    """A relative import (``from ..wire import http``) would pass the checks above unseen."""
    relative = [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if any(
            isinstance(node, ast.ImportFrom) and node.level > 0
            for node in ast.walk(ast.parse(path.read_text()))
        )
    ]
    assert relative == []


# every table of a plane, by the package that alone may name it
PLANE_TABLES = {
    "memory": (
        "memory_chunks",
        "memory_vec",
        "memory_changes",
        "memory_idempotency",
        "memory_meta",
    ),
    "affect": ("affect_states", "affect_events", "affect_idempotency", "affect_meta"),
}


def test_a_planes_tables_are_named_only_inside_its_package() -> None:
    """Everyone else calls the plane's stores and helpers: a table renamed or split is one
    package's change."""
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        package = path.relative_to(ROOT).parts[0]
        text = path.read_text()
        for plane, tables in PLANE_TABLES.items():
            if package == plane or package == "provider":
                continue
            wrong += [f"{path.relative_to(ROOT)} names {t}" for t in tables if t in text]
    assert wrong == []


def test_every_module_is_under_500_lines() -> None:
    """Split by concept before a module grows past what one reading holds."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in ROOT.rglob("*.py")
        if (n := len(path.read_text().splitlines())) >= 500
    }
    assert long == {}
