"""A plane as a tree, built from explore and narrow only.

A node is the path of ``facet=value`` pairs that narrows to it (the CLI's ``--narrow``).
Drawing the tree at a node explores each ancestor by the facet its path step chose (so the
siblings on the way down are shown with their counts) and the node itself by the facet the
operator picked, by default the next one of the plane's drill order that has any value.
Every count is explore's own: bucket counts, ``total``, ``missing``, ``more_buckets`` and
``truncated``, shown as the CLI shows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from ratatoskr.core.filters import FACETS, Filter
from ratatoskr.ops import explore as explore_ops
from ratatoskr.ops.filters import narrow
from ratatoskr.ops.stores import PlaneStore

Pair = tuple[str, str]


@dataclass
class Level:
    """One explore: a node's children by one facet."""

    facet: str
    nodes: list[TreeNode]
    total: int
    missing: int
    more_buckets: int
    truncated: bool
    limit: int
    more_href: str | None = None
    plane: str = ""
    parent: list[Pair] = field(default_factory=list)  # the node whose children these are


@dataclass
class TreeNode:
    """One bucket, turned back into a node by narrow."""

    facet: str
    value: str
    count: int
    href: str
    current: bool = False
    on_path: bool = False
    children: Level | None = None


@dataclass
class Tree:
    plane: str
    path: list[Pair]
    count: int
    root: Level | None
    by: str | None
    choices: list[dict[str, Any]] = field(default_factory=list)


def parse_path(plane: str, raw: Sequence[str]) -> list[Pair]:
    """``at`` query values (``facet=value``) to pairs; each facet at most once."""
    pairs: list[Pair] = []
    for item in raw:
        facet, sep, value = item.partition("=")
        if not sep or facet not in FACETS[plane]:
            raise ValueError(
                f"a node step is FACET=VALUE with a facet of {', '.join(FACETS[plane])}"
            )
        if any(f == facet for f, _ in pairs):
            raise ValueError(f"the node path names {facet} twice")
        pairs.append((facet, value))
    return pairs


def filter_of(plane: str, path: Sequence[Pair]) -> Filter:
    flt = Filter()
    for facet, value in path:
        flt = narrow(plane, flt, facet, value)
    return flt


def go_to(plane: str, path: Sequence[Pair], facet: str, value: str) -> str:
    """The node a value typed beside a level leads to: past the buckets shown (at most 500
    are), a value is reached by its name, as ``--narrow`` reaches it."""
    target = [*path, (facet, value)]
    parse_path(plane, [f"{f}={v}" for f, v in target])  # a facet it may use, once
    return href(plane, target)


def href(plane: str, path: Sequence[Pair], **extra: str | int | None) -> str:
    query: list[tuple[str, str]] = [("at", f"{f}={v}") for f, v in path]
    query += [(k, str(v)) for k, v in extra.items() if v is not None]
    return f"/tree/{plane}" + (f"?{urlencode(query)}" if query else "")


def build(store: PlaneStore, plane: str, path: list[Pair], *, by: str | None, limit: int) -> Tree:
    """The tree from the plane's root down to ``path``, with the node's children by ``by``."""
    unused = [f for f in FACETS[plane] if f not in {p for p, _ in path}]
    if by is not None and by not in unused:
        raise ValueError(f"group by one of {', '.join(unused) or 'nothing: every facet is used'}")
    asked = by
    filters = [Filter()]
    for facet, value in path:
        filters.append(narrow(plane, filters[-1], facet, value))
    node_page = None
    if by is not None:
        node_page = explore_ops.explore(store, plane, by, filters[-1], limit=limit)
    else:
        for facet in unused:  # the first facet of the drill order that has a value here
            page = explore_ops.explore(store, plane, facet, filters[-1], limit=limit)
            if node_page is None or page["buckets"]:
                by, node_page = facet, page
            if page["buckets"]:
                break
    bigger = min(explore_ops.MAX_BUCKETS, limit * 5)
    more = href(plane, path, by=asked, limit=bigger) if limit < explore_ops.MAX_BUCKETS else None
    levels = [
        _level(plane, path[:depth], page, limit, more, chosen=path[depth])
        for depth, page in enumerate(
            explore_ops.explore(store, plane, facet, filters[depth], limit=limit)
            for depth, (facet, _) in enumerate(path)
        )
    ]
    if node_page is not None:
        count = int(node_page["total"])
        levels.append(_level(plane, path, node_page, limit, more, chosen=None))
    else:
        count = _count(store, plane, filters[-1])
    for depth, (facet, value) in enumerate(path):
        # a path value cut from its siblings by the limit is still drawn, with its own count
        below = levels[depth + 1] if depth + 1 < len(levels) else None
        chosen = next((n for n in levels[depth].nodes if n.on_path), None)
        if chosen is None:
            total = below.total if below is not None else count
            chosen = TreeNode(facet, value, total, href(plane, path[: depth + 1]), on_path=True)
            levels[depth].nodes.append(chosen)
        chosen.current = depth == len(path) - 1
        chosen.children = below
    choices = [{"facet": f, "href": href(plane, path, by=f), "current": f == by} for f in unused]
    return Tree(plane, path, count, levels[0] if levels else None, by, choices)


def _count(store: PlaneStore, plane: str, flt: Filter) -> int:
    """Records at a node with no facet left to group by: any facet's explore total."""
    page = explore_ops.explore(store, plane, FACETS[plane][0], flt, limit=1)
    return int(page["total"])


def _level(
    plane: str,
    parent: Sequence[Pair],
    page: dict[str, Any],
    limit: int,
    more: str | None,
    *,
    chosen: Pair | None,
) -> Level:
    facet = page["facet"]
    nodes = [
        TreeNode(
            facet,
            b["value"],
            b["count"],
            href(plane, [*parent, (facet, b["value"])]),
            on_path=chosen == (facet, b["value"]),
        )
        for b in page["buckets"]
    ]
    return Level(
        facet,
        nodes,
        page["total"],
        page["missing"],
        page["more_buckets"],
        page["truncated"],
        limit,
        more if page["more_buckets"] else None,
        plane,
        list(parent),
    )
