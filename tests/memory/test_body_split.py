"""Reading a body's vectors straight into float32 decodes exactly what orjson decodes: the
same objects (floats to the bit, integers as integers), the same refusals with the same
message, and the packed rows and flags the C pass over orjson's lists would give."""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ratatoskr.core.errors import MalformedEnvelope
from ratatoskr.memory import _body, _pack, accelerators, body
from ratatoskr.memory.packed import PackedVector
from ratatoskr.memory.rules import F32_ROUNDS_TO_INF
from ratatoskr.memory.vector_pack import BAD_VALUE, INEXACT
from ratatoskr.wire.envelope import decode_object
from ratatoskr.wire.plane import decode_split

SPLIT = _body  # the C module itself: these tests hold it to orjson in every run


def test_the_splitter_is_built_and_used_unless_switched_off() -> None:
    """``make test`` builds it (this module's import fails otherwise): a silent fallback
    would cost every batch its decode. The wire uses it unless ``RATATOSKR_NO_ACCELERATORS``
    asks for orjson alone."""
    assert SPLIT.FAST_PATH == 1
    assert (body.SPLIT is None) == accelerators.disabled()


def decode_upsert(text: bytes) -> dict[str, Any]:
    """As the wire decodes an upsert_many body (the memory plane's split, then orjson)."""
    return decode_split(text, lambda b: body.split_upsert(b, SPLIT))


def decode_search(text: bytes) -> dict[str, Any]:
    return decode_split(text, lambda b: body.split_search(b, SPLIT))


def exact_tree(value: Any) -> Any:
    """``value`` with every float as its bits and every type named, packed vectors as
    the lists they stand for: two trees are equal only when they are the same JSON."""
    if isinstance(value, PackedVector):
        value = value.values()
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, bool | int | str) or value is None:
        return (type(value).__name__, value)
    if isinstance(value, list):
        return ("list", [exact_tree(v) for v in value])
    assert isinstance(value, dict)
    return ("dict", [(k, exact_tree(v)) for k, v in value.items()])


def outcome(decode: Any, text: bytes) -> Any:
    try:
        return exact_tree(decode(text))
    except MalformedEnvelope as exc:
        return ("refused", exc.message)


def packed_like_the_c_pass(decoded: dict[str, Any]) -> None:
    """Every packed row and flag is what ``narrow_float_lists`` makes of the row's list."""
    args = decoded.get("args")
    if not isinstance(args, dict):
        return
    vectors = [args.get("vector")]
    records = args.get("records")
    for record in records if isinstance(records, list) else []:
        if isinstance(record, dict):
            vectors += [record.get("embedding"), record.get("vector")]
    for vector in vectors:
        if not isinstance(vector, PackedVector):
            continue
        values = vector.values()
        packed = _pack.narrow_float_lists([values], len(values), F32_ROUNDS_TO_INF)
        assert packed is not None
        _, narrow, flags = packed
        assert vector.batch.row(vector.index).tobytes() == narrow
        flag = vector.batch.flags[vector.index]
        assert flag == flags[0]
        kept = vector.batch.exact[vector.index]
        assert (kept is not None) == bool(flag & (INEXACT | BAD_VALUE))
        if kept is not None:
            assert np.frombuffer(kept).tolist() == values


def json_float(x: float) -> str:
    return orjson.dumps(x).decode()


# -- the bodies -------------------------------------------------------------------------

odd_numbers = [
    "1e400",
    "-1e400",
    "1e-400",
    "-1e-400",
    "0.0e99999",
    "0e5",
    "NaN",
    "Infinity",
    "1.",
    ".5",
    "01.5",
    "-",
    "1.5e",
    "1.5e+",
    "+1.0",
    "2.4703282292062328e-324",
    "2.4703282292062327e-324",
    "1.7976931348623157e308",
    "1.7976931348623159e308",
    "1E5",
    "-0.0",
    "0.0",
    "1e0000000000000000000000005",
    "1" * 30 + ".5",
    "0." + "0" * 30 + "1",
    "9007199254740993.0",
    "0.8837890625",
    "3.4028235677973366e38",
    "3.4028235e38",
    "1e-46",
    "12345678901234567890.0",
    "123456789012345678901",
    "7",
    "-3",
    "true",
    "null",
    '"1.0"',
    "[1.0]",
]
digits = st.text("0123456789", min_size=1, max_size=24)
decimal = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole.lstrip('0') or '0'}.{frac}{exp}",
    st.sampled_from(["", "-"]),
    digits,
    digits,
    st.one_of(st.just(""), st.integers(-300, 280).map(lambda e: f"e{e}")),
)
good_number = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(json_float),
    st.floats(width=32, allow_nan=False, allow_infinity=False).map(json_float),
    decimal,
)
number = st.one_of(good_number, st.sampled_from(odd_numbers))
space = st.sampled_from(["", "", "", " ", "\n", "\t", "\r\n  "])


def rarely(draw: st.DrawFn) -> bool:
    """One time in twenty: most bodies are plain, so most are split, and some are not."""
    return draw(st.integers(0, 19)) == 0


@st.composite
def array(draw: st.DrawFn) -> str:
    values = draw(st.lists(good_number, min_size=1, max_size=6))
    if rarely(draw):
        values = draw(st.lists(number, min_size=0, max_size=6))
    gap = draw(space)
    return "[" + gap + f"{gap},{gap}".join(values) + gap + "]"


plain_string = st.text(alphabet=st.characters(codec="utf-8", exclude_characters='"\\'), max_size=8)
escaped_string = st.sampled_from(['a\\"b', "\\\\", "\\u00e9", "\\n", 'x\\"embedding\\":[1.5]'])
string = st.one_of(plain_string, escaped_string).map(lambda s: f'"{s}"')
odd_keys = ['"vector"', '"embedd\\u0069ng"', '"Embedding"', '"vectors"']
odd_values = ['"x"', "null", "[[1.5]]", "{}", "[]", "1.5"]


@st.composite
def record(draw: st.DrawFn) -> str:
    members = [f'"id":{draw(string)}', '"scope":{"tenant":"acme"}']
    vectors = draw(st.integers(0, 2)) if rarely(draw) else 1
    for _ in range(vectors):
        key = draw(st.sampled_from(odd_keys)) if rarely(draw) else '"embedding"'
        value = draw(st.sampled_from(odd_values)) if rarely(draw) else draw(array())
        members.append(f"{key}:{value}")
    if draw(st.booleans()):
        members.append(f'"distillate":{draw(string)}')
    if draw(st.booleans()):
        members.append(f'"meta":{{"embedding":{draw(array())},"n":{draw(number)}}}')
    members = draw(st.permutations(members))
    gap = draw(space)
    return "{" + gap + f"{gap},{gap}".join(members) + gap + "}"


@st.composite
def upsert_body(draw: st.DrawFn) -> bytes:
    records = "[" + ",".join(draw(st.lists(record(), min_size=1, max_size=4))) + "]"
    if rarely(draw):
        records = draw(st.sampled_from(["null", "{}", '"records"', "[1.5]", "[]"]))
    args = [f'"records":{records}', '"idempotency_key":"k"']
    if rarely(draw):
        args.append(f'"records":{records}')
    if rarely(draw):
        args.append('"rec\\u006frds":[]')
    top = ['"wire":"0.6"', '"verb":"upsert_many"', '"args":{' + ",".join(args) + "}"]
    if rarely(draw):
        top.append('"args":{}')
    text = draw(space) + "{" + ",".join(draw(st.permutations(top))) + "}" + draw(space)
    if rarely(draw):
        text += draw(st.sampled_from(["x", "}", ",", "\x00", "[]"]))
    return text.encode()


@st.composite
def search_body(draw: st.DrawFn) -> bytes:
    vector = draw(st.sampled_from(odd_values)) if rarely(draw) else draw(array())
    args = [f'"vector":{vector}', '"top_k":3']
    if rarely(draw):
        args.append(f'"vector":{vector}')
    text = '{"wire":"0.6","verb":"search","args":{' + ",".join(draw(st.permutations(args)))
    return (text + "}}" + (draw(st.sampled_from([" ", "]"])) if rarely(draw) else "")).encode()


# -- the properties ---------------------------------------------------------------------


@given(upsert_body())
@example(b'{"args":{"records":[{"id":"a","embedding":[0.1,-0.0,1e-300]}]}}')
@example(b'{"args":{"records":[{"id":"a","embedding":[0.1]}]}}]')
@example(b'{"args":{"records":[{"id":"a","embedding":[0.1]}],"records":[]}}')
def test_an_upsert_body_decodes_as_orjson_decodes_it(text: bytes) -> None:
    split = outcome(decode_upsert, text)
    assert split == outcome(decode_object, text)
    if split[0] != "refused":
        packed_like_the_c_pass(decode_upsert(text))


@given(search_body())
@example(b'{"wire":"0.6","verb":"search","args":{"vector":[1.0,2.5e-3],"top_k":3}}')
def test_a_search_body_decodes_as_orjson_decodes_it(text: bytes) -> None:
    split = outcome(decode_search, text)
    assert split == outcome(decode_object, text)
    if split[0] != "refused":
        packed_like_the_c_pass(decode_search(text))


# 8 digits at a time are read only with 8 bytes left: a number is tried at the end of a
# body and with room after it
@given(st.one_of(number, st.floats(allow_nan=False, allow_infinity=False).map(json_float)))
def test_every_number_is_read_to_the_bit(text: str) -> None:
    try:
        expected = orjson.loads(text)
    except orjson.JSONDecodeError:
        expected = None
    if not isinstance(expected, float) or not any(c in text for c in ".eE"):
        assert SPLIT.parse_number(text.encode()) is None
        return
    for read in (SPLIT.parse_number(text.encode()), split_one(text), split_one(text, "  " * 8)):
        assert read is not None and struct.pack("<d", read) == struct.pack("<d", expected)


def split_one(text: str, after: str = "") -> float | None:
    doc = '{"args":{"vector":[' + text + after + "]}}"
    split = SPLIT.split_vectors(doc.encode(), body.QUERY, F32_ROUNDS_TO_INF)
    if split is None:
        return None
    exact = split[2][0]
    if exact is not None:
        return float(np.frombuffer(exact)[0])
    return float(np.frombuffer(split[1], dtype=np.float32)[0])


def test_the_common_batch_is_split_and_packed() -> None:
    """What a client sends: float32 values printed as float64, a few exactly halfway or
    dyadic, one too wide for float32 (kept in float64)."""
    rng = np.random.default_rng(3)
    records = [
        {"id": f"c{i}", "embedding": rng.standard_normal(64).astype(np.float32).tolist()}
        for i in range(20)
    ]
    records[4]["embedding"][9] = 0.1
    records[5]["embedding"][0] = 0.8837890625
    text = orjson.dumps({"wire": "0.6", "verb": "upsert_many", "args": {"records": records}})
    decoded = decode_upsert(text)
    packed = [r["embedding"] for r in decoded["args"]["records"]]
    assert all(isinstance(v, PackedVector) for v in packed)
    assert [v.values() for v in packed] == [r["embedding"] for r in records]
    kept = [i for i, e in enumerate(packed[0].batch.exact) if e is not None]
    assert kept == [4]
    assert exact_tree(decoded) == exact_tree(orjson.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        b'{"args":{"records":[{"id":"a","embedding":[1,0.5]}]}}',  # an integer
        b'{"args":{"records":[{"id":"a","embedd\\u0069ng":[0.5]}]}}',  # an escaped key
        b'{"args":{"records":[{"id":"a","embedding":[0.5],"vector":[0.5]}]}}',  # both keys
        b'{"args":{"records":[{"id":"a","embedding":[0.5],"embedding":[0.5]}]}}',
        b'{"args":{"records":[{"id":"a"}]}}',  # no vector
        b'{"args":{"records":[{"id":"a","embedding":[1e400]}]}}',  # beyond float64
        b'{"args":{"records":{"id":"a"}}}',
        b'{"args":{"records":[]}}',
        b'{"args":[],"verb":"upsert_many"}',
        b'["args"]',
    ],
)
def test_what_is_not_plainly_a_batch_goes_to_orjson_whole(text: bytes) -> None:
    assert SPLIT.split_vectors(text, body.RECORDS, F32_ROUNDS_TO_INF) is None


def test_a_vector_nested_deeper_is_left_to_orjson() -> None:
    text = b'{"args":{"records":[{"id":"a","embedding":[0.5],"meta":{"embedding":[0.25]}}]}}'
    record = decode_upsert(text)["args"]["records"][0]
    assert isinstance(record["embedding"], PackedVector)
    assert record["meta"] == {"embedding": [0.25]}


def test_without_the_accelerator_the_body_is_not_split() -> None:
    text = b'{"args":{"records":[{"id":"a","embedding":[0.5]}]}}'
    assert body.split_upsert(text, None) is None
    assert body.split_search(b'{"args":{"vector":[0.5]}}', None) is None


def test_a_large_body_read_without_the_gil_decodes_the_same() -> None:
    """Past 256 KiB the scan runs without the GIL, taking it back for the slow number path
    and to grow its buffer (short numbers: more values than it made room for). Several at
    once on threads, beside Python work, each decodes as orjson does."""
    rng = np.random.default_rng(8)
    records = []
    for i in range(500):
        vector = [float(x) for x in np.round(rng.standard_normal(128), 1)]  # "0.3": short
        vector[i % 128] = 1e-30 if i % 3 else 0.1  # the slow path; a float64-only value
        records.append({"id": f"r{i}", "embedding": vector, "scope": {"tenant": "t"}})
    text = orjson.dumps({"wire": "0.6", "verb": "upsert_many", "args": {"records": records}})
    assert len(text) > 256 * 1024
    expected = exact_tree(orjson.loads(text))
    with ThreadPoolExecutor(4) as pool:
        decoded = list(pool.map(lambda _: exact_tree(decode_upsert(text)), range(8)))
        busy = sum(pool.map(lambda n: sum(range(n)), [10_000] * 8))
    assert decoded == [expected] * 8 and busy > 0
    first = decode_upsert(text)["args"]["records"][0]["embedding"]
    assert isinstance(first, PackedVector)
