"""The long power-cut run (``make power-cut``): hundreds of cuts under the real server.

The rig of ``tests/powercut`` (``cachefs`` under ``ratatoskr serve``, 2 workers, 3 writing
lanes over every writing verb) for ``--cuts`` cuts, then the figures docs/reliability.md
quotes: cuts, acknowledged writes, lost, corrupt, and the token claims and idempotency
entries the re-sent calls found missing. Needs root (a FUSE mount) and Debian's fuse3.
Exits 1 when a FULL run lost anything.

    python -m bench.power_cut --cuts 500 --synchronous FULL
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.powercut.rig import PowerCutRun, Tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=int, default=500)
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL", "EXTRA"), default="FULL")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lanes", type=int, default=3)
    parser.add_argument("--every", type=int, default=50, help="print a line every N cuts")
    args = parser.parse_args(argv)

    def progress(tally: Tally) -> None:
        if tally.cuts % args.every == 0:
            print(tally.summary(), flush=True)

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ratatoskr-power-cut-") as root:
        run = PowerCutRun(
            Path(root), synchronous=args.synchronous, seed=args.seed, lanes=args.lanes
        )
        tally = run.run(args.cuts, on_cut=progress)
    elapsed = time.monotonic() - started
    print()
    print("| synchronous | cuts | acknowledged writes | lost | corrupt | claims lost | keys lost |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(
        f"| {tally.synchronous} | {tally.cuts} | {tally.acknowledged:,} | {len(tally.lost)} | "
        f"{len(tally.corrupt) + len(tally.wrong)} | {len(tally.jti_lost)} | "
        f"{len(tally.idempotency_lost)} |"
    )
    print(f"\n{tally.summary()} elapsed={elapsed:.0f}s")
    for name in ("lost", "wrong", "corrupt", "problems", "jti_lost", "idempotency_lost"):
        found = getattr(tally, name)
        for line in found[:5]:
            print(f"  {name}: {line}")
    if tally.synchronous != "NORMAL" and not tally.durable():
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
