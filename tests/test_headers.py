"""HeaderReader: reading a batch column-wise gives what reading record by record gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boundlog._headers import REDACTED, HeaderReader

NAMES = ("referer", "user-agent", "cookie")
_name = st.sampled_from([b"referer", b"Referer", b"user-agent", b"USER-AGENT", b"host", b"cookie"])
_value = st.binary(max_size=8)
_pairs = st.lists(st.tuples(_name, _value), max_size=5)
_text_pairs = st.lists(
    st.tuples(_name.map(bytes.decode), _value.map(lambda value: value.decode("latin-1"))),
    max_size=5,
)
_environ = st.dictionaries(
    st.sampled_from(["HTTP_REFERER", "HTTP_USER_AGENT", "HTTP_COOKIE", "PATH_INFO"]),
    st.text(max_size=8),
)


def record_by_record(reader: HeaderReader, sources: list[Any]) -> list[list[bytes | None]]:
    return [list(column) for column in zip(*map(reader.values, sources), strict=True)]


@given(
    st.one_of(
        st.lists(_pairs, min_size=1, max_size=6),
        st.lists(_pairs.map(tuple), min_size=1, max_size=6),
        st.lists(_text_pairs, min_size=1, max_size=6),
        st.lists(_environ, min_size=1, max_size=6),
        st.lists(st.one_of(_pairs, _text_pairs, _environ), min_size=1, max_size=6),
    ),
    st.booleans(),
)
def test_columns_match_values(sources: list[Any], allow_cookie: bool) -> None:
    """Any batch (lower or mixed case, repeats, str or bytes, environs, mixed) reads alike."""
    reader = HeaderReader(NAMES, allow=("cookie",) if allow_cookie else ())
    assert reader.columns(sources) == record_by_record(reader, sources)


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        ([[(b"referer", b"a"), (b"user-agent", b"b")], []], [[b"a", None], [b"b", None]]),
        ([[(b"referer", b"a"), (b"referer", b"b")]], [[b"a, b"], [None]]),
        ([[(b"Referer", b"a")]], [[b"a"], [None]]),
        ([{"HTTP_REFERER": "\xe9", "HTTP_USER_AGENT": "x"}], [[b"\xe9"], [b"x"]]),
        ([[("referer", "\xe9")]], [[b"\xe9"], [None]]),
    ],
    ids=["lower-case", "repeated", "mixed-case", "environ", "text-pairs"],
)
def test_columns(sources: list[Any], expected: list[list[bytes | None]]) -> None:
    """Fields are found case-insensitively, repeats joined, text turned back into bytes."""
    assert HeaderReader(("referer", "user-agent")).columns(sources) == expected


@pytest.mark.parametrize(
    "source", [[(b"cookie", b"secret")], {"HTTP_COOKIE": "secret"}], ids=["pairs", "environ"]
)
def test_columns_redact_sensitive_fields(source: Any) -> None:
    """A sensitive field read a column at a time is still redacted."""
    assert HeaderReader(("cookie",)).columns([source, []]) == [[REDACTED, None]]
