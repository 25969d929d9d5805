"""Turning batches of records into bytes: the common, combined and JSON formats.

Formatting runs on the writer thread, one batch at a time.  A format is an object with
``format_batch(records) -> bytes`` that returns one line per record, each ending in
``\\n``.  Nothing here is called on the request path.

The Apache formats are built as bytes with ``%`` formatting, which measured about twice
as fast as building text and encoding it.  Escaping is the expensive part of a line, and
almost no field needs it, so a whole batch is formatted with the raw values first and
then checked in one pass: if it has only printable ASCII, no backslash, exactly the
template's quotes and one newline per record, no client byte can have changed its
shape and the batch is returned as it is.  Otherwise it is formatted again with every
client-controlled field escaped (see ``_escape``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring_ascii
from typing import Protocol

from ._errors import ConfigurationError
from ._escape import escape
from ._record import Record
from ._timestamps import ClfClock, Rfc3339Clock

_DASH = b"-"
# What a line of an Apache format may hold besides its template's quotes: printable
# ASCII without the backslash, plus the newline that ends each line.
_OUTSIDE_LINE_SHAPE = re.compile(rb"[^\n\x20-\x5b\x5d-\x7e]")


class Format(Protocol):
    """What the writer needs from a format."""

    def format_batch(self, records: Sequence[Record]) -> bytes:
        """Return one ``\\n``-terminated line per record, in order."""
        ...


def _text(value: str) -> bytes:
    # Servers hand over method, protocol and address as text; surrogatepass keeps any
    # code point encodable, and every non-ASCII byte is escaped afterwards.
    return value.encode("utf-8", "surrogatepass")


class ApacheFormat:
    """The Common Log Format, optionally with Referer and User-Agent (combined)."""

    __slots__ = ("_clock", "_combined", "_quotes_per_line")

    def __init__(self, *, combined: bool, utc: bool) -> None:
        self._combined = combined
        self._clock = ClfClock(utc)
        self._quotes_per_line = 6 if combined else 2

    def format_batch(self, records: Sequence[Record]) -> bytes:
        data = self._format(records, _unchanged)
        if (
            _OUTSIDE_LINE_SHAPE.search(data) is None
            and data.count(b'"') == self._quotes_per_line * len(records)
            and data.count(b"\n") == len(records)
        ):
            return data
        return self._format(records, escape)

    def _format(self, records: Sequence[Record], clean: Callable[[bytes], bytes]) -> bytes:
        clock = self._clock
        combined = self._combined
        lines: list[bytes] = []
        append = lines.append
        for (
            when, _, client, method, path, query, protocol, status, sent, referer, agent
        ) in records:  # fmt: skip
            if query:
                path = b"%s?%s" % (path, query)
            line = b'%s - - %s "%s %s %s" %d %s' % (
                clean(_text(client)) if client else _DASH,
                clock(when),
                clean(_text(method)),
                clean(path),
                clean(_text(protocol)),
                status,
                b"%d" % sent if sent else _DASH,
            )
            if combined:
                line = b'%s "%s" "%s"\n' % (
                    line,
                    clean(referer) if referer is not None else _DASH,
                    clean(agent) if agent is not None else _DASH,
                )
            else:
                line += b"\n"
            append(line)
        return b"".join(lines)


def _unchanged(value: bytes) -> bytes:
    return value


def _json_bytes(value: bytes | None) -> str:
    if value is None:
        return "null"
    # Invalid UTF-8 becomes the text \xhh, never a lone surrogate, so every strict
    # JSON parser accepts the line.
    return encode_basestring_ascii(value.decode("utf-8", "backslashreplace"))


def _json_text(value: str | None) -> str:
    return "null" if value is None else encode_basestring_ascii(value)


class JsonFormat:
    """One JSON object per line; ``encode_basestring_ascii`` keeps each line ASCII."""

    __slots__ = ("_clock",)

    def __init__(self, *, utc: bool) -> None:
        self._clock = Rfc3339Clock(utc)

    def format_batch(self, records: Sequence[Record]) -> bytes:
        clock = self._clock
        lines = [
            '{"time":"%s","client":%s,"method":%s,"path":%s,"query":%s,'
            '"protocol":%s,"status":%d,"bytes_sent":%d,"duration_ms":%.3f,'
            '"referer":%s,"user_agent":%s}\n'
            % (
                clock(when),
                _json_text(client),
                _json_text(method),
                _json_bytes(path),
                _json_bytes(query),
                _json_text(protocol),
                status,
                sent,
                duration * 1000.0,
                _json_bytes(referer),
                _json_bytes(agent),
            )
            for (
                when,
                duration,
                client,
                method,
                path,
                query,
                protocol,
                status,
                sent,
                referer,
                agent,
            ) in records
        ]
        return "".join(lines).encode("ascii")


FORMATS = ("combined", "common", "json")


def make_format(name: str, *, utc: bool) -> Format:
    """Return the format called ``name``, or raise a ConfigurationError listing them."""
    if name == "combined":
        return ApacheFormat(combined=True, utc=utc)
    if name == "common":
        return ApacheFormat(combined=False, utc=utc)
    if name == "json":
        return JsonFormat(utc=utc)
    raise ConfigurationError(f"unknown format {name!r}: choose one of {', '.join(FORMATS)}")
