"""The plane framework: a plane is a name, a verb table, a descriptor and a store.

Every plane is served by the same endpoint; what differs is only its ``VerbTable``. A verb is
split in two steps so the wire can keep its order of checks: ``prepare`` (pure validation and
scope confinement, no storage: 400/403) runs before the replay check, ``execute`` (the store)
after it. A read-only verb may also offer ``quick``: ``execute`` bounded to work cheap enough
for the wire's event loop, answering ``DEFERRED`` (nothing done) when it is not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import InvalidArguments, UnknownVerb, Unsupported
from ratatoskr.wire.envelope import decode_object

Prepare = Callable[[Mapping[str, Any], CallContext], Any]
Execute = Callable[[Any, Any, CallContext], Any]
Describe = Callable[[Any], dict[str, Any]]


class BodySplit(Protocol):
    """Part of a body a verb read itself (memory: the vectors, into float32): the rest,
    ``reduced``, is decoded as any body is, then ``restore`` puts the part back; ``False``
    when the decoded rest is not the shape the split saw (the body is decoded whole)."""

    @property
    def reduced(self) -> bytes: ...
    def restore(self, obj: dict[str, Any]) -> bool: ...


Split = Callable[[bytes], BodySplit | None]


def decode_split(body: bytes, split: Split | None) -> dict[str, Any]:
    """``decode_object(body)``, with the part ``split`` reads put back in place. A split
    must leave a body that is valid JSON exactly when ``body`` is (the memory plane's
    replaces arrays of numbers by ``[]``), so a refusal is the same refusal."""
    parts = split(body) if split is not None else None
    if parts is None:
        return decode_object(body)
    obj = decode_object(parts.reduced)
    return obj if parts.restore(obj) else decode_object(body)


class Deferred:
    """What a ``quick`` execute answers when the call needs the threadpool after all."""

    def __repr__(self) -> str:
        return "DEFERRED"


DEFERRED = Deferred()


def no_args(args: Mapping[str, Any], ctx: CallContext) -> None:
    """``prepare`` of a verb that takes no arguments (the framework refuses any key)."""
    return None


@dataclass(frozen=True)
class Verb:
    """One verb of a plane.

    ``args`` lists the argument keys the verb takes (any other key is invalid); ``counted``
    names list arguments whose length the call log records; ``args_schema`` documents the
    arguments in the OpenAPI description; ``quick`` is the bounded execute above;
    ``split`` reads part of the verb's body itself before the JSON decode (memory: the
    vectors straight into float32; see ``decode_split``).
    """

    name: str
    prepare: Prepare
    execute: Execute
    mutating: bool = False
    args: frozenset[str] = frozenset()
    counted: tuple[str, ...] = ()
    args_schema: Mapping[str, Any] = field(default_factory=dict)
    quick: Execute | None = None
    split: Split | None = None

    def __post_init__(self) -> None:
        if self.quick is not None and self.mutating:
            raise ValueError(f"verb {self.name}: a mutating verb must run in the threadpool")


@dataclass(frozen=True)
class VerbTable:
    """What a plane module defines: its verbs, the wire verbs it does not serve, its descriptor.

    ``describe(store)`` returns the handshake entry besides ``verbs``: at least
    ``capabilities`` and ``limits``, plus anything plane-specific (memory: ``embedding_dim``).
    """

    plane: str
    verbs: tuple[Verb, ...]
    unsupported: frozenset[str]
    describe: Describe

    def __post_init__(self) -> None:
        names = [v.name for v in self.verbs]
        if len(set(names)) != len(names):
            raise ValueError(f"plane {self.plane} lists a verb twice")
        if self.unsupported & set(names):
            raise ValueError(f"plane {self.plane} both serves and refuses a verb")

    @property
    def verb_names(self) -> list[str]:
        return [v.name for v in self.verbs]

    @cached_property
    def by_name(self) -> Mapping[str, Verb]:
        return {v.name: v for v in self.verbs}


# the reason a plane is down because the jti ledger cannot be used, whatever its store says
LEDGER_DOWN = "the jti ledger cannot be used ({}): every mutating call is refused"


@dataclass(frozen=True)
class Plane:
    """A verb table bound to the store that serves it.

    ``ledger_problem`` (set by the wire from its replay guard) says why the jti ledger
    cannot be used, or None: every mutating call needs it, so while it answers a reason the
    plane's health is ``down`` with it, however well the store is.
    """

    table: VerbTable
    store: Any
    ledger_problem: Callable[[], str | None] | None = None

    @property
    def name(self) -> str:
        return self.table.plane

    def verb(self, name: str) -> Verb:
        """The verb named; 404 when the wire has no such verb, 501 when it is not served."""
        found = self.table.by_name.get(name)
        if found is not None:
            return found
        if name in self.table.unsupported:
            raise Unsupported(f"this store does not advertise the verb {name}")
        raise UnknownVerb(f"the {self.name} plane has no such verb")

    def decode(self, name: str, body: bytes) -> dict[str, Any]:
        """A body for the verb ``name`` (the token's claim), decoded with the verb's split."""
        found = self.table.by_name.get(name)
        return decode_split(body, found.split if found is not None else None)

    def prepare(self, verb: Verb, args: Mapping[str, Any], ctx: CallContext) -> Any:
        unknown = set(args) - verb.args
        if unknown:
            allowed = ", ".join(sorted(verb.args)) or "none"
            raise InvalidArguments(
                f"args hold {len(unknown)} key(s) {verb.name} does not take (allowed: {allowed})"
            )
        return verb.prepare(args, ctx)

    def execute(self, verb: Verb, prepared: Any, ctx: CallContext) -> Any:
        result = verb.execute(self.store, prepared, ctx)
        if verb.name == "health" and isinstance(result, dict):
            return self._with_ledger(result)
        return result

    def execute_quick(self, verb: Verb, prepared: Any, ctx: CallContext) -> Any:
        """``verb.quick``'s answer, or ``DEFERRED`` when it has none or defers."""
        if verb.quick is None:
            return DEFERRED
        return verb.quick(self.store, prepared, ctx)

    def handshake(self) -> dict[str, Any]:
        return {"verbs": self.table.verb_names, **self.table.describe(self.store)}

    def health(self) -> dict[str, Any]:
        """The store's health; a store whose health check fails is down, never a 500."""
        try:
            health = self.store.health()
            status = health.get("status")
            reason = health.get("reason")
        except Exception:
            return {"status": "down", "reason": "the health check failed"}
        if status not in ("ok", "degraded", "down"):
            return {"status": "down", "reason": "the health check answered an unknown status"}
        return self._with_ledger(
            {"status": status, "reason": reason if isinstance(reason, str) else None}
        )

    def _with_ledger(self, health: dict[str, Any]) -> dict[str, Any]:
        """``health``, ``down`` when the jti ledger cannot be used (a plane already down is
        left as it is: its own reason comes first, and the ledger is not asked)."""
        if self.ledger_problem is None or health.get("status") == "down":
            return health
        try:
            problem = self.ledger_problem()
        except Exception:
            problem = "it cannot be read"
        if problem is None:
            return health
        return {**health, "status": "down", "reason": LEDGER_DOWN.format(problem)}
