"""``ratatoskr call PLANE VERB --args JSON``: one wire call against a running server.

Sent through ``ratatoskr.client.Client``, with a token minted per attempt from the key the
server reads (``ratatoskr token``'s options): the handshake first, so a verb the server
does not list is refused without being sent, and a retryable error (503) is retried
``--retries`` times. Prints the JSON answer; the exit status is non-zero when it is an error:
1 an error answer or an unlisted verb, 2 a usage error, 3 the server cannot be reached
(nothing was sent), 4 the call was sent but no answer came (it may have run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from ratatoskr.cli.token import (
    add_token_options,
    checked_lifetime,
    parse_scope,
    signing_key,
)
from ratatoskr.client import (
    Client,
    KeyMinter,
    RatatoskrError,
    TransportFailed,
    UnexpectedAnswer,
    VerbNotListed,
)
from ratatoskr.client.base import checked_timeout, checked_url, url_from_env
from ratatoskr.client.errors import shown_url
from ratatoskr.core.errors import BifrostError
from ratatoskr.wire.keys import load_keyring

# exit statuses: 0 an answer, 1 an error answer or an unlisted verb, 2 a usage error
UNREACHED = 3  # no connection: nothing was sent
MAY_HAVE_RUN = 4  # sent, and no answer came (a timeout, a dropped connection)


def read_args(value: str) -> str:
    """``--args`` as given, or the contents of a file when it is ``@PATH`` (``@-``: stdin)."""
    if not value.startswith("@"):
        return value
    if value == "@-":
        return sys.stdin.read()
    with open(value[1:], encoding="utf-8") as handle:
        return handle.read()


INT_RANGE = (-(2**63), 2**64 - 1)  # the integers orjson reads and writes as integers


def _wire_int(text: str) -> int:
    value = int(text)
    if not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise ValueError("--args holds an integer beyond 64 bits, which the wire cannot carry")
    return value


def parse_args_json(text: str) -> dict[str, Any]:
    """``--args`` as the object it spells. orjson reads an integer beyond 64 bits as a
    float, which would store another value than the one typed (the Python client refuses
    such an integer): the text is read again with each integer checked, so one is refused."""
    try:
        args = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise ValueError("--args is not JSON") from None
    if not isinstance(args, dict):
        raise ValueError("--args must be a JSON object")
    if _has_float(args):  # where an integer too large may have become one
        checked: dict[str, Any] = json.loads(text, parse_int=_wire_int)
        return checked
    return args


def _has_float(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def route(plane: str, verb: str) -> tuple[str, str]:
    """The plane and verb to call: the handshake is plane ``*``."""
    if verb == "handshake" or plane in ("*", "handshake"):
        return "*", "handshake"
    return plane, verb


def minter(args: argparse.Namespace, env: Mapping[str, str]) -> KeyMinter:
    """Tokens as ``ratatoskr token`` mints them, from the key of the settings."""
    return KeyMinter(
        signing_key(load_keyring(env), args.kid),
        scope=parse_scope(args.scope),
        actor=args.sub,
        kid=args.kid,
        issuer=args.issuer,
        audience=args.audience,
        lifetime=checked_lifetime(args.lifetime, env),
    )


def error_answer(error: RatatoskrError) -> dict[str, Any]:
    """The error answer as the server sent it."""
    body: dict[str, Any] = {
        "code": error.code,
        "message": error.message,
        "retryable": error.retryable,
    }
    if error.details is not None:
        body["details"] = error.details
    return {"ok": False, "error": body, "request_id": error.request_id}


def run(
    args: argparse.Namespace,
    env: Mapping[str, str] | None = None,
    client: httpx.Client | None = None,
) -> int:
    env = os.environ if env is None else env
    plane, verb = route(args.plane, args.verb)
    try:
        url = checked_url(args.url, "--url") if args.url is not None else url_from_env(env)
        call_args = parse_args_json(read_args(args.args))
        tokens = minter(args, env)
        if args.retries < 0:
            raise ValueError("--retries must be 0 or more")
        checked_timeout(args.timeout, "--timeout")
    except (OSError, ValueError, BifrostError) as exc:  # BifrostError: an unknown --kid
        print(f"ratatoskr call: {exc}", file=sys.stderr)
        return 2
    with Client(
        url, token_provider=tokens, retry=args.retries, timeout=args.timeout, http=client
    ) as wire:
        try:
            answer = wire.send(plane, verb, call_args, request_id=args.request_id)
        except TransportFailed as failed:
            if not failed.sent:
                print(f"ratatoskr call: cannot reach {shown_url(url)}", file=sys.stderr)
                return UNREACHED
            print(
                f"ratatoskr call: no answer from {shown_url(url)} after the call was sent: it "
                "may have run; sending it again with the same idempotency key tells whether "
                "it did (a write that landed is answered as a replay)",
                file=sys.stderr,
            )
            return MAY_HAVE_RUN
        except (VerbNotListed, UnexpectedAnswer) as error:
            print(f"ratatoskr call: {error.message}", file=sys.stderr)
            return 1
        except RatatoskrError as error:
            print(orjson.dumps(error_answer(error), option=orjson.OPT_INDENT_2).decode())
            return 1
    shown = {"ok": True, "result": answer.result, "request_id": answer.request_id}
    print(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode())
    return 0


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "call",
        help="send one verb to a running server",
        description="Send one Bifrost call with a freshly minted token (see `ratatoskr token`).",
        epilog="exit status: 0 an answer; 1 an error answer or an unlisted verb; 2 a usage "
        "error; 3 the server cannot be reached (nothing was sent); 4 the call was sent but "
        "no answer came: it may have run (send it again with the same idempotency key)",
    )
    parser.add_argument("plane", help="memory or affect (or handshake)")
    parser.add_argument("verb", nargs="?", default="handshake")
    parser.add_argument(
        "--args", default="{}", help="the verb's args as a JSON object, or @FILE (@- for stdin)"
    )
    parser.add_argument(
        "--url",
        help="the server; default $RATATOSKR_URL, else http://127.0.0.1:$RATATOSKR_PORT "
        "(port 8000 when unset), as Client.from_env",
    )
    parser.add_argument("--request-id")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds per exchange, above 0 (default 30)"
    )
    parser.add_argument(
        "--retries", type=int, default=3, help="retries of a retryable error (default 3)"
    )
    add_token_options(parser)
    parser.set_defaults(handler=run)
