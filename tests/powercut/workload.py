"""What the power-cut runs write, and what each must find again after the cut.

A lane is one client writing one call at a time over its own ids (memory chunks, affect
states, affect events), so after a cut exactly one of its calls can have an unknown outcome:
the one in flight. Every verb that writes is drawn: ``upsert_many`` and ``put_many`` (each
with ``expected_revisions``, so a lane whose picture of the store drifted is refused at once),
``delete_many`` on both planes and ``append_events``. Each call carries a fresh token (the
jti ledger claims it) and the keyed ones a fresh idempotency key (an entry in the plane file).

After the server is back, ``Lane.verify`` compares what the server answers with what was
acknowledged: each record at its acknowledged revision and content (or, for the call in
flight, at either outcome), each acknowledged event present, nothing the lane never wrote.
Then the last acknowledged call is sent again twice: with its own token (the jti ledger must
refuse it) and with the same key and body under a fresh token (the idempotency entry must
answer ``replayed``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson

from tests.server.harness import envelope, token

SCOPE = {"tenant": "acme"}
IDS_PER_PLANE = 6
# upsert, memory delete, put, affect delete, append: the weights of each draw
VERBS = (
    ("memory", "upsert_many", 3),
    ("memory", "delete_many", 1),
    ("affect", "put_many", 3),
    ("affect", "delete_many", 1),
    ("affect", "append_events", 2),
)
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

Record = dict[str, Any]
# a record id's state: (revision, record as written), or None when it does not exist
State = tuple[int, Record] | None


@dataclass(frozen=True)
class Sent:
    """One request exactly as sent: sending it again replays its token."""

    plane: str
    verb: str
    body: bytes
    bearer: str
    keyed: bool


@dataclass
class Effect:
    """What a call does when it is applied: the states it sets in ``plane``, the events it
    appends."""

    plane: str
    records: dict[str, State] = field(default_factory=dict)
    events: dict[str, Record] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    """One lane's records per plane and its events."""

    states: dict[str, dict[str, State]]
    events: dict[str, Record]

    def then(self, effect: Effect) -> Snapshot:
        states = {plane: dict(ids) for plane, ids in self.states.items()}
        states[effect.plane].update(effect.records)
        return Snapshot(states, {**self.events, **effect.events})

    def same(self, other: Snapshot, plane: str) -> bool:
        return not self.difference(other, plane)

    def difference(self, other: Snapshot, plane: str) -> str:
        """What differs from ``other`` in ``plane`` (empty when nothing does), by id."""
        out = []
        for rid, state in self.states[plane].items():
            found = other.states[plane].get(rid)
            if not _same(state, found):
                out.append(f"{plane} {rid} is {_show(found)}, expected {_show(state)}")
        if plane != "affect":  # events live in the affect file
            return "; ".join(out)
        missing = sorted(self.events.keys() - other.events.keys())
        extra = sorted(other.events.keys() - self.events.keys())
        changed = sorted(
            e for e in self.events.keys() & other.events.keys() if self.events[e] != other.events[e]
        )
        for what, ids in (("missing", missing), ("never written", extra), ("changed", changed)):
            if ids:
                out.append(f"events {what}: {ids}")
        return "; ".join(out)


@dataclass
class Findings:
    """What one verification found, per kind."""

    checked: int = 0
    lost: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    jti_lost: list[str] = field(default_factory=list)
    idempotency_lost: list[str] = field(default_factory=list)

    def add(self, other: Findings) -> None:
        self.checked += other.checked
        self.lost += other.lost
        self.wrong += other.wrong
        self.jti_lost += other.jti_lost
        self.idempotency_lost += other.idempotency_lost


def request(client: httpx.Client, sent: Sent) -> httpx.Response:
    return client.post(
        f"/bifrost/{sent.plane}-call",
        content=sent.body,
        headers={"Authorization": f"Bearer {sent.bearer}", "Content-Type": "application/json"},
        timeout=30,
    )


def make(plane: str, verb: str, args: dict[str, Any], keyed: bool) -> Sent:
    body = envelope(verb, args)
    return Sent(plane, verb, body, token(body, plane, verb, scope=SCOPE), keyed)


class Lane:
    """One writer's ids, what was acknowledged for them, and the call in flight."""

    def __init__(self, index: int, seed: int, dim: int) -> None:
        self.name = f"lane{index}"
        self.rng = random.Random(seed * 1000 + index)
        self.dim = dim
        self.seq = 0
        # the state the last verification found, and the calls acknowledged since, in order
        self.baseline = Snapshot(
            {
                "memory": {f"{self.name}-m{i}": None for i in range(IDS_PER_PLANE)},
                "affect": {f"{self.name}-a{i}": None for i in range(IDS_PER_PLANE)},
            },
            {},
        )
        self.current = self.baseline
        self.log: list[Effect] = []
        self.names: list[str] = []
        self.in_flight: tuple[str, Effect] | None = None
        self.last_acked: tuple[Sent, Effect] | None = None
        self.last_keyed: tuple[Sent, Effect] | None = None
        self.acknowledged = 0

    # -- writing -------------------------------------------------------------------------

    def draw(self) -> tuple[Sent, Effect, dict[str, Any]]:
        """The next call, what it does, and the result it must answer."""
        self.seq += 1
        plane, verb, _ = self.rng.choices(VERBS, weights=[w for *_, w in VERBS])[0]
        key = f"{self.name}-{self.seq}"
        states = self.current.states[plane]
        if verb in ("upsert_many", "put_many"):
            ids = self.rng.sample(sorted(states), self.rng.randint(1, 3))
            effect = Effect(plane)
            records = []
            for rid in ids:
                revision = _revision(states[rid]) + 1
                record = self._record(plane, rid, revision)
                effect.records[rid] = (revision, record)
                records.append(record)
            args = {
                "records": records,
                "idempotency_key": key,
                "expected_revisions": {rid: _revision(states[rid]) for rid in ids},
            }
            counted = "upserted" if plane == "memory" else "written"
            return make(plane, verb, args, True), effect, {counted: len(ids), "replayed": False}
        if verb == "delete_many":
            rid = self.rng.choice(sorted(states))
            effect = Effect(plane, records={rid: None})
            expected = {"deleted": int(states[rid] is not None)}
            return make(plane, verb, {"ids": [rid]}, False), effect, expected
        events = [self._event(i) for i in range(self.rng.randint(1, 2))]
        effect = Effect(plane, events={e["id"]: e for e in events})
        args = {"events": events, "idempotency_key": key}
        return make(plane, verb, args, True), effect, {"appended": len(events), "replayed": False}

    def _record(self, plane: str, rid: str, revision: int) -> Record:
        mark = f"{rid} r{revision} s{self.seq}"
        if plane == "affect":
            return {"id": rid, "scope": SCOPE, "mood": mark, "valence": revision / 8}
        # multiples of 1/8: float32-exact, so the stored vector reads back as sent
        head = [1.0, (self.seq % 7 + 1) / 8]
        vector = head + [0.0] * (self.dim - len(head))
        return {"id": rid, "embedding": vector, "scope": SCOPE, "distillate": mark}

    def _event(self, i: int) -> Record:
        at = (EPOCH + timedelta(milliseconds=self.seq * 10 + i)).isoformat().replace("+00:00", "Z")
        return {"id": f"{self.name}-e{self.seq}-{i}", "scope": SCOPE, "at": at, "n": self.seq}

    def write(self, client: httpx.Client, problems: list[str]) -> bool:
        """One call; False once an answer is not an acknowledgement (the cut, or a fault)."""
        sent, effect, expected = self.draw()
        self.in_flight = (sent.verb, effect)
        try:
            response = request(client, sent)
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            code = _code(response)
            if code.endswith(("revision_mismatch", "idempotency_conflict", "event_conflict")):
                problems.append(f"{self.name} {sent.plane}.{sent.verb} refused: {code}")
            return False
        result = response.json()["result"]
        if result != expected:
            problems.append(f"{self.name} {sent.plane}.{sent.verb} answered {result}")
            return False
        self.current = self.current.then(effect)
        self.log.append(effect)
        self.names.append(
            f"{sent.plane}.{sent.verb} {sorted(effect.records) or sorted(effect.events)}"
        )
        self.in_flight = None
        self.last_acked = (sent, effect)
        if sent.keyed:
            self.last_keyed = (sent, effect)
        self.acknowledged += 1
        return True

    # -- after the cut -------------------------------------------------------------------

    def verify(self, client: httpx.Client, found_events: dict[str, Record]) -> Findings:
        """Compare the served state with the acknowledged calls, then adopt the served one.

        Per plane file, the served state must be the state after every acknowledged call
        (and maybe the one in flight, whole): then nothing was lost. Failing that, the state
        after a prefix of them: the calls past it are lost (only the last commits of that
        file: what NORMAL may lose). Anything else (a state no prefix explains, a call
        applied in part) is wrong."""
        out = Findings(checked=len(self.log))
        served = Snapshot(
            {p: read_states(client, p, sorted(ids)) for p, ids in self.baseline.states.items()},
            {e: ev for e, ev in found_events.items() if e.startswith(self.name + "-")},
        )
        for plane in self.baseline.states:
            mine = [i for i, effect in enumerate(self.log) if effect.plane == plane]
            prefixes = [self.baseline]
            for i in mine:
                prefixes.append(prefixes[-1].then(self.log[i]))
            candidates = [(len(mine), prefixes[-1])]
            if self.in_flight is not None and self.in_flight[1].plane == plane:
                candidates.insert(0, (len(mine), prefixes[-1].then(self.in_flight[1])))
            candidates += [(k, prefixes[k]) for k in range(len(mine) - 1, -1, -1)]
            kept = next((k for k, snap in candidates if snap.same(served, plane)), None)
            if kept is None:
                out.wrong.append(f"{self.name}: {prefixes[-1].difference(served, plane)}")
            else:
                out.lost += [f"{self.name}: {self.names[i]}" for i in mine[kept:]]
        self.baseline = self.current = served
        self.log, self.names, self.in_flight = [], [], None
        return out

    def resend(self, client: httpx.Client) -> Findings:
        """The last acknowledged call again: its token must be refused as used, and its key
        and body under a fresh token must be answered as a replay. A re-sent call that runs
        (NORMAL lost its token's claim or its key's entry) is logged as acknowledged, so
        that the next verification expects what it wrote."""
        out = Findings()
        if self.last_acked is not None:
            sent, effect = self.last_acked
            again = request(client, sent)
            if _code(again) != "auth.token_replayed":
                out.jti_lost.append(f"{self.name}: a used token was accepted again")
                self._ran_again(again, sent, effect)
        if self.last_keyed is not None:
            sent, effect = self.last_keyed
            fresh = make(sent.plane, sent.verb, orjson.loads(sent.body)["args"], True)
            again = request(client, fresh)
            if again.status_code != 200 or again.json()["result"].get("replayed") is not True:
                out.idempotency_lost.append(f"{self.name}: {sent.verb} with its key ran again")
                self._ran_again(again, sent, effect)
        self.last_acked = self.last_keyed = None
        return out

    def _ran_again(self, response: httpx.Response, sent: Sent, effect: Effect) -> None:
        if response.status_code == 200:
            if response.json()["result"].get("replayed") is True:
                return
            self.current = self.current.then(effect)
            self.log.append(effect)
            self.names.append(f"{sent.plane}.{sent.verb} sent again")
            self.acknowledged += 1
        elif not _code(response).endswith("revision_mismatch"):
            self.in_flight = (sent.verb, effect)  # an outcome not known: either


def read_states(client: httpx.Client, plane: str, ids: list[str]) -> dict[str, State]:
    """Each of ``ids`` as served: (revision, record), or None when absent."""
    sent = make(plane, "get_many", {"ids": ids}, False)
    response = request(client, sent)
    response.raise_for_status()
    out: dict[str, State] = dict.fromkeys(ids)
    for found in response.json()["result"]:
        record = dict(found)
        revision = int(record.pop("revision"))
        out[record["id"]] = (revision, record)
    return out


def read_events(client: httpx.Client) -> dict[str, Record]:
    """Every event in the scope, following the cursor."""
    found: dict[str, Record] = {}
    cursor: str | None = None
    while True:
        args: dict[str, Any] = {"scope_all": SCOPE, "limit": 1000}
        if cursor is not None:
            args["cursor"] = cursor
        response = request(client, make("affect", "read_events", args, False))
        response.raise_for_status()
        page = response.json()["result"]
        found.update({e["id"]: e for e in page["events"]})
        cursor = page["next_cursor"]
        if cursor is None:
            return found


def _revision(state: State) -> int:
    return 0 if state is None else state[0]


def _same(a: State, b: State) -> bool:
    if a is None or b is None:
        return a is b
    return a[0] == b[0] and orjson.dumps(a[1], option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        b[1], option=orjson.OPT_SORT_KEYS
    )


def _show(state: State) -> str:
    return "absent" if state is None else f"revision {state[0]}"


def _code(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return f"http {response.status_code}"
