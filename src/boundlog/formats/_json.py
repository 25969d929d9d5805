"""JSON lines: one object per record, built column-wise like the Apache lines.

JSON lines are ASCII (``encode_basestring_ascii``) and valid for strict parsers; a
duration that is not finite is ``null``.  A string gives back exactly the bytes the
client sent, valid UTF-8 or not, and no two byte strings give the same string:

* a value that is valid UTF-8 is the text it encodes;
* a value that is not is its bytes with each byte from ``0x80`` on written as the text
  ``\\xhh`` (lower-case hex), its valid characters too;
* in both, a backslash is the text ``\\x5c``, so that every backslash in a string
  starts an escape: a byte ``0xff`` is ``\\xff``, the four characters ``\\xff`` are
  ``\\x5cxff``.

So ``boundlog.unescape(string.encode("utf-8"))`` recovers the bytes of a decoded
string.  Text fields (client, method, protocol) are their UTF-8 bytes under the same
rule (a lone surrogate makes them invalid UTF-8).  Every step is a C-level pass over a
value, whatever bytes a client chooses.

When the C core is built (``_core``), ``JsonFormat.format_batch`` runs its C
counterpart (``csrc/formats/json.c``) instead; the code here stays the reference it is tested
against (``tests/speedups/test_speedups_json.py``) and formats any batch the C code hands back.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping, Sequence
from itertools import chain, repeat
from json.encoder import encode_basestring_ascii
from operator import mul
from typing import cast

from .._core import CompiledFirst
from .._core import format_json as _format_json
from .._errors import ConfigurationError
from ..capture._trace import trace_ids
from ..record._headers import REDACTED, HeaderReader, environ_key, header_name, header_names
from ..record._notes import note_text
from ..record._record import COMPLETED, ENVIRON, ROUTE, TRACE, Extras, Notes, Record
from ._columns import (
    _bytes_on_the_wire,
    _Layout,
    _per_value,
    _text,
)
from ._timestamps import Rfc3339Clock

_EMPTY_FOR_NONE: dict[object, bytes] = {None: b""}
_NULL_FOR_NONE: dict[object, str] = {None: "null"}
_BACKSLASH = b"\\"
_BACKSLASH_ESCAPE = b"\\x5c"


def _json_text(value: str | None) -> str:
    if value is None:
        return "null"
    if value.isascii() and "\\" not in value:
        return encode_basestring_ascii(value)
    return _json_string(_text(value))


def _json_texts(values: Sequence[str | None]) -> Iterable[str]:
    if None not in values:
        texts = cast("Sequence[str]", values)
        joined = "".join(texts)
        if joined.isascii() and "\\" not in joined:
            return map(encode_basestring_ascii, texts)
    return map(_json_text, values)


def _json_string(value: bytes) -> str:
    """The JSON string of one value, by the rule in the module's docstring."""
    value = value.replace(_BACKSLASH, _BACKSLASH_ESCAPE)
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = value.decode("latin-1").encode("ascii", "backslashreplace").decode("ascii")
    return encode_basestring_ascii(text)


#: A redacted header field's JSON string, as bytes (for the C core).
_REDACTED = encode_basestring_ascii(REDACTED.decode("ascii")).encode("ascii")


def _json_bytes(values: Sequence[bytes | None]) -> Iterable[str]:
    has_none = None in values
    present = cast(
        "Sequence[bytes]", tuple(map(_EMPTY_FOR_NONE.get, values, values)) if has_none else values
    )
    strings = _json_column(present)
    return map(_NULL_FOR_NONE.get, values, strings) if has_none else strings


def _json_column(values: Sequence[bytes]) -> list[str]:
    """The JSON string of each value."""
    strings = _json_joined(values)
    # Otherwise value by value, so that a hostile value costs its own size, not the column's.
    return strings if strings is not None else list(map(_json_string, values))


def _json_joined(values: Sequence[bytes]) -> list[str] | None:
    """The JSON string of each value, encoded as one string, or None if a value is not
    valid UTF-8 or holds a newline."""
    # The column is decoded and encoded as one string with a newline between values;
    # 0x0a is never part of a UTF-8 sequence and every backslash is escaped first, so
    # each written \n is the end of one JSON string and the start of the next.
    try:
        text = b"\n".join(values).replace(_BACKSLASH, _BACKSLASH_ESCAPE).decode("utf-8")
    except UnicodeDecodeError:
        return None
    # One name rebound at each step, so that no more than two copies are held at once.
    text = encode_basestring_ascii(text)
    text = text.replace("\\n", '"\n"')
    # At most one split too many, however many newlines the values hold.
    strings = text.split("\n", len(values))
    return strings if len(strings) == len(values) else None


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


# The built-in fields of a JSON line by their default keys, in order: those of the
# record's own fields, those of its request header fields, and those after any added
# header fields, from its extras (and the traceparent header).
_RECORD_FIELDS = (
    "time", "client", "method", "path", "query", "protocol", "status", "bytes_sent",
    "duration_ms",
)  # fmt: skip
_HEADER_FIELDS = ("referer", "user_agent", "request_id")
_EXTRAS_FIELDS = ("route", "trace_id", "span_id", "completed")
#: The fields of a record's extras a JSON line shows when asked (``extras=``), after
#: the built-in ones: learning them costs each request something more.
OPTIONAL_EXTRAS = ("bytes_received", "close_code")
#: The built-in fields of a JSON line, by their default keys.
JSON_FIELDS = _RECORD_FIELDS + _HEADER_FIELDS + _EXTRAS_FIELDS
_BUILT_IN_HEADERS = ("referer", "user-agent", "x-request-id")
# Read for the trace ids of a record without a span's (see _trace), never written.
_TRACEPARENT = "traceparent"


class JsonFormat(CompiledFirst):
    """One JSON object per line, with the fields of a :class:`Record` and its time.

    ``request_headers`` and ``response_headers`` add header fields after the built-in
    ones: an iterable of names (keyed ``x_forwarded_proto`` for ``X-Forwarded-Proto``,
    ``response_content_type`` for a response's ``Content-Type``) or a mapping from
    name to key.  ``rename`` maps built-in fields to other keys.  ``allow_headers``
    names the credential headers whose values may be logged instead of ``[redacted]``.
    """

    __slots__ = (
        "_before_extras", "_clock", "_environ", "_extras_fields", "_header_fields", "_keys",
        "_layout", "_method", "_numbers", "_optional", "_protocol", "_request", "_request_added",
        "_response", "_response_added", "_texts", "_trace_header", "_traceparent",
        "environ_names", "reads_extras",
    )  # fmt: skip

    #: JSON lines show a record's notes (``boundlog.add_fields``).
    reads_notes = True

    def __init__(
        self,
        *,
        utc: bool = False,
        request_headers: Iterable[str] | Mapping[str, str] = (),
        response_headers: Iterable[str] | Mapping[str, str] = (),
        rename: Mapping[str, str] | None = None,
        allow_headers: Iterable[str] = (),
        extras: Iterable[str] = (),
        environ: Iterable[str] | Mapping[str, str] = (),
    ) -> None:
        optional = _optional_extras(extras)
        keys = _built_in_keys(rename or {})
        request_added = _header_keys("request_headers", request_headers, prefix="")
        response_added = _header_keys("response_headers", response_headers, prefix="response_")
        environ_added = _environ_keys(environ)
        _check_unique_keys(
            [(key, f"field {field}") for field, key in keys.items()]
            + [(field, f"extra {field}") for field in optional]
            + [(key, f"variable {name}") for name, key in environ_added]
            + [(key, f"request header {name}") for name, key in request_added]
            + [(key, f"response header {name}") for name, key in response_added]
        )
        # Every key a line writes before the notes: a note of one of these names is
        # written prefixed (see _notes_text).
        self._keys = frozenset(
            [
                *keys.values(), *optional, *(key for _, key in environ_added),
                *(key for _, key in request_added + response_added),
            ]
        )  # fmt: skip
        #: What lines show of a record's extras: its route, the ids of its request's
        #: span, whether it completed, and what ``extras`` and ``environ`` ask for.  A
        #: subclass may say its own (``reads_extras = frozenset()``: no route, trace
        #: ids from the ``traceparent`` header only), which then stands.
        below = type(self).__mro__[: type(self).__mro__.index(JsonFormat)]
        if not any("reads_extras" in vars(subclass) for subclass in below):
            self.reads_extras = frozenset(
                {"route", "trace", "completed", *optional, *(["environ"] if environ_added else [])}
            )
        #: The server variables lines show (``environ``).
        self.environ_names = frozenset(name for name, _ in environ_added)
        # The optional fields, each with the text before it: (",\"key\":", extras index)
        # and (",\"key\":", variable name).
        self._optional = tuple(
            (f",{encode_basestring_ascii(field)}:", _EXTRAS_INDEX[field]) for field in optional
        )
        self._environ = tuple(
            (f",{encode_basestring_ascii(key)}:", name) for name, key in environ_added
        )
        allow = header_names("allow_headers", allow_headers)
        # The built-in header fields are the request reader's first columns, the
        # traceparent its last.
        self._request = HeaderReader(
            [*_BUILT_IN_HEADERS, *(name for name, _ in request_added), _TRACEPARENT],
            allow=allow,
        )
        self._traceparent = self._request.names.index(header_name(_TRACEPARENT))
        self._response = HeaderReader([name for name, _ in response_added], allow=allow)
        # Each added field's column in its reader (a field named twice is read once).
        self._request_added = [
            self._request.names.index(header_name(name)) for name, _ in request_added
        ]
        self._response_added = [
            self._response.names.index(header_name(name)) for name, _ in response_added
        ]
        self._clock = Rfc3339Clock(utc)
        # Keys are escaped once, here.  The text before each field is ,"key": (the
        # time's opens the line and its string, the client's closes that string).
        key = {field: encode_basestring_ascii(name) for field, name in keys.items()}
        before = {field: f",{name}:" for field, name in key.items()}
        before["time"] = "{" + key["time"] + ':"'
        before["client"] = '"' + before["client"]
        # The method, protocol and numbers fields carry the template text around them.
        self._method = before["method"], before["path"]
        self._protocol = before["protocol"], before["status"]
        numbers = f"%d{_percent_safe(before['bytes_sent'])}%d{_percent_safe(before['duration_ms'])}"
        self._numbers = numbers + "%.3f\n", numbers + "%s\n"
        added_keys = [encode_basestring_ascii(name) for _, name in request_added + response_added]
        before_headers = [
            before["referer"], before["user_agent"], before["request_id"],
            *(f",{added}:" for added in added_keys),
        ]  # fmt: skip
        built_in = len(_BUILT_IN_HEADERS)
        # The route and trace ids follow the built-in header fields; the column of each
        # holds its text before it.
        self._layout = _Layout(
            [
                before["time"], None, before["client"], None, None, None, before["query"], None,
                None, None,
                *chain.from_iterable((text, None) for text in before_headers[:built_in]), None,
                *chain.from_iterable((text, None) for text in before_headers[built_in:]), None,
            ]
        )  # fmt: skip
        self._before_extras = tuple(before[field] for field in _EXTRAS_FIELDS)
        # What the C core (_core.format_json) needs to write the same lines: the text
        # before each built-in field and the line's end, then each header field's text,
        # source (True: the response), name, environ key and redaction, and the optional
        # fields and variables (csrc/formats/json.h).
        self._texts = (
            *(before[field].encode("ascii") for field in _RECORD_FIELDS),
            b"}\n",
            *(before[field].encode("ascii") for field in _EXTRAS_FIELDS),
        )
        self._trace_header = (header_name(_TRACEPARENT), environ_key(header_name(_TRACEPARENT)))
        # The optional fields, then the variables: each text before it and what it shows.
        self._extras_fields = tuple(
            (before.encode("ascii"), source) for before, source in self._optional + self._environ
        )
        columns = [
            *((self._request, index) for index in range(len(_BUILT_IN_HEADERS))),
            *((self._request, index) for index in self._request_added),
            *((self._response, index) for index in self._response_added),
        ]
        self._header_fields = tuple(
            (
                text.encode("ascii"),
                reader is self._response,
                reader.names[index],
                environ_key(reader.names[index]),
                _REDACTED if reader.redacts(reader.names[index]) else None,
            )
            for text, (reader, index) in zip(before_headers, columns, strict=True)
        )

    @property
    def request_header_names(self) -> frozenset[bytes]:
        """The request header fields the lines show."""
        return frozenset(self._request.names)

    @property
    def response_header_names(self) -> frozenset[bytes]:
        """The response header fields the lines show."""
        return frozenset(self._response.names)

    def format_compiled(self, records: Sequence[Record]) -> bytes | None:
        assert _format_json is not None
        return _format_json(
            records,
            self._clock.parts,
            self._texts,
            self._header_fields,
            self._keys,
            self._trace_header,
            self._extras_fields,
        )

    def format_batch_python(self, records: Sequence[Record]) -> bytes:
        """``format_batch`` in pure Python: the reference the C core is tested against."""
        if not records:
            return b""
        # The columns are dropped once laid out, so that encoding the line holds only
        # the line's text and its bytes.
        return "".join(self._layout.lines(self._fields(records), len(records))).encode("ascii")

    def _fields(self, records: Sequence[Record]) -> list[Iterable[str]]:
        (
            times, durations, clients, methods, paths, queries, protocols, statuses, sents,
            request_headers, response_headers, notes, extras,
        ) = zip(*records, strict=True)  # fmt: skip
        request_columns = self._request.columns(request_headers)
        response_columns = self._response.columns(response_headers) if self._response_added else []
        before_method, before_path = self._method
        before_protocol, before_status = self._protocol
        return [
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
            map(self._extras_text, extras, request_columns[self._traceparent]),
            *(_json_bytes(request_columns[index]) for index in self._request_added),
            *(_json_bytes(response_columns[index]) for index in self._response_added),
            map(self._notes_text, notes),
        ]

    def _extras_text(self, extras: Extras | None, traceparent: bytes | str | None) -> str:
        """The route, trace id, span id and completion of a line, then the optional
        fields, each with the text before it."""
        before_route, before_trace_id, before_span_id, before_completed = self._before_extras
        route = None if extras is None else extras[ROUTE]
        ids = trace_ids(None if extras is None else extras[TRACE], traceparent)
        completed = None if extras is None else extras[COMPLETED]
        parts = [
            before_route, _json_text(route) if type(route) is str else _json_scalar(route),
            before_trace_id, "null" if ids is None else f'"{ids[0]}"',
            before_span_id, "null" if ids is None else f'"{ids[1]}"',
            before_completed, _json_scalar(completed),
        ]  # fmt: skip
        for before, index in self._optional:
            parts += before, _json_scalar(None if extras is None else extras[index])
        if self._environ:
            values = None if extras is None else extras[ENVIRON]
            for before, name in self._environ:
                parts += before, _json_scalar(values.get(name) if values else None)
        return "".join(parts)

    def _notes_text(self, notes: Notes) -> str:
        """The end of a line: its notes (``notes_json``), then ``}``."""
        return notes_json(notes, self._keys) + "}\n" if notes else "}\n"


def notes_json(notes: Notes, taken: Container[str]) -> str:
    """A record's notes as ``,"key":value`` pairs, ``""`` for none.

    A note named like a key the object already has (``taken``: a built-in field, an
    added header field; or an earlier note) is written with ``app.`` before its name, as
    many times as it takes to make the key new: a note never hides a field, nor a field
    a note.
    """
    if not notes:
        return ""
    written: set[str] = set()
    parts = []
    for name, value in notes.items():
        key = name if type(name) is str else str(name)
        while key in taken or key in written:
            key = "app." + key
        written.add(key)
        parts.append(f",{_json_text(key)}:{_json_scalar(value)}")
    return "".join(parts)


def _json_scalar(value: object) -> str:
    """A note's value as JSON: a str, int, float, bool or None as the JSON value it is
    (a float that is not finite is null), any other as the string of its ``str()``."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return _json_text(str.__str__(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return float.__repr__(value) if math.isfinite(value) else "null"
    text = note_text(value)
    # An int is its digits, unless too long to write.
    return text if isinstance(value, int) and text[:1] != "<" else _json_text(text)


_EXTRAS_INDEX = {field: index for index, field in enumerate(Extras._fields)}


def _optional_extras(extras: Iterable[str]) -> list[str]:
    """The optional fields ``extras`` asks for, checked, in the order of OPTIONAL_EXTRAS."""
    if isinstance(extras, str) or not all(isinstance(field, str) for field in extras):
        raise ConfigurationError(
            f"extras must name fields among {', '.join(OPTIONAL_EXTRAS)}, e.g. "
            f"extras=['bytes_received'], not {extras!r}"
        )
    asked = set(extras)
    unknown = sorted(asked - set(OPTIONAL_EXTRAS))
    if unknown:
        raise ConfigurationError(
            f"extras names unknown field(s) {', '.join(map(repr, unknown))}: a JSON or "
            f"logfmt line may add {', '.join(OPTIONAL_EXTRAS)}"
        )
    return [field for field in OPTIONAL_EXTRAS if field in asked]


def _environ_keys(environ: Iterable[str] | Mapping[str, str]) -> list[tuple[str, str]]:
    """The ``(variable, key)`` pairs ``environ`` asks for: a variable's own name as its
    key, or the mapping's."""
    if isinstance(environ, str):
        raise ConfigurationError(
            f"environ must name server variables, e.g. environ=['REMOTE_USER'], not {environ!r}"
        )
    pairs = list(environ.items()) if isinstance(environ, Mapping) else [(n, n) for n in environ]
    for name, key in pairs:
        _check_key("environ", name)
        _check_key(f"environ[{name!r}]", key)
    return pairs


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
            (name, prefix + name.lower().replace("-", "_"))
            for name in header_names(option, headers)
        ]
    for name, key in pairs:
        header_name(name)
        _check_key(f"{option}[{name!r}]", key)
    return pairs


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
            f"two fields of a line cannot share a key: {clashes}; give one another "
            "key (rename=, or a mapping of header names to keys)"
        )
