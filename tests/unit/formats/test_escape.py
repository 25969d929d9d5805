"""The escaping rule: every output is one line of printable ASCII, every escape is
``\\xhh``, and it reverses exactly."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from _examples import examples
from boundlog.formats._escape import escape, escape_unquoted, unescape

# What an escaped value may contain: printable ASCII other than `"` and `\`, or a \xhh escape.
ESCAPED = re.compile(rb"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\x[0-9a-f]{2})*")
ESCAPED_UNQUOTED = re.compile(rb"(?:[\x21\x23-\x5b\x5d-\x7e]|\\x[0-9a-f]{2})*")
# Every character str.splitlines() ends a line at.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
PRINTABLE_WITHOUT_QUOTE_OR_BACKSLASH = bytes(range(0x20, 0x7F)).translate(None, b'"\\')

# Bytes weighted towards the ones the rule is about, as raw bytes and as UTF-8 text.
SPECIAL_TEXT = LINE_BREAKS + '"\\ \x00\x7f\ud800\udfff\U0001f600'
ANY_BYTES = st.one_of(
    st.binary(),
    st.text(st.one_of(st.sampled_from(SPECIAL_TEXT), st.characters(exclude_categories=()))).map(
        lambda text: text.encode("utf-8", "surrogatepass")
    ),
)
SETTINGS = settings(max_examples=examples(300), deadline=None)


@SETTINGS
@given(ANY_BYTES)
@example(bytes(range(256)))
def test_escape_output_is_printable_ascii_without_a_quote(value: bytes) -> None:
    """escape() yields only printable ASCII without `"`, and every `\\` in it starts a \\xhh."""
    assert ESCAPED.fullmatch(escape(value))


@SETTINGS
@given(ANY_BYTES)
@example(bytes(range(256)))
@example(b"\\x41")
@example(b'\\"')
def test_unescape_inverts_escape(value: bytes) -> None:
    """unescape(escape(b)) == b for any bytes, including text that looks like an escape."""
    assert unescape(escape(value)) == value


@SETTINGS
@given(st.text(st.sampled_from(PRINTABLE_WITHOUT_QUOTE_OR_BACKSLASH.decode())).map(str.encode))
def test_escape_leaves_plain_printable_ascii_alone(value: bytes) -> None:
    """escape() is the identity on printable ASCII without `"` and `\\`."""
    assert escape(value) == value
    assert unescape(value) == value


@SETTINGS
@given(ANY_BYTES)
@example("".join(LINE_BREAKS).encode())
def test_escaped_value_never_splits_into_lines(value: bytes) -> None:
    """A decoded escaped value holds none of the characters str.splitlines() breaks at."""
    text = escape(value).decode("ascii")
    assert not set(text) & set(LINE_BREAKS)
    assert len(text.splitlines()) <= 1


@SETTINGS
@given(ANY_BYTES)
@example(b"/run/app server.sock")
def test_escape_unquoted_has_no_space_and_reverses(value: bytes) -> None:
    """escape_unquoted() also escapes spaces, so the field ends at the first space, and reverses."""
    escaped = escape_unquoted(value)
    assert ESCAPED_UNQUOTED.fullmatch(escaped)
    assert unescape(escaped) == value


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        (b'say "hi"', b"say \\x22hi\\x22"),
        (b"C:\\dir", b"C:\\x5cdir"),
        (b'\\"', b"\\x5c\\x22"),
        (b"\\x41", b"\\x5cx41"),
        (b"tab\there", b"tab\\x09here"),
        (b"a\x00b", b"a\\x00b"),
        (b"\x7f", b"\\x7f"),
        (b"\x85", b"\\x85"),
        ("\u2028".encode(), b"\\xe2\\x80\\xa8"),
        (b"\xff\xfe/\xc3", b"\\xff\\xfe/\\xc3"),
        (b"line\r\nbreak", b"line\\x0d\\x0abreak"),
        (b"100% %s %d", b"100% %s %d"),
        (b"", b""),
    ],
)
def test_escape_examples(value: bytes, escaped: bytes) -> None:
    """escape() writes each special byte the documented way and reverses to the input."""
    assert escape(value) == escaped
    assert unescape(escaped) == value


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        (b"/tmp/my app.sock", b"/tmp/my\\x20app.sock"),
        (b"2001:db8::1", b"2001:db8::1"),
        (b'a "b"', b"a\\x20\\x22b\\x22"),
        (b"a\\ b", b"a\\x5c\\x20b"),
    ],
)
def test_escape_unquoted_examples(value: bytes, escaped: bytes) -> None:
    """escape_unquoted() escapes a space as \\x20 and otherwise follows escape()."""
    assert escape_unquoted(value) == escaped
    assert unescape(escaped) == value


def test_unescape_accepts_upper_case_hex() -> None:
    """unescape() reads \\xHH in either case, as nginx writes it."""
    assert unescape(b"\\x4A\\x4a\\x5C") == b"JJ\\"


def test_unescape_reads_apache_escapes() -> None:
    """unescape() also reads Apache's \\" and \\\\, which boundlog 0.1 wrote too."""
    assert unescape(b'say \\"hi\\" C:\\\\dir') == b'say "hi" C:\\dir'


@pytest.mark.parametrize("byte", [b"\xff", b"\x01", b'"', b"\\", b"\n", b" "])
def test_a_long_value_of_one_unsafe_byte_escapes_whole(byte: bytes) -> None:
    """A 1 MiB value made of one unsafe byte escapes to 4 MiB of its \\xhh, and back."""
    value = byte * (1 << 20)
    escaped = escape_unquoted(value)
    assert escaped == b"\\x%02x" % byte[0] * (1 << 20)
    assert unescape(escaped) == value
