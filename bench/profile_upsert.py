"""Where the server spends an ``upsert_many`` of 500 x 768 between the socket and the store.

Runs the single-process memory server (``ratatoskr-memory-provider``: plain uvicorn, the
same app a gunicorn worker runs) under ``py-spy record``, loads ``--batches`` batches
through ``Client``, and prints each step's share of the samples taken inside the server's
request path (inclusive: a step's callees count as its own). Needs the ``profile`` extra
(``make profile-upsert`` installs it); ``--out`` keeps py-spy's collapsed stacks.

    .venv/bin/python -m bench.profile_upsert --batches 40
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.client_load import batch_records, wait_ready
from bench.http_load import free_port
from ratatoskr.client import Client
from ratatoskr.client.encoding import batch_args

# (label, a frame's function as py-spy names it): the steps of WireEndpoints._answer and
# of the store thread, in the wire's order
STEPS = (
    ("on the event loop (WireEndpoints._serve)", "WireEndpoints._serve"),
    ("  read the body (WireEndpoints._read_body)", "WireEndpoints._read_body"),
    ("h11 receiving the body's bytes", "H11Protocol.data_received"),
    ("  verify the token", "TokenVerifier.verify"),
    ("  decode (split_vectors + orjson on the rest)", "Plane.decode"),
    ("    orjson and the wide-integer check", "decode_object"),
    ("  wait for the body's SHA-256 (another thread)", "BodyDigest.hexdigest"),
    ("on a store thread (WireEndpoints._run)", "WireEndpoints._run"),
    ("  check the records (parse_upsert)", "parse_upsert"),
    ("  write (upsert_parsed)", "RatatoskrMemoryStore.upsert_parsed"),
    ("  answer (success_body)", "success_body"),
)


# a sample counts when one of these is on its stack: the event loop's request, the store
# thread's half of it, or h11 taking in the body's bytes (a callback of its own)
PATH = ("WireEndpoints._serve", "WireEndpoints._run", "H11Protocol.data_received")


def profile(args: argparse.Namespace, data: str, spy: str, raw: Path) -> float:
    key = secrets.token_hex(32)
    port = free_port()
    env = {
        **os.environ,
        "RATATOSKR_MEMORY_DB": os.path.join(data, "memory.db"),
        "RATATOSKR_AFFECT_DB": os.path.join(data, "affect.db"),
        "RATATOSKR_MEMORY_EMBEDDING_DIM": str(args.dim),
        "RATATOSKR_HEIMDALL_KEY": key,
        "RATATOSKR_PORT": str(port),
        "RATATOSKR_LOG_LEVEL": "warning",
    }
    server = [
        sys.executable,
        "-c",
        "from ratatoskr.cli.providers import memory_provider_main as m; m()",
    ]
    record = [spy, "record", "--nonblocking", "--rate", str(args.rate), "--format", "raw"]
    record += ["-o", str(raw), "--"]
    spied = subprocess.Popen(
        record + server,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, time.monotonic() + 60)
        started = time.perf_counter()
        with Client(url, key=key, scope={"tenant": "t0"}) as client:
            for index in range(args.batches):
                tenant, records = batch_records(index, args.batch, args.dim)
                wire = batch_args(records, f"p{index}", None, None)
                client.with_scope({"tenant": tenant}).call("memory", "upsert_many", wire)
        return time.perf_counter() - started
    finally:
        os.killpg(spied.pid, signal.SIGINT)  # py-spy writes its file and stops the server
        spied.wait(timeout=120)


def shares(raw: Path) -> tuple[int, Counter[str]]:
    inside = 0
    counted: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not any(step in stack for step in PATH):
            continue
        samples = int(count)
        inside += samples
        names = {re.sub(r" \(.*", "", frame) for frame in stack.split(";")}
        for _, function in STEPS:
            if function in names:
                counted[function] += samples
    return inside, counted


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--out", help="keep py-spy's collapsed stacks here")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("py-spy is not installed: pip install -e '.[profile]'", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ratatoskr-profile-") as data:
        raw = Path(args.out) if args.out else Path(data) / "stacks.txt"
        spent = profile(args, data, spy, raw)
        inside, counted = shares(raw)
    print(
        f"{args.batches} batches of {args.batch} x {args.dim} through Client in {spent:.1f} s; "
        f"{inside:,} samples in the server's request path (py-spy at {args.rate}/s):"
    )
    for label, function in STEPS:
        print(f"  {counted[function] / max(1, inside):6.1%}  {label}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
