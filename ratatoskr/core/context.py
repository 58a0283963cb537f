"""The call context every store method receives: who calls, and which region they may touch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CallContext:
    """Identity and authority of one dispatch, taken from the verified token, never from args.

    ``scope`` is the token's scope: the region of the store the call may read and write.
    An empty scope means the whole store (an unscoped token, or an operator on the host).
    """

    actor: str
    scope: Mapping[str, str] = field(default_factory=dict)
    plane: str = ""
    verb: str = ""
    request_id: str = ""
    jti: str = ""
