"""``ratatoskr token``: mint a Heimdall-shaped token for a development call.

Heimdall mints the real ones; this lets a developer drive a local server with the same key
settings the server reads (``load_keyring``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from ratatoskr.core.errors import BifrostError
from ratatoskr.core.scope import AXES
from ratatoskr.server.settings import MAX_TTL_ENV
from ratatoskr.wire.keys import Keyring, load_keyring
from ratatoskr.wire.tokens import (
    DEFAULT_CONSUMER,
    DEFAULT_ISSUER,
    DEFAULT_MAX_LIFETIME,
    mint_token,
)

DEFAULT_SUB = "worldtree-dev"
DEFAULT_LIFETIME = 60


def parse_scope(pairs: list[str] | None) -> dict[str, str]:
    """``axis=value`` pairs into a scope; an axis outside the lattice is an error."""
    scope: dict[str, str] = {}
    for pair in pairs or []:
        axis, sep, value = pair.partition("=")
        if not sep or axis not in AXES or not value:
            raise ValueError(f"--scope takes axis=value with an axis of {', '.join(AXES)}")
        if axis in scope:
            raise ValueError(f"--scope names {axis} twice: a scope holds one value per axis")
        scope[axis] = value
    return scope


def add_token_options(parser: argparse.ArgumentParser) -> None:
    """The options ``token`` and ``call`` share: who calls, where, for how long, which key."""
    parser.add_argument(
        "--scope",
        action="append",
        metavar="AXIS=VALUE",
        help="a pair of the token's scope (repeat); none gives an unscoped token",
    )
    parser.add_argument("--sub", default=DEFAULT_SUB, help="the actor (default %(default)s)")
    parser.add_argument("--lifetime", type=int, default=DEFAULT_LIFETIME, help="seconds")
    parser.add_argument("--kid", help="sign with this kid of the keys file")
    parser.add_argument("--issuer", default=DEFAULT_ISSUER)
    parser.add_argument("--audience", default=DEFAULT_CONSUMER, help="the consumer id")


def signing_key(ring: Keyring, kid: str | None) -> bytes:
    if kid is None and not ring.has_default:
        raise ValueError("no default key is configured: pass --kid")
    return ring.key_for(kid)


def checked_lifetime(lifetime: int, env: Mapping[str, str]) -> int:
    """``--lifetime`` once the server would take a token that lives so long (``token`` and
    ``call`` alike): else a usage error here, not a 401 for every call."""
    longest = int(env.get(MAX_TTL_ENV) or DEFAULT_MAX_LIFETIME)
    if not 1 <= lifetime <= longest:
        raise ValueError(
            f"--lifetime must be 1 to {longest} seconds: the server refuses a longer token "
            f"({MAX_TTL_ENV})"
        )
    return lifetime


def mint_for(
    args: argparse.Namespace, plane: str, verb: str, body: bytes, env: Mapping[str, str]
) -> str:
    ring = load_keyring(env)
    checked_lifetime(args.lifetime, env)
    return mint_token(
        signing_key(ring, args.kid),
        plane=plane,
        verb=verb,
        scope=parse_scope(args.scope),
        sub=args.sub,
        body=body,
        kid=args.kid,
        issuer=args.issuer,
        audience=args.audience,
        lifetime=args.lifetime,
    )


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    try:
        if args.body_file is not None:
            with open(args.body_file, "rb") as handle:
                body = handle.read()
        else:
            body = args.body.encode()
        print(mint_for(args, args.plane, args.verb, body, env))
    except (OSError, ValueError, BifrostError) as exc:  # BifrostError: an unknown --kid
        print(f"ratatoskr token: {exc}", file=sys.stderr)
        return 2
    return 0


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "token",
        help="mint a development token bound to a body",
        description="Print a JWT for one call, signed with the key of RATATOSKR_HEIMDALL_KEY, "
        "RATATOSKR_HEIMDALL_KEY_FILE, RATATOSKR_HEIMDALL_KEYS_FILE or ./data/heimdall.key.",
    )
    parser.add_argument("--plane", required=True, help="memory, affect, or * for the handshake")
    parser.add_argument("--verb", required=True)
    body = parser.add_mutually_exclusive_group(required=True)
    body.add_argument("--body-file", help="the exact request body the token is bound to")
    body.add_argument("--body", help="the exact request body, as a string")
    add_token_options(parser)
    parser.set_defaults(handler=run)
