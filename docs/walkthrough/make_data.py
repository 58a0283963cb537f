"""The three files the operations walk-through imports (docs/operations.md, "A walk-through").

    python docs/walkthrough/make_data.py [DIR]

writes chunks.jsonl (240 memory chunks at dimension 8), events.jsonl (90 affect events) and
states.jsonl (4 affect states) into DIR (default: the current directory), the same bytes on
every run: two tenants, three users in acme, one in beta.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

DIM = 8
USERS = [("acme", "alice")] * 68 + [("acme", "bob")] * 62 + [("acme", "carol")] * 62
USERS += [("beta", "dave")] * 48


def main(out: Path) -> None:
    rng = random.Random(20250601)
    order = list(USERS)
    rng.shuffle(order)
    with open(out / "chunks.jsonl", "w") as chunks:
        for i, (tenant, user) in enumerate(order):
            record = {
                "id": f"chunk-{i:04d}",
                "embedding": [round(rng.uniform(-1, 1), 6) for _ in range(DIM)],
                "scope": {"tenant": tenant, "end_user": user, "agent_self": "ratatoskr-demo"},
                "origin": rng.choice(["document", "chat"]),
                "distillate": f"note {i} of the walk-through",
            }
            chunks.write(json.dumps(record) + "\n")
    people = [("acme", "alice")] * 30 + [("acme", "bob")] * 19 + [("acme", "carol")] * 26
    people += [("beta", "dave")] * 15
    rng.shuffle(people)
    with open(out / "events.jsonl", "w") as events:
        for i, (tenant, user) in enumerate(people):
            event = {
                "id": f"event-{i:04d}",
                "at": f"2025-06-01T{9 + i // 60:02d}:{i % 60:02d}:00Z",
                "scope": {"tenant": tenant, "end_user": user},
                "kind": rng.choice(["joy", "calm", "worry"]),
            }
            events.write(json.dumps(event) + "\n")
    with open(out / "states.jsonl", "w") as states:
        for tenant, user in [
            ("acme", "alice"),
            ("acme", "bob"),
            ("acme", "carol"),
            ("beta", "dave"),
        ]:
            state = {
                "id": f"mood-{user}",
                "scope": {"tenant": tenant, "end_user": user},
                "mood": "calm",
            }
            states.write(json.dumps(state) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd())
