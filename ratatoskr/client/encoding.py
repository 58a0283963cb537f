"""Envelopes as bytes, and vectors as the JSON the server reads back to the same values.

A vector may be a list (or tuple) of numbers or a numpy array. A float array is written by
orjson straight from its buffer, with no Python float per value, as float64: a float32
array widened, so the server reads each value back as exactly that float32 value (what
``array.tolist()`` would have sent; orjson's own float32 output is the shortest text of the
float32, which the server would read as another float64). Any other array is written as
its ``tolist()`` (integers stay integers).

orjson writes NaN and the infinities as ``null``, which would store something other than
what was sent; JSON cannot carry them, so an envelope holding one is refused before it is
sent (``NonFiniteNumber``). orjson also writes values JSON has no type for in a form of its
choosing (a ``datetime`` or a ``UUID`` as a string, a dataclass as an object, an ``Enum``
as its value): the store keeps records verbatim, so such a value is refused as well, a
``TypeError`` naming its type, as is nesting deeper than orjson writes (or a value that
holds itself). Numbers, strings, booleans, ``None``, lists, tuples and dicts (and their
subclasses) pass, as do numpy arrays and scalars (a scalar as its value: a float32 ``0.1``
as 0.10000000149011612, what ``float()`` of it gives).

A list of numbers is checked by its sum, which NaN and the infinities carry through; only
a list whose sum is not finite, or that holds something else, is walked value by value. A
memory record's vector (and a search's) is left to the server, which refuses a ``null`` in
it before storing anything: summing a batch's 500 x 768 values would cost the client 2 to
3 ms a call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from ratatoskr.client.errors import NonFiniteNumber
from ratatoskr.core.canonical import json_failure
from ratatoskr.wire.envelope import WIRE_VERSION

VECTOR_KEYS = ("embedding", "vector")


def _numpy_value(value: Any) -> Any:
    """orjson's ``default``: a numpy value as the JSON of its value. orjson's own numpy
    output writes a float32 scalar as the shortest text of the float32 (``0.1``), which
    the server reads as another number; a float array goes straight from its buffer as
    float64 (``wire_vector``). A 0-d array is its scalar, as ``tolist()`` gives it
    (``ascontiguousarray`` would make it a one-element array)."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value.item()
        if value.dtype.kind == "f":
            wide = np.ascontiguousarray(value, dtype=np.float64)
            return orjson.Fragment(orjson.dumps(wide, option=orjson.OPT_SERIALIZE_NUMPY))
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError


def _numpy_made(vector: Any) -> bool:
    """An array, or a list (tuple) of numpy scalars, which orjson writes as the shortest
    text of each scalar's own type: a float32 ``0.1`` as ``0.1``, not as its value."""
    if isinstance(vector, np.ndarray):
        return True
    return isinstance(vector, list | tuple) and bool(vector) and isinstance(vector[0], np.generic)


def wire_vector(vector: Any) -> Any:
    """``vector`` as orjson should write it (see the module)."""
    if isinstance(vector, np.ndarray):
        if vector.ndim == 0:
            return vector.item()  # no vector: the server says so
        if vector.dtype.kind == "f":
            return np.ascontiguousarray(vector, dtype=np.float64)
        return vector.tolist()
    if _numpy_made(vector):  # each scalar as its value (what ``tolist()`` gives)
        return [x.item() if isinstance(x, np.generic) else x for x in vector]
    return vector


def wire_record(record: Mapping[str, Any]) -> Any:
    """``record`` with its vector made ready (a copy only when it holds numpy values)."""
    if not isinstance(record, Mapping):
        return record  # the server names what is wrong with it
    if any(_numpy_made(record.get(k)) for k in VECTOR_KEYS):
        return {k: wire_vector(v) if k in VECTOR_KEYS else v for k, v in record.items()}
    return record


def envelope(
    verb: str,
    args: Mapping[str, Any],
    request_id: str | None = None,
    *,
    vectors_checked: bool = False,
) -> bytes:
    """The request body: the envelope of wire ``WIRE_VERSION``. ``vectors_checked``: the
    plane refuses a non-number in a record's vector or a search's (the memory plane)."""
    body: dict[str, Any] = {"wire": WIRE_VERSION, "verb": verb, "args": args}
    if request_id is not None:
        body["request_id"] = request_id
    try:
        where = _non_finite_arg(args, vectors_checked)
    except NotJson as exc:
        why = str(exc)
    except RecursionError:  # the caller's own stack was deep already
        why = TOO_DEEP
    else:
        if where is not None:
            raise NonFiniteNumber(where)
        try:
            return orjson.dumps(body, default=_numpy_value)
        except orjson.JSONEncodeError as exc:
            why = json_failure(exc)
    raise TypeError(f"the arguments of {verb} are not JSON ({why}); nothing was sent")


class NotJson(Exception):
    """A value JSON has no type for (its type named), or nesting too deep."""


TOO_DEEP = "nesting too deep"
MAX_DEPTH = 254  # orjson writes at most 254 nested lists and objects, the envelope's 2 in
_JSON = (str, int, float, list, tuple, dict, type(None), np.ndarray, np.generic)
_NUMPY_TIMES = (np.datetime64, np.timedelta64)  # orjson writes them as strings


def _non_finite_arg(args: Mapping[str, Any], vectors_checked: bool) -> str | None:
    """Where the first NaN or infinity in ``args`` is (``_non_finite``), or ``None``."""
    for name, value in args.items():
        if vectors_checked and name in VECTOR_KEYS:
            continue
        if name in RECORD_ARGS and type(value) in (list, tuple):
            for i, record in enumerate(value):
                if not isinstance(record, Mapping):
                    path = _non_finite(record)
                    if path is not None:
                        return f"args.{name}[{i}]" + "".join(reversed(path))
                    continue
                for key, item in record.items():  # a record's fields are named
                    if vectors_checked and key in VECTOR_KEYS or type(item) in _PLAIN:
                        continue
                    path = _non_finite(item)
                    if path is not None:
                        return f"args.{name}[{i}].{key}" + "".join(reversed(path))
            continue
        path = _non_finite(value)
        if path is not None:
            return f"args.{name}" + "".join(reversed(path))
    return None


_PLAIN = (str, int, bool, type(None))  # never a NaN or an infinity
RECORD_ARGS = ("records", "events")  # the arguments that hold records (their fields named)
HIDDEN_KEY = ".…"  # a step through a mapping, its key not shown


def _non_finite(value: Any, depth: int = 0) -> list[str] | None:
    """The path, innermost step first, to the first NaN or infinity in ``value``, or
    ``None`` (the path is built only when one is found: this runs on every call). List
    positions are shown, mapping keys not: inside a record they are its content. A value
    JSON has no type for, or nesting past ``MAX_DEPTH``, raises ``NotJson``."""
    kind = type(value)
    if kind is float:
        return None if math.isfinite(value) else []
    if depth >= MAX_DEPTH:
        raise NotJson(TOO_DEEP)
    if kind is dict or isinstance(value, Mapping):
        for item in value.values():
            if type(item) not in _PLAIN:
                found = _non_finite(item, depth + 1)
                if found is not None:
                    return [*found, HIDDEN_KEY]  # a key inside a value may be content
        return None
    if not isinstance(value, _JSON) or isinstance(value, _NUMPY_TIMES):
        raise NotJson(f"a value of type {kind.__name__}, which JSON has no type for")
    if isinstance(value, list | tuple):
        try:
            if math.isfinite(sum(value)):  # TypeError: not all numbers
                return None  # (a sum that overflowed is walked: its values may be finite)
        except TypeError:
            pass
        for i, item in enumerate(value):
            if type(item) not in _PLAIN:
                found = _non_finite(item, depth + 1)
                if found is not None:
                    return [*found, f"[{i}]"]
        return None
    if isinstance(value, np.ndarray):
        return [] if value.dtype.kind in "fc" and not np.isfinite(value).all() else None
    if isinstance(value, np.floating):
        return None if np.isfinite(value) else []
    return None


def drop_none(**args: Any) -> dict[str, Any]:
    """The arguments given: a ``None`` is left out (the server reads a missing optional
    argument as null)."""
    return {k: v for k, v in args.items() if v is not None}


def _refused(value: Any) -> bool:
    """A string, bytes or a mapping where a list is wanted: iterable, but not a list of
    items (``delete_many("c1")`` would name the ids ``c`` and ``1``)."""
    return isinstance(value, str | bytes | bytearray | Mapping)


def sequence_arg(value: Any, what: str) -> list[Any]:
    """``value`` (a sequence of records or events) as the list the wire takes; anything else
    is refused before anything is sent."""
    if _refused(value) or not isinstance(value, Sequence):
        raise TypeError(f"{what} must be a sequence (a list), not {type(value).__name__}")
    return list(value)


def id_list(ids: Any) -> list[Any]:
    """``ids`` (any iterable of ids but a string, bytes or a mapping) as a list; a single id
    given where a list is wanted is refused before anything is sent."""
    if _refused(ids) or not isinstance(ids, Iterable):
        raise TypeError(f"ids must be a list of ids, not {type(ids).__name__}")
    return list(ids)


def batch_args(
    records: Sequence[Mapping[str, Any]],
    idempotency_key: str,
    expected_revisions: Mapping[str, int] | None,
    idempotency_class: str | None,
) -> dict[str, Any]:
    """The args of a batch write, one shape for both planes (memory's ``upsert_many``,
    affect's ``put_many``); vectors made ready as ``wire_record`` does."""
    return drop_none(
        records=[wire_record(r) for r in sequence_arg(records, "records")],
        idempotency_key=idempotency_key,
        expected_revisions=expected_revisions,
        idempotency_class=idempotency_class,
    )
