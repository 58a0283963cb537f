"""``admin explore``: how many records hold each value of one facet, counted by the store.

The seed's explore pages through ``list`` up to ``scan_limit`` and may come back truncated;
the store aggregates at one snapshot instead (``AdminStore.count_by``), so every count is
exact and ``truncated`` is always false (``scan_limit`` is validated, then not needed).
Buckets sort by count descending, ties by value ascending, and are cut to ``limit``.
"""

from __future__ import annotations

from typing import Any

from ratatoskr.core.filters import Filter
from ratatoskr.ops.filters import check_facet
from ratatoskr.ops.listing import check_limit
from ratatoskr.ops.stores import PlaneStore

MAX_BUCKETS = 500
DEFAULT_BUCKETS = 20
MAX_SCAN_LIMIT = 50_000
DEFAULT_SCAN_LIMIT = 5_000


def explore(
    store: PlaneStore,
    plane: str,
    facet: str,
    flt: Filter,
    *,
    limit: int = DEFAULT_BUCKETS,
    scan_limit: int = DEFAULT_SCAN_LIMIT,
) -> dict[str, Any]:
    """Bucket counts of ``facet`` over the records ``flt`` admits (the seed's ExplorePage)."""
    check_facet(plane, facet)
    check_limit(limit, MAX_BUCKETS, "limit")
    check_limit(scan_limit, MAX_SCAN_LIMIT, "scan_limit")
    counts = store.count_by(flt, facet)
    ordered = sorted(counts.values, key=lambda kv: (-kv[1], kv[0]))
    return {
        "plane": plane,
        "facet": facet,
        "filter": flt.to_json(),
        "buckets": [
            {"value": value, "count": count, "narrow": f"{facet}={value}"}
            for value, count in ordered[:limit]
        ],
        "total": counts.total,
        "missing": counts.missing,
        "more_buckets": max(0, len(ordered) - limit),
        "truncated": False,
        "scan_limit": scan_limit,
    }
