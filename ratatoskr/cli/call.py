"""``ratatoskr call PLANE VERB --args JSON``: one wire call against a running server.

Builds the envelope, mints a token bound to its exact bytes, posts it and prints the JSON
answer; the exit status is non-zero when the answer is an error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from ratatoskr.cli.token import add_token_options, mint_for
from ratatoskr.core.errors import BifrostError
from ratatoskr.wire.envelope import WIRE_VERSION

DEFAULT_URL = "http://127.0.0.1:8000"


def read_args(value: str) -> str:
    """``--args`` as given, or the contents of a file when it is ``@PATH`` (``@-``: stdin)."""
    if not value.startswith("@"):
        return value
    if value == "@-":
        return sys.stdin.read()
    with open(value[1:], encoding="utf-8") as handle:
        return handle.read()


def build_body(verb: str, args_json: str, request_id: str | None) -> bytes:
    try:
        args = orjson.loads(args_json)
    except orjson.JSONDecodeError:
        raise ValueError("--args is not JSON") from None
    envelope: dict[str, Any] = {"wire": WIRE_VERSION, "verb": verb, "args": args}
    if request_id is not None:
        envelope["request_id"] = request_id
    return orjson.dumps(envelope)


def route(plane: str, verb: str) -> tuple[str, str]:
    """The token's plane and the path: the handshake is plane ``*`` on its own route."""
    if verb == "handshake" or plane in ("*", "handshake"):
        return "*", "/bifrost/handshake"
    return plane, f"/bifrost/{plane}-call"


def run(
    args: argparse.Namespace,
    env: Mapping[str, str] | None = None,
    client: httpx.Client | None = None,
) -> int:
    env = os.environ if env is None else env
    verb = "handshake" if args.plane in ("*", "handshake") else args.verb
    try:
        body = build_body(verb, read_args(args.args), args.request_id)
        plane, path = route(args.plane, verb)
        token = mint_for(args, plane, verb, body, env)
    except (OSError, ValueError, BifrostError) as exc:  # BifrostError: an unknown --kid
        print(f"ratatoskr call: {exc}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    try:
        if client is None:
            with httpx.Client(base_url=args.url, timeout=args.timeout) as own:
                response = own.post(path, content=body, headers=headers)
        else:
            response = client.post(path, content=body, headers=headers)
    except httpx.HTTPError as exc:
        print(f"ratatoskr call: {type(exc).__name__}: cannot reach {args.url}", file=sys.stderr)
        return 3
    try:
        answer = response.json()
    except ValueError:
        print(f"ratatoskr call: HTTP {response.status_code}, not JSON", file=sys.stderr)
        return 1
    print(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode())
    return 0 if response.status_code == 200 and answer.get("ok") is True else 1


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "call",
        help="send one verb to a running server",
        description="Send one Bifrost call with a freshly minted token (see `ratatoskr token`).",
    )
    parser.add_argument("plane", help="memory or affect (or handshake)")
    parser.add_argument("verb", nargs="?", default="handshake")
    parser.add_argument(
        "--args", default="{}", help="the verb's args as a JSON object, or @FILE (@- for stdin)"
    )
    parser.add_argument("--url", default=DEFAULT_URL, help="default %(default)s")
    parser.add_argument("--request-id")
    parser.add_argument("--timeout", type=float, default=30.0)
    add_token_options(parser)
    parser.set_defaults(handler=run)
