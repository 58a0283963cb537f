"""The scope lattice of wire v0.6: validation, matching and confinement by the token scope.

A scope is a flat object from lattice axes to non-empty strings. A record is inside a
filter when its scope holds every pair of the filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ratatoskr.core.errors import InvalidArguments, InvalidFilter, ScopeForbidden

AXES: tuple[str, ...] = ("tenant", "group", "end_user", "agent_self")
MAX_VALUE_CHARS = 256
MAX_SCOPE_ANY = 64

Scope = dict[str, str]


def validate_scope(value: Any, field: str) -> Scope:
    """Check one scope object: flat, lattice axes only, string values of 1..256 chars."""
    if not isinstance(value, dict):
        raise InvalidArguments(f"{field} must be an object")
    for axis, axis_value in value.items():
        if axis not in AXES:
            raise InvalidFilter(f"{field} names an axis outside the lattice {list(AXES)}")
        if not isinstance(axis_value, str) or not 1 <= len(axis_value) <= MAX_VALUE_CHARS:
            raise InvalidArguments(
                f"{field}.{axis} must be a string of 1..{MAX_VALUE_CHARS} characters"
            )
    return dict(value)


def validate_filter(scope_all: Any, scope_any: Any) -> tuple[Scope, list[Scope]]:
    """Validate the two filter fields of a filtered read (shape first, then the lattice)."""
    all_ = {} if scope_all is None else scope_all
    any_ = [] if scope_any is None else scope_any
    if not isinstance(all_, dict):
        raise InvalidArguments("scope_all must be an object")
    if not isinstance(any_, list):
        raise InvalidArguments("scope_any must be a list of objects")
    if len(any_) > MAX_SCOPE_ANY:
        raise InvalidArguments(f"scope_any holds more than {MAX_SCOPE_ANY} elements")
    for i, element in enumerate(any_):
        if not isinstance(element, dict):
            raise InvalidArguments(f"scope_any[{i}] must be an object")
    return (
        validate_scope(all_, "scope_all"),
        [validate_scope(e, f"scope_any[{i}]") for i, e in enumerate(any_)],
    )


def contains(record_scope: Mapping[str, str], required: Mapping[str, str]) -> bool:
    """True when ``record_scope`` holds every pair of ``required``."""
    return all(record_scope.get(axis) == value for axis, value in required.items())


def matches(record_scope: Mapping[str, str], scope_all: Scope, scope_any: Sequence[Scope]) -> bool:
    """The composed v0.6 filter: scope_all AND (scope_any empty OR one element matches)."""
    if not contains(record_scope, scope_all):
        return False
    return not scope_any or any(contains(record_scope, e) for e in scope_any)


def confine_filter(
    scope_all: Scope, scope_any: list[Scope], token_scope: Mapping[str, str]
) -> tuple[Scope, list[Scope]]:
    """AND the token scope into a filter; a filter that pins a token axis elsewhere is 403."""
    for field, element in [("scope_all", scope_all)] + [
        (f"scope_any[{i}]", e) for i, e in enumerate(scope_any)
    ]:
        for axis, value in token_scope.items():
            if axis in element and element[axis] != value:
                raise ScopeForbidden(f"{field}.{axis} lies outside the token scope")
    return {**scope_all, **token_scope}, scope_any


def require_inside(
    record_scope: Mapping[str, str], token_scope: Mapping[str, str], what: str
) -> None:
    """A write outside the token scope is refused with nothing written."""
    if not contains(record_scope, token_scope):
        raise ScopeForbidden(f"{what} lies outside the token scope")
