"""Hypothesis strategies and helpers the C core's equivalence tests share
(tests/test_speedups.py, tests/test_speedups_json.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from boundlog import Record

# Text and bytes weighted towards what breaks lines, quoting and encodings: line
# breaks, quotes, backslashes, spaces, NUL, DEL, latin-1, lone surrogates, astral.
SPECIAL = '\n\r\x0b\x0c\x1c\x85\u2028"\\ %?-\x00\x7f\xe9\xff\ud800\udc00\U0001f600'
TEXT = st.text(st.one_of(st.sampled_from(SPECIAL), st.characters(exclude_categories=())))
LATIN1 = st.text(st.characters(max_codepoint=0xFF))
# Bytes around the edges of well-formed UTF-8 (Unicode's table 3-7): overlong forms,
# surrogates, the last code point and past it, cut sequences, stray continuations.
UTF8_EDGES = [
    b"\xc0\x80", b"\xc1\xbf", b"\xc2\x80", b"\xdf\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf",
    b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xee\x80\x80", b"\xef\xbf\xbf",
    b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80", b"\xbf", b"\xff", b"\\", b'"',
    b"\n", b"\x00", b"\x1f", b"\x7f", b"a",
]  # fmt: skip
RAW = st.one_of(
    st.binary(),
    TEXT.map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.lists(st.sampled_from(UTF8_EDGES)).map(b"".join),
)
VALUES = st.one_of(RAW, TEXT, LATIN1)
TIMES = st.one_of(
    st.floats(min_value=0, max_value=4102444800.0),
    st.floats(min_value=-1e9, max_value=4102444800.0),
    # Around a second's end, where datetime rounds up to the next second.
    st.integers(min_value=1_600_000_000, max_value=1_600_000_003).flatmap(
        lambda second: st.sampled_from([second + 0.9999994, second + 0.9999995, second + 1e-7])
    ),
    st.integers(min_value=0, max_value=2**31),
)
NUMBERS = st.one_of(
    st.sampled_from([0, 1, 100, 101, 199, 200, 204, 304, 404, 500, 599]),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
)


def outcome(function: Any, records: list[Record]) -> Any:
    """What ``function(records)`` returns, or the type of what it raises."""
    try:
        return function(records)
    except Exception as error:
        return type(error)
