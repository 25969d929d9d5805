"""Turning batches of records into bytes: the common, combined and JSON formats.

Formatting runs on the writer thread, one batch at a time.  A format is an object with
``format_batch(records) -> bytes`` that returns one line per record, each ending in
``\\n``.  Nothing here is called on the request path.

A batch is formatted column by column, because a Python loop over records costs about
three times as much: the records are transposed with ``zip``, each column is converted
by C-level ``map``, ``join`` and ``%`` calls over the whole batch (values that repeat,
such as methods, protocols and statuses, are converted once per distinct value), and
the columns are laid between the template's own text by extended-slice assignment into
one list of pieces that is joined once.

Escaping is the expensive part of an Apache line, and almost no field needs it, so a
whole batch is built with the raw values first and then checked in one pass: if it has
only printable ASCII, no backslash, and exactly the template's quotes and newlines in
the template's order, no client byte can have changed its shape and the batch is
returned as it is.  Otherwise it is built again with every client-controlled column
that holds an unsafe byte escaped (see ``_escape``).

JSON lines are ASCII (``encode_basestring_ascii``) and valid for strict parsers: bytes
that are not UTF-8, and lone surrogates in text, are written as the text ``\\xhh``;
a duration that is not finite is ``null``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import chain, compress, repeat
from json.encoder import encode_basestring_ascii
from operator import mul
from typing import Any, Protocol, TypeVar, cast

from ._errors import ConfigurationError
from ._escape import escape, escape_unquoted
from ._headers import HeaderReader
from ._record import Record
from ._timestamps import ClfClock, Rfc3339Clock

# The bytes a field may hold unescaped: printable ASCII without the quote and backslash.
_PLAIN = bytes(range(0x20, 0x7F)).translate(None, b'"\\')
_DASH = b"-"
_DASH_FOR_NONE: dict[bytes | None, bytes] = {None: _DASH}
_DASH_FOR_ZERO = {b"0": _DASH}
_BODILESS = frozenset((204, 304))
_NO_SEPARATOR_FOR_EMPTY_QUERY = {b"": b""}
_EMPTY_FOR_NONE: dict[object, bytes] = {None: b""}
_NULL_FOR_NONE: dict[object, str] = {None: "null"}

_Value = TypeVar("_Value", bound=Hashable)
_Piece = TypeVar("_Piece", bytes, str)


class Format(Protocol):
    """What the writer needs from a format."""

    def format_batch(self, records: Sequence[Record]) -> bytes:
        """Return one ``\\n``-terminated line per record, in order."""
        ...


def _text(value: str) -> bytes:
    # Servers hand over method, protocol and address as text; surrogatepass keeps any
    # code point encodable, and every non-ASCII byte is escaped afterwards.
    return value.encode("utf-8", "surrogatepass")


def _per_value(values: Sequence[_Value], convert: Callable[[_Value], _Piece]) -> Iterable[_Piece]:
    """Convert each distinct value once, then look every value up."""
    converted = {value: convert(value) for value in set(values)}
    return map(converted.__getitem__, values)


class _Layout:
    """A line as a list of pieces: the template's own text, with a place for each field."""

    __slots__ = ("_line", "_places")

    def __init__(self, template: Sequence[bytes | str | None]) -> None:
        self._line = [piece if piece is not None else "" for piece in template]
        self._places = [i for i, piece in enumerate(template) if piece is None]

    def lines(self, fields: Sequence[Iterable[_Piece]], count: int) -> list[_Piece]:
        """Return the pieces of ``count`` lines; ``fields`` holds a column per place."""
        pieces: list[Any] = self._line * count
        step = len(self._line)
        for place, field in zip(self._places, fields, strict=True):
            # Raises ValueError, never misaligns, if a column has the wrong length.
            pieces[place::step] = field
        return pieces


class ApacheFormat:
    """The Common Log Format, optionally with Referer and User-Agent (combined)."""

    __slots__ = ("_clock", "_headers", "_layout", "_shape")

    def __init__(self, *, combined: bool, utc: bool) -> None:
        self._headers = HeaderReader(("referer", "user-agent")) if combined else None
        # The time, method, protocol and status fields carry the template text around
        # them: client - - [time] "method path?query protocol" status bytes "referer" "agent"
        self._clock = ClfClock(utc, prefix=b" - - ", suffix=b' "')
        self._layout = _Layout(
            [None, None, None, None, None, None, None, None, None]
            + ([b' "', None, b'" "', None, b'"\n'] if combined else [b"\n"])
        )
        # What remains of a line once its plain bytes are deleted: the template's quotes.
        self._shape = b'""""""\n' if combined else b'""\n'

    def format_batch(self, records: Sequence[Record]) -> bytes:
        if not records:
            return b""
        count = len(records)
        times, _, clients, methods, paths, queries, protocols, statuses, sents, headers, _ = zip(
            *records, strict=True
        )
        # The fields no client controls are built once, for both passes.
        stamps = self._clock.stamps(times)
        separators = list(map(_NO_SEPARATOR_FOR_EMPTY_QUERY.get, queries, repeat(b"?")))
        status_fields = list(_per_value(statuses, b"%d ".__mod__))
        sent_fields = _sent_fields(_bytes_on_the_wire(methods, statuses, sents))
        header_fields = (
            [_dash_for_none(column) for column in self._headers.columns(headers)]
            if self._headers is not None
            else []
        )

        def join(
            clients: Sequence[bytes],
            clean: Callable[[bytes], bytes],
            clean_column: Callable[[Sequence[bytes]], Sequence[bytes]],
        ) -> bytes:
            fields: list[Iterable[bytes]] = [
                clients,
                stamps,
                _per_value(methods, lambda method: clean(_text(method)) + b" "),
                clean_column(paths),
                separators,
                clean_column(queries),
                _per_value(protocols, lambda protocol: b' %s" ' % clean(_text(protocol))),
                status_fields,
                sent_fields,
                *map(clean_column, header_fields),
            ]
            return b"".join(self._layout.lines(fields, count))

        raw_clients = _raw_clients(clients)
        if raw_clients is not None:
            data = join(raw_clients, _unchanged, _unchanged)
            if data.translate(None, _PLAIN) == self._shape * count:
                return data
        return join(_escaped_clients(clients, raw_clients), escape, _escaped_column)


def _unchanged(value: _Value) -> _Value:
    return value


def _dash_for_none(values: Sequence[bytes | None]) -> Sequence[bytes]:
    if None in values:
        values = tuple(map(_DASH_FOR_NONE.get, values, values))
    return cast("Sequence[bytes]", values)


def _raw_clients(clients: Sequence[str | None]) -> list[bytes] | None:
    """Return the clients as bytes, or None if one holds a space or a newline."""
    if None in clients or "" in clients:
        clients = [client or "-" for client in clients]
    text = "\n".join(cast("Sequence[str]", clients))
    # A space would end the unquoted field early and a newline would misalign the
    # split: both need the escaped path.
    if " " in text:
        return None
    fields = _text(text).split(b"\n")
    return fields if len(fields) == len(clients) else None


def _escaped_clients(
    clients: Sequence[str | None], raw_clients: list[bytes] | None
) -> Sequence[bytes]:
    """Return the clients escaped, reusing ``raw_clients`` when none needs escaping."""
    if raw_clients is not None and not b"".join(raw_clients).translate(None, _PLAIN):
        return raw_clients
    return [escape_unquoted(_text(client)) if client else _DASH for client in clients]


def _escaped_column(values: Sequence[bytes]) -> Sequence[bytes]:
    """Return ``values`` with the ones that need it escaped."""
    if not b"".join(values).translate(None, _PLAIN):
        return values
    # What is left of each value once its plain bytes are deleted: only the values
    # with something left go through escape().
    leftovers = map(bytes.translate, values, repeat(None), repeat(_PLAIN))
    escaped = list(values)
    for index in compress(range(len(values)), leftovers):
        escaped[index] = escape(values[index])
    return escaped


def _bytes_on_the_wire(
    methods: tuple[str, ...], statuses: tuple[int, ...], sents: tuple[int, ...]
) -> tuple[int, ...]:
    """The body bytes servers really send: none for HEAD, 1xx, 204 and 304 responses.

    An application may hand a body to the server for those (a HEAD handler reusing its
    GET code does); the server discards it, so Apache and nginx would log 0 bytes.
    """
    if "HEAD" not in methods and _BODILESS.isdisjoint(statuses) and min(statuses) >= 200:
        return sents
    return tuple(
        0 if method == "HEAD" or status in _BODILESS or 100 <= status < 200 else sent
        for method, status, sent in zip(methods, statuses, sents, strict=True)
    )


def _sent_fields(sents: tuple[int, ...]) -> list[bytes]:
    # One %-formatting for the whole column; %b is "-" when no body byte was sent.
    fields = ((b"%d " * len(sents)) % sents).split()
    return list(map(_DASH_FOR_ZERO.get, fields, fields)) if 0 in sents else fields


def _json_text(value: str | None) -> str:
    if value is None:
        return "null"
    if not value.isascii():
        # A lone surrogate is not Unicode and strict parsers reject its \udxxx escape:
        # write its bytes as an invalid UTF-8 byte is written.
        value = _text(value).decode("utf-8", "backslashreplace")
    return encode_basestring_ascii(value)


def _json_texts(values: Sequence[str | None]) -> Iterable[str]:
    if None not in values:
        texts = cast("Sequence[str]", values)
        if "".join(texts).isascii():
            return map(encode_basestring_ascii, texts)
    return map(_json_text, values)


def _json_bytes(values: Sequence[bytes | None]) -> Iterable[str]:
    has_none = None in values
    present = cast(
        "Sequence[bytes]", tuple(map(_EMPTY_FOR_NONE.get, values, values)) if has_none else values
    )
    # Invalid UTF-8 becomes the text \xhh, never a lone surrogate.  The column is decoded
    # and encoded as one string with a newline between values; 0x0a is never part of a
    # UTF-8 sequence, so each value decodes as it would alone, and each written \n
    # becomes the end of one JSON string and the start of the next.
    text = b"\n".join(present).decode("utf-8", "backslashreplace")
    strings = encode_basestring_ascii(text).replace("\\n", '"\n"').split("\n")
    if len(strings) != len(values):
        # A value held a newline, or a backslash before an n: encode one at a time.
        strings = [
            encode_basestring_ascii(value.decode("utf-8", "backslashreplace")) for value in present
        ]
    return map(_NULL_FOR_NONE.get, values, strings) if has_none else strings


def _json_numbers(
    statuses: tuple[int, ...], sents: tuple[int, ...], durations: tuple[float, ...]
) -> list[str]:
    """Return ``status,"bytes_sent":sent,"duration_ms":milliseconds`` for each record."""
    milliseconds = tuple(map(mul, durations, repeat(1000.0)))
    values: Sequence[object] = milliseconds
    template = '%d,"bytes_sent":%d,"duration_ms":%.3f\n'
    if not math.isfinite(sum(milliseconds)):
        values = list(map(_json_milliseconds, milliseconds))
        template = '%d,"bytes_sent":%d,"duration_ms":%s\n'
    numbers = (template * len(statuses)) % tuple(
        chain.from_iterable(zip(statuses, sents, values, strict=True))
    )
    fields = numbers.split("\n")
    fields.pop()  # the empty string after the last newline
    return fields


def _json_milliseconds(milliseconds: float) -> str:
    # NaN and infinity have no JSON spelling.
    return "%.3f" % milliseconds if math.isfinite(milliseconds) else "null"


class JsonFormat:
    """One JSON object per line, with the fields of a :class:`Record` and its time."""

    __slots__ = ("_clock", "_headers", "_layout")

    def __init__(self, *, utc: bool) -> None:
        self._clock = Rfc3339Clock(utc)
        self._headers = HeaderReader(("referer", "user-agent"))
        # The method and protocol fields carry the template text around them.
        self._layout = _Layout(
            [
                '{"time":"', None, '","client":', None, None, None, ',"query":', None, None,
                None, ',"referer":', None, ',"user_agent":', None, "}\n",
            ]
        )  # fmt: skip

    def format_batch(self, records: Sequence[Record]) -> bytes:
        if not records:
            return b""
        (
            times, durations, clients, methods, paths, queries, protocols, statuses, sents,
            headers, _,
        ) = zip(*records, strict=True)  # fmt: skip
        referers, agents = self._headers.columns(headers)
        fields: list[Iterable[str]] = [
            self._clock.stamps(times),
            _json_texts(clients),
            _per_value(methods, lambda method: f',"method":{_json_text(method)},"path":'),
            _json_bytes(paths),
            _json_bytes(queries),
            _per_value(protocols, lambda protocol: f',"protocol":{_json_text(protocol)},"status":'),
            _json_numbers(statuses, _bytes_on_the_wire(methods, statuses, sents), durations),
            _json_bytes(referers),
            _json_bytes(agents),
        ]
        return "".join(self._layout.lines(fields, len(records))).encode("ascii")


FORMATS = ("combined", "common", "json")


def make_format(name: str | Format, *, utc: bool) -> Format:
    """Return the format called ``name``, or raise a ConfigurationError listing them.

    A format object (anything with ``format_batch``) is returned as it is: it was
    built with options of its own, ``utc`` among them.
    """
    if not isinstance(name, str):
        if not callable(getattr(name, "format_batch", None)):
            raise ConfigurationError(
                f"format must be a name ({', '.join(FORMATS)}) or a format object with a "
                f"format_batch method, not {name!r}"
            )
        return name
    if name == "combined":
        return ApacheFormat(combined=True, utc=utc)
    if name == "common":
        return ApacheFormat(combined=False, utc=utc)
    if name == "json":
        return JsonFormat(utc=utc)
    if "%" in name:
        # Imported here: templates are built from this module's helpers.
        from ._templates import Template

        return Template(name, utc=utc)
    raise ConfigurationError(
        f"unknown format {name!r}: choose one of {', '.join(FORMATS)}, or write a template "
        "such as '%h %t \"%r\" %>s %b %D'"
    )
