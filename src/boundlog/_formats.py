"""Turning batches of records into bytes: the common, combined, JSON and dev formats.

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
import os
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from json.encoder import encode_basestring_ascii
from operator import mul
from typing import Any, Protocol, TypeVar, cast

from ._color import use_color
from ._errors import ConfigurationError
from ._escape import escape, escape_unquoted
from ._headers import HeaderReader, header_name
from ._record import Record
from ._timestamps import ClfClock, Rfc3339Clock, TimeOfDayClock

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
    """What the writer needs from a format.

    A format may also say which header fields it reads, as ``request_header_names``
    and ``response_header_names`` attributes (frozensets of lower-case bytes):
    integrations then keep just those fields in a record rather than the server's
    header lists (or a whole WSGI environ), which a queued record would keep alive.
    Without them, records keep the server's headers whole.
    """

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

    @property
    def request_header_names(self) -> frozenset[bytes]:
        """The request header fields the lines show."""
        return frozenset(self._headers.names if self._headers is not None else ())

    #: Apache's common and combined lines show no response header field.
    response_header_names: frozenset[bytes] = frozenset()

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
    templates: tuple[str, str],
    statuses: tuple[int, ...],
    sents: tuple[int, ...],
    durations: tuple[float, ...],
) -> list[str]:
    """Return the status, bytes sent and milliseconds of each record, keyed by the template.

    ``templates`` hold ``%d``, ``%d`` and a newline-terminated ``%.3f`` (for a batch of
    finite durations, formatted in one operation), or ``%s`` (for any batch).
    """
    milliseconds = tuple(map(mul, durations, repeat(1000.0)))
    values: Sequence[object] = milliseconds
    template = templates[0]
    if not math.isfinite(sum(milliseconds)):
        values = list(map(_json_milliseconds, milliseconds))
        template = templates[1]
    numbers = (template * len(statuses)) % tuple(
        chain.from_iterable(zip(statuses, sents, values, strict=True))
    )
    fields = numbers.split("\n")
    fields.pop()  # the empty string after the last newline
    return fields


def _json_milliseconds(milliseconds: float) -> str:
    # NaN and infinity have no JSON spelling.
    return "%.3f" % milliseconds if math.isfinite(milliseconds) else "null"


#: The fields of a JSON line, in order, by their default keys.
JSON_FIELDS = (
    "time", "client", "method", "path", "query", "protocol", "status", "bytes_sent",
    "duration_ms", "referer", "user_agent", "request_id",
)  # fmt: skip
_BUILT_IN_HEADERS = ("referer", "user-agent", "x-request-id")


class JsonFormat:
    """One JSON object per line, with the fields of a :class:`Record` and its time.

    ``request_headers`` and ``response_headers`` add header fields after the built-in
    ones: an iterable of names (keyed ``x_forwarded_proto`` for ``X-Forwarded-Proto``,
    ``response_content_type`` for a response's ``Content-Type``) or a mapping from
    name to key.  ``rename`` maps built-in fields to other keys.  ``allow_headers``
    names the credential headers whose values may be logged instead of ``[redacted]``.
    """

    __slots__ = (
        "_clock", "_layout", "_method", "_numbers", "_protocol", "_request", "_request_added",
        "_response", "_response_added",
    )  # fmt: skip

    def __init__(
        self,
        *,
        utc: bool = False,
        request_headers: Iterable[str] | Mapping[str, str] = (),
        response_headers: Iterable[str] | Mapping[str, str] = (),
        rename: Mapping[str, str] | None = None,
        allow_headers: Iterable[str] = (),
    ) -> None:
        keys = _built_in_keys(rename or {})
        request_added = _header_keys("request_headers", request_headers, prefix="")
        response_added = _header_keys("response_headers", response_headers, prefix="response_")
        _check_unique_keys(
            [(key, f"field {field}") for field, key in keys.items()]
            + [(key, f"request header {name}") for name, key in request_added]
            + [(key, f"response header {name}") for name, key in response_added]
        )
        allow = _names("allow_headers", allow_headers)
        # The built-in header fields are the request reader's first columns.
        self._request = HeaderReader(
            [*_BUILT_IN_HEADERS, *(name for name, _ in request_added)], allow=allow
        )
        self._response = HeaderReader([name for name, _ in response_added], allow=allow)
        # Each added field's column in its reader (a field named twice is read once).
        self._request_added = [
            self._request.names.index(header_name(name)) for name, _ in request_added
        ]
        self._response_added = [
            self._response.names.index(header_name(name)) for name, _ in response_added
        ]
        self._clock = Rfc3339Clock(utc)
        # Keys are escaped once, here.  The method, protocol and numbers fields carry
        # the template text around them.
        key = {field: encode_basestring_ascii(name) for field, name in keys.items()}
        self._method = f",{key['method']}:", f",{key['path']}:"
        self._protocol = f",{key['protocol']}:", f",{key['status']}:"
        numbers = f"%d,{_percent_safe(key['bytes_sent'])}:%d,{_percent_safe(key['duration_ms'])}:"
        self._numbers = numbers + "%.3f\n", numbers + "%s\n"
        added_keys = [encode_basestring_ascii(name) for _, name in request_added + response_added]
        self._layout = _Layout(
            [
                "{" + key["time"] + ':"', None, '",' + key["client"] + ":", None, None, None,
                "," + key["query"] + ":", None, None, None, "," + key["referer"] + ":", None,
                "," + key["user_agent"] + ":", None, "," + key["request_id"] + ":", None,
                *chain.from_iterable(("," + added + ":", None) for added in added_keys),
                "}\n",
            ]
        )  # fmt: skip

    @property
    def request_header_names(self) -> frozenset[bytes]:
        """The request header fields the lines show."""
        return frozenset(self._request.names)

    @property
    def response_header_names(self) -> frozenset[bytes]:
        """The response header fields the lines show."""
        return frozenset(self._response.names)

    def format_batch(self, records: Sequence[Record]) -> bytes:
        if not records:
            return b""
        (
            times, durations, clients, methods, paths, queries, protocols, statuses, sents,
            request_headers, response_headers,
        ) = zip(*records, strict=True)  # fmt: skip
        request_columns = self._request.columns(request_headers)
        response_columns = self._response.columns(response_headers) if self._response_added else []
        before_method, before_path = self._method
        before_protocol, before_status = self._protocol
        fields: list[Iterable[str]] = [
            self._clock.stamps(times),
            _json_texts(clients),
            _per_value(methods, lambda method: before_method + _json_text(method) + before_path),
            _json_bytes(paths),
            _json_bytes(queries),
            _per_value(
                protocols, lambda protocol: before_protocol + _json_text(protocol) + before_status
            ),
            _json_numbers(
                self._numbers, statuses, _bytes_on_the_wire(methods, statuses, sents), durations
            ),
            *map(_json_bytes, request_columns[: len(_BUILT_IN_HEADERS)]),
            *(_json_bytes(request_columns[index]) for index in self._request_added),
            *(_json_bytes(response_columns[index]) for index in self._response_added),
        ]
        return "".join(self._layout.lines(fields, len(records))).encode("ascii")


def _built_in_keys(rename: Mapping[str, str]) -> dict[str, str]:
    """Each built-in field's key, or a ConfigurationError naming an unknown field."""
    if not isinstance(rename, Mapping):
        raise ConfigurationError(
            f"rename must map built-in fields to keys, e.g. {{'time': '@timestamp'}}, not {rename!r}"
        )
    unknown = [field for field in rename if field not in JSON_FIELDS]
    if unknown:
        raise ConfigurationError(
            f"rename names unknown field(s) {', '.join(map(repr, unknown))}: the built-in "
            f"fields are {', '.join(JSON_FIELDS)}"
        )
    for field, key in rename.items():
        _check_key(f"rename[{field!r}]", key)
    return {field: rename.get(field, field) for field in JSON_FIELDS}


def _header_keys(
    option: str, headers: Iterable[str] | Mapping[str, str], *, prefix: str
) -> list[tuple[str, str]]:
    """The ``(header name, key)`` pairs a header option asks for, checked."""
    if isinstance(headers, Mapping):
        pairs = list(headers.items())
    else:
        pairs = [
            (name, prefix + name.lower().replace("-", "_")) for name in _names(option, headers)
        ]
    for name, key in pairs:
        header_name(name)
        _check_key(f"{option}[{name!r}]", key)
    return pairs


def _names(option: str, names: Iterable[str]) -> tuple[str, ...]:
    """The header names of an option, which must not be a single string."""
    if isinstance(names, str | bytes):
        raise ConfigurationError(
            f"{option} must be a list of header names, not the single string {names!r}: "
            f"write [{names!r}]"
        )
    checked = tuple(names)
    for name in checked:
        header_name(name)
    return checked


def _percent_safe(text: str) -> str:
    return text.replace("%", "%%")


def _check_key(what: str, key: object) -> None:
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"{what} must be a non-empty string key, not {key!r}")


def _check_unique_keys(keys: Sequence[tuple[str, str]]) -> None:
    """Raise a ConfigurationError naming the fields that would share a key."""
    owners: dict[str, list[str]] = {}
    for key, what in keys:
        owners.setdefault(key, []).append(what)
    shared = {key: whats for key, whats in owners.items() if len(whats) > 1}
    if shared:
        clashes = "; ".join(f"{' and '.join(whats)} as {key!r}" for key, whats in shared.items())
        raise ConfigurationError(
            f"two fields of a JSON line cannot share a key: {clashes}; give one another "
            "key (rename=, or a mapping of header names to keys)"
        )


_SGR_RESET = b"\x1b[0m"
_SGR_DIM = b"\x1b[2m"
# By status class: 2xx green, 3xx cyan, 4xx yellow, 5xx red.
_SGR_STATUS = {2: b"\x1b[32m", 3: b"\x1b[36m", 4: b"\x1b[33m", 5: b"\x1b[31m"}
# Below this many milliseconds a duration still reads as milliseconds once rounded.
_LAST_MILLISECONDS = 999.95


class DevFormat:
    """A short line for a developer's terminal: ``14:13:20 GET /items?page=2 201 4.2ms``.

    The time is the clock time alone (local, or UTC with ``utc=True``); the duration is
    in milliseconds, or in seconds from one second on.  ``color=True`` colours the
    status by its class and dims the duration; ``color=None`` decides from the
    environment and, in an :class:`AccessLog`, from whether the sink is a terminal
    (see ``_color``).
    """

    __slots__ = ("_clock", "_color", "_dim", "_layout", "_milliseconds_template", "_utc", "color")

    def __init__(self, *, color: bool | None = None, utc: bool = False) -> None:
        #: The colour choice as given: None leaves it to the environment and the sink.
        self.color = color
        self._utc = utc
        self._color = color if color is not None else use_color(os.environ, is_terminal=False)
        self._clock = TimeOfDayClock(utc, suffix=b" ")
        self._dim = (_SGR_DIM, _SGR_RESET) if self._color else (b"", b"")
        self._milliseconds_template = self._dim[0] + b"%.1fms" + self._dim[1] + b"\n"
        self._layout = _Layout([None, None, None, None, None, b" ", None, b" ", None, b"\n"])

    #: A dev line shows no header field.
    request_header_names: frozenset[bytes] = frozenset()
    response_header_names: frozenset[bytes] = frozenset()

    def for_sink(self, *, is_terminal: bool) -> DevFormat:
        """This format as it writes to a sink that is (or is not) a terminal."""
        if self.color is not None:
            return self
        return DevFormat(color=use_color(os.environ, is_terminal=is_terminal), utc=self._utc)

    def format_batch(self, records: Sequence[Record]) -> bytes:
        if not records:
            return b""
        times, durations, _, methods, paths, queries, _, statuses, _, _, _ = zip(
            *records, strict=True
        )
        fields: list[Iterable[bytes]] = [
            self._clock.stamps(times),
            _per_value(methods, lambda method: escape(_text(method)) + b" "),
            _escaped_column(paths),
            map(_NO_SEPARATOR_FOR_EMPTY_QUERY.get, queries, repeat(b"?")),
            _escaped_column(queries),
            _per_value(statuses, self._status),
            self._durations(durations),
        ]
        return b"".join(self._layout.lines(fields, len(records)))

    def _status(self, status: int) -> bytes:
        colour = _SGR_STATUS.get(status // 100) if self._color else None
        return b"%d" % status if colour is None else colour + b"%d" % status + _SGR_RESET

    def _durations(self, seconds: tuple[float, ...]) -> list[bytes]:
        milliseconds = tuple(map(mul, seconds, repeat(1000.0)))
        if math.isfinite(sum(milliseconds)) and max(milliseconds) < _LAST_MILLISECONDS:
            # The usual batch: one %-formatting for the whole column.
            fields = ((self._milliseconds_template * len(milliseconds)) % milliseconds).split(b"\n")
            fields.pop()  # the empty string after the last newline
            return fields
        return [self._dim[0] + _dev_duration(value) + self._dim[1] for value in seconds]


def _dev_duration(seconds: float) -> bytes:
    if not math.isfinite(seconds):
        return b"-"
    if seconds * 1000.0 < _LAST_MILLISECONDS:
        return b"%.1fms" % (seconds * 1000.0)
    return b"%.2fs" % seconds


FORMATS = ("combined", "common", "dev", "json")


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
    if name == "dev":
        return DevFormat(utc=utc)
    if "%" in name:
        # Imported here: templates are built from this module's helpers.
        from ._templates import Template

        return Template(name, utc=utc)
    raise ConfigurationError(
        f"unknown format {name!r}: choose one of {', '.join(FORMATS)}, or write a template "
        "such as '%h %t \"%r\" %>s %b %D'"
    )
