"""The escaping rule that keeps every record on exactly one line.

Apache and nginx both write a byte a client controls either as itself, when it is
printable ASCII, or as a ``\\xhh`` escape; ``"`` and ``\\`` get a backslash so that a
quoted field always ends at the first unescaped quote.  boundlog uses the same rule for
every field of the common and combined formats.  It is applied to bytes, not to text:

* every byte outside ``0x20-0x7e`` becomes ``\\xhh`` (lower-case hex).  That covers C0
  controls, DEL, C1 and the bytes of every character ``str.splitlines()`` treats as a
  line break (``\\x1c-\\x1e``, ``\\x85``, U+2028 and U+2029 are all escaped because each
  of their encodings contains a byte outside the printable range);
* ``"`` becomes ``\\"`` and ``\\`` becomes ``\\\\``;
* in the one unquoted field a client can influence, the client address (a server may
  report a socket path or a forwarded value there), a space becomes ``\\x20`` too, so
  that the field still ends at the first space (:func:`escape_unquoted`).

Escaping non-ASCII bytes loses readability for UTF-8 text in exchange for two
properties a log consumer can rely on: a line is ASCII, and :func:`unescape` recovers
the exact bytes the client sent, valid UTF-8 or not.
"""

from __future__ import annotations

import re

_UNSAFE_BYTE = re.compile(rb"[^\x20\x21\x23-\x5b\x5d-\x7e]")
_UNSAFE_UNQUOTED_BYTE = re.compile(rb"[^\x21\x23-\x5b\x5d-\x7e]")
_ESCAPE_SEQUENCE = re.compile(rb'\\(?:x([0-9a-fA-F]{2})|(["\\]))')

_ESCAPES = {i: b"\\x%02x" % i for i in range(256)}
_ESCAPES[0x22] = b'\\"'
_ESCAPES[0x5C] = b"\\\\"


def _escape_byte(match: re.Match[bytes]) -> bytes:
    return _ESCAPES[match.group()[0]]


def _unescape_sequence(match: re.Match[bytes]) -> bytes:
    hex_digits, literal = match.groups()
    if literal is not None:
        return literal
    return bytes((int(hex_digits, 16),))


def escape(value: bytes) -> bytes:
    """Return ``value`` with every byte that could break a log line escaped."""
    if _UNSAFE_BYTE.search(value) is None:
        return value
    return _UNSAFE_BYTE.sub(_escape_byte, value)


def escape_unquoted(value: bytes) -> bytes:
    """Return ``value`` escaped as by :func:`escape`, and every space as ``\\x20``."""
    if _UNSAFE_UNQUOTED_BYTE.search(value) is None:
        return value
    return _UNSAFE_UNQUOTED_BYTE.sub(_escape_byte, value)


def unescape(value: bytes) -> bytes:
    """Invert :func:`escape` and :func:`escape_unquoted`: ``unescape(escape(b)) == b``."""
    return _ESCAPE_SEQUENCE.sub(_unescape_sequence, value)
