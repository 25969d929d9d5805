"""The escaping rule that keeps every record on exactly one line.

Apache and nginx both write a byte a client controls either as itself, when it is
printable ASCII, or as a ``\\xhh`` escape, but they differ on the quote and the
backslash: Apache writes ``"`` as ``\\"`` and ``\\`` as ``\\\\``, nginx writes them as
``\\x22`` and ``\\x5C``.  Some readers of the combined format (lnav among them) end a
quoted field at the first ``"`` whatever precedes it, so boundlog follows nginx: every
escape is ``\\xhh``, and no escaped field holds a quote at all.  The rule applies to
every client-controlled field of the common, combined and dev formats and of templates,
and to bytes, not text:

* every byte outside ``0x20-0x7e`` becomes ``\\xhh`` (lower-case hex).  That covers C0
  controls, DEL, C1 and the bytes of every character ``str.splitlines()`` treats as a
  line break (``\\x1c-\\x1e``, ``\\x85``, U+2028 and U+2029 are all escaped because each
  of their encodings contains a byte outside the printable range);
* ``"`` becomes ``\\x22`` and ``\\`` becomes ``\\x5c``;
* in the one unquoted field a client can influence, the client address (a server may
  report a socket path or a forwarded value there), a space becomes ``\\x20`` too, so
  that the field still ends at the first space (:func:`escape_unquoted`).

Escaping non-ASCII bytes loses readability for UTF-8 text in exchange for two
properties a log consumer can rely on: a line is ASCII, and :func:`unescape` recovers
the exact bytes the client sent, valid UTF-8 or not.

A client chooses the bytes, so what escaping costs must not depend on them: a value is
escaped by a fixed number of C-level passes over it, never by Python code per byte.
Python's ``unicode_escape`` codec already writes every byte of a latin-1 text outside
``0x20-0x7e`` as ``\\xhh``, except four it writes as ``\\\\``, ``\\t``, ``\\n``
and ``\\r``.  Those four, and the quote (and the space) it leaves alone, are first
moved to the code points ``U+0100`` above themselves, which the codec writes as
``\\u01hh``: one replacement of ``\\u01`` by ``\\x`` then gives their escapes (with
the backslash moved, every other backslash the codec writes starts a ``\\xhh``).
"""

from __future__ import annotations

import codecs
import re

#: The bytes a quoted field may hold unescaped: printable ASCII without ``"`` and ``\\``.
PLAIN = bytes(range(0x20, 0x7F)).translate(None, b'"\\')
_PLAIN_UNQUOTED = PLAIN.replace(b" ", b"")

# The characters unicode_escape does not write as \xhh, for quoted and unquoted fields.
_MOVED = '\\\t\n\r"'
_MOVED_UNQUOTED = _MOVED + " "
# Each moved character's code point is its byte plus this, written \u01hh.
_MOVE = 0x100
_MOVED_ESCAPE = b"\\u01"
_HEX_ESCAPE = b"\\x"

_ESCAPE_SEQUENCE = re.compile(rb'\\(?:x([0-9a-fA-F]{2})|(["\\]))')


def _escaped(value: bytes, plain: bytes, moved: str) -> bytes:
    if value.isascii() and not value.translate(None, plain):
        return value
    text = value.decode("latin-1")
    moved_any = False
    for char in moved:
        if char in text:
            text = text.replace(char, chr(ord(char) + _MOVE))
            moved_any = True
    escaped = codecs.unicode_escape_encode(text)[0]
    return escaped.replace(_MOVED_ESCAPE, _HEX_ESCAPE) if moved_any else escaped


def _unescape_sequence(match: re.Match[bytes]) -> bytes:
    hex_digits, literal = match.groups()
    if literal is not None:
        return literal
    return bytes((int(hex_digits, 16),))


def escape(value: bytes) -> bytes:
    """Return ``value`` with every byte that could break a log line escaped as ``\\xhh``."""
    return _escaped(value, PLAIN, _MOVED)


def escape_unquoted(value: bytes) -> bytes:
    """Return ``value`` escaped as by :func:`escape`, and every space as ``\\x20``."""
    return _escaped(value, _PLAIN_UNQUOTED, _MOVED_UNQUOTED)


def unescape(value: bytes) -> bytes:
    """Invert :func:`escape` and :func:`escape_unquoted`: ``unescape(escape(b)) == b``.

    It reads ``\\xhh`` in either case (nginx writes upper case), and Apache's ``\\"``
    and ``\\\\``, which earlier versions of boundlog wrote too.
    """
    return _ESCAPE_SEQUENCE.sub(_unescape_sequence, value)
