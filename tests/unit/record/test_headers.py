"""Finding header fields in the containers servers hand over, on the writer thread.

A batch of the two shapes servers hand over (environs, or lists of lower-case bytes
pairs) is read a column at a time; every batch must read as record by record would.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boundlog import ConfigurationError
from boundlog.record._headers import REDACTED, HeaderReader

ASGI = [(b"host", b"example"), (b"user-agent", b"probe/1"), (b"x-forwarded-for", b"10.0.0.1")]
ENVIRON = {
    "REQUEST_METHOD": "GET",
    "HTTP_USER_AGENT": "probe/1",
    "HTTP_X_FORWARDED_FOR": "10.0.0.1",
    "CONTENT_TYPE": "text/plain",
}


@pytest.mark.parametrize(
    "source",
    [
        ASGI,
        tuple(ASGI),
        [(b"Host", b"example"), (b"USER-AGENT", b"probe/1"), (b"X-Forwarded-For", b"10.0.0.1")],
        [("Host", "example"), ("User-Agent", "probe/1"), ("X-Forwarded-For", "10.0.0.1")],
        {"Host": "example", "User-Agent": "probe/1", "X-Forwarded-For": "10.0.0.1"}.items(),
        ENVIRON,
    ],
    ids=["asgi", "tuple", "mixed-case", "text-pairs", "items", "environ"],
)
def test_fields_are_found_in_every_kind_of_container(source: Any) -> None:
    """Pairs of bytes or text in any case, items views and WSGI environs all read alike."""
    reader = HeaderReader(["User-Agent", "x-forwarded-for", "referer"])
    assert reader.values(source) == (b"probe/1", b"10.0.0.1", None)


def test_a_mapping_that_is_not_a_dict_is_read_through_its_items() -> None:
    """A header mapping of another kind (aiohttp's, email.message's) is not an environ."""

    class Headers:
        def items(self) -> list[tuple[str, str]]:
            return [("Referer", "/from")]

    assert HeaderReader(["referer"]).values([*Headers().items()]) == (b"/from",)


def test_the_environ_keeps_content_type_without_the_http_prefix() -> None:
    """CGI names Content-Type and Content-Length without HTTP_."""
    assert HeaderReader(["content-type"]).values(ENVIRON) == (b"text/plain",)


def test_repeated_fields_are_joined_with_a_comma() -> None:
    """A field sent twice reads as its values joined with ', ', in the order sent."""
    source = [
        (b"x-forwarded-for", b"1.1.1.1"),
        (b"accept", b"*/*"),
        (b"X-Forwarded-For", b"2.2.2.2"),
    ]
    assert HeaderReader(["x-forwarded-for"]).values(source) == (b"1.1.1.1, 2.2.2.2",)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("caf\u00e9", b"caf\xe9"), ("\u2603", "\u2603".encode()), ("\udcff", b"\xed\xb3\xbf")],
    ids=["latin-1", "beyond-latin-1", "lone-surrogate"],
)
def test_text_values_become_the_bytes_they_were_decoded_from(value: str, expected: bytes) -> None:
    """Latin-1 text (WSGI, http.server) encodes back exactly; other text stays encodable."""
    assert HeaderReader(["x-note"]).values([("X-Note", value)]) == (expected,)


@pytest.mark.parametrize("name", ["Authorization", "cookie", "Set-Cookie", "Proxy-Authorization"])
def test_credentials_are_redacted_unless_allowed(name: str) -> None:
    """The value of a sensitive field is never read out unless the field is allowed by name."""
    source = [(name.encode(), b"secret-value")]
    assert HeaderReader([name]).values(source) == (REDACTED,)
    assert HeaderReader([name], allow=[name.upper()]).values(source) == (b"secret-value",)
    assert HeaderReader([name]).values([]) == (None,)


@pytest.mark.parametrize("name", ["", "x y", "caf\u00e9", "a:b", 42])
def test_a_bad_field_name_is_a_configuration_error(name: Any) -> None:
    """A name that cannot be a header field name is refused, saying what one looks like."""
    with pytest.raises(ConfigurationError, match="not a header field name"):
        HeaderReader([name])


def test_columns_transpose_the_values_of_a_batch() -> None:
    """One column per field, one value per record, None where the field is absent."""
    reader = HeaderReader(["referer", "user-agent"])
    sources = [ASGI, [(b"referer", b"/a")], ENVIRON]
    assert reader.columns(sources) == [[None, b"/a", None], [b"probe/1", None, b"probe/1"]]
    assert reader.columns([]) == [[], []]


@given(st.lists(st.tuples(st.sampled_from([b"a", b"B", b"c"]), st.binary(max_size=8))))
def test_pairs_read_like_a_case_insensitive_join(pairs: list[tuple[bytes, bytes]]) -> None:
    """Whatever the pairs, each field reads as its values joined in order, or None."""
    values = HeaderReader(["a", "b"]).values(pairs)
    for name, value in zip((b"a", b"b"), values, strict=True):
        sent = [v for n, v in pairs if n.lower() == name]
        assert value == (b", ".join(sent) if sent else None)


NAMES = ("referer", "user-agent", "cookie")
_name = st.sampled_from([b"referer", b"Referer", b"user-agent", b"USER-AGENT", b"host", b"cookie"])
_value = st.binary(max_size=8)
_pairs = st.lists(st.tuples(_name, _value), max_size=5)
_text_pairs = st.lists(
    st.tuples(_name.map(bytes.decode), _value.map(lambda value: value.decode("latin-1"))),
    max_size=5,
)
# gunicorn hands over its request's pairs with the names in upper case.
_upper_text_pairs = st.lists(
    st.tuples(
        _name.map(lambda name: name.decode().upper()),
        _value.map(lambda value: value.decode("latin-1")),
    ),
    max_size=5,
)
# A WSGI record keeps the fields it reads as a dict, with None for an absent one; its
# text may hold any code point, and a hand-made record may hold bytes.
_environ = st.dictionaries(
    st.sampled_from(["HTTP_REFERER", "HTTP_USER_AGENT", "HTTP_COOKIE", "PATH_INFO"]),
    st.one_of(st.none(), st.text(max_size=8), st.binary(max_size=8)),
)


def record_by_record(reader: HeaderReader, sources: list[Any]) -> list[list[bytes | None]]:
    return [list(column) for column in zip(*map(reader.values, sources), strict=True)]


@given(
    st.one_of(
        st.lists(_pairs, min_size=1, max_size=6),
        st.lists(_pairs.map(tuple), min_size=1, max_size=6),
        st.lists(_text_pairs, min_size=1, max_size=6),
        st.lists(_upper_text_pairs, min_size=1, max_size=6),
        st.lists(_environ, min_size=1, max_size=6),
        st.lists(
            st.one_of(_pairs, _text_pairs, _upper_text_pairs, _environ), min_size=1, max_size=6
        ),
    ),
    st.booleans(),
)
def test_columns_match_values(sources: list[Any], allow_cookie: bool) -> None:
    """Any batch (lower or mixed case, repeats, str or bytes, environs, mixed) reads alike,
    with None or the value asked for where a field is absent."""
    reader = HeaderReader(NAMES, allow=("cookie",) if allow_cookie else ())
    expected = record_by_record(reader, sources)
    assert reader.columns(sources) == expected
    dashed = [[b"-" if value is None else value for value in column] for column in expected]
    assert reader.columns(sources, b"-") == dashed
