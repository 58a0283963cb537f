"""Admin filters as the CLI takes them: ``facet=value`` pairs, validated and narrowed.

The seed's ``Facet::narrow`` turns an explore bucket back into a filter field; here the
facets are the lattice axes, ``origin`` (memory) and ``kind`` (affect: state or event). The
filter itself (``core.filters.Filter``) is translated by each store for its own backend, so
counts and listings never read record content.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ratatoskr.core.filters import FACETS, KINDS, PLANES, Filter, check_scope
from ratatoskr.core.scope import AXES, Scope


def check_plane(plane: str) -> str:
    if plane not in PLANES:
        raise ValueError(f"plane must be one of {', '.join(PLANES)}")
    return plane


def check_facet(plane: str, facet: str) -> str:
    if facet not in FACETS[check_plane(plane)]:
        raise ValueError(f"facet of the {plane} plane must be one of {', '.join(FACETS[plane])}")
    return facet


def narrow(plane: str, base: Filter, facet: str, value: str) -> Filter:
    """The seed's narrow: replace the one field ``facet`` targets with ``value``."""
    check_facet(plane, facet)
    if not isinstance(value, str):
        raise ValueError(f"a {facet} value must be a string")
    if facet == "origin":  # any string a writer gave, the empty one included
        return replace(base, origin=value)
    if facet == "kind":
        kinds = KINDS[plane]
        if value not in kinds:
            raise ValueError(f"kind must be one of {', '.join(kinds)}")
        return replace(base, kind=value)
    return replace(base, scope=check_scope({**base.scope, facet: value}))


def parse_pairs(plane: str, pairs: Iterable[str], base: Filter | None = None) -> Filter:
    """``facet=value`` pairs (the CLI's ``--scope`` and ``--narrow``) narrowed in order."""
    result = base or Filter()
    for pair in pairs:
        facet, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(
                f"expected FACET=VALUE with a facet of {', '.join(FACETS[check_plane(plane)])}"
            )
        result = narrow(plane, result, facet, value)
    return result


def parse_scope(pairs: Iterable[str]) -> Scope:
    """``axis=value`` pairs over the lattice axes only (erase takes a scope, not a filter)."""
    scope: Scope = {}
    for pair in pairs:
        axis, sep, value = pair.partition("=")
        if not sep or axis not in AXES:
            raise ValueError(f"--scope takes axis=value with an axis of {', '.join(AXES)}")
        if axis in scope:
            raise ValueError(f"--scope names {axis} twice: a scope holds one value per axis")
        scope[axis] = value
    return check_scope(scope)
