"""Schema presets: JSON lines in the field names and types a log backend reads.

* ``ecs``: Elastic Common Schema 8.x (:data:`ECS_VERSION`), as the ecs-logging libraries
  write it: ``@timestamp``, ``log.level`` and ``message`` first, ``log.level`` and
  ``ecs.version`` as top-level keys with a dot in them (the ecs-logging spec's
  ``top_level_field``), every other field nested (``{"http":{"request":{...}}}``).
  Elasticsearch reads the two spellings as the same field.
* ``gcp``: Google Cloud Logging's structured logging (what Cloud Run and GKE read from
  a line of stdout, and the Ops Agent from a file with ``parse_json``): ``time``,
  ``severity``, ``message`` and the LogEntry's ``httpRequest`` object, in the LogEntry's
  JSON mapping (``responseSize`` is an int64, so a string; ``latency`` a Duration,
  ``"0.004200s"``).
* ``otel``: the OpenTelemetry log data model's fields in the protocol's snake_case
  (``timestamp``, ``severity_text``, ``severity_number``, ``body``) with the HTTP
  semantic conventions' attribute names as flat keys of ``attributes``: an attribute
  name is one key with dots in it (``"http.request.method"``), not a path.

Every value a client controls is written as ``JsonFormat`` writes it (``_json``): ASCII,
strictly valid JSON, one line whatever the bytes, reversible with ``unescape``.  Times
are always UTC with milliseconds, as each schema's examples are.

Each preset writes the trace and span ids (``_trace``: the request's OpenTelemetry
span's, else its ``traceparent`` header's) where the schema keeps them, and the fields
the application added (``boundlog.add_fields``) where it keeps custom fields: ECS and
Cloud Logging as top-level keys (Cloud Logging's ``jsonPayload``), OpenTelemetry as
attributes; a name the object already has is prefixed ``app.``, as in ``json``.

A line is a layout of pieces, as a JSON line is: the schema's own text with one column
of text per field.  A field that is not always there (a query, a user agent, a client
address that is not an IP, the trace ids) is a column whose text carries its own key
and comma, empty when absent, so each preset is one list of ``(text before, column)``
entries in line order.

Pure Python (no C counterpart): formatting is column-wise, each distinct method,
protocol, status and client is converted once per batch.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Callable, Container, Hashable, Iterable, Sequence
from functools import cached_property
from itertools import repeat
from operator import mul
from typing import TypeVar

from .._errors import ConfigurationError
from ..capture._trace import trace_ids
from ..record._headers import HeaderReader, header_names
from ..record._record import ROUTE, TRACE, Record
from ._columns import _bytes_on_the_wire, _Layout, _per_value, _text
from ._json import _json_bytes, _json_string, _json_text, notes_json
from ._timestamps import Rfc3339Clock

_Value = TypeVar("_Value", bound=Hashable)
_Result = TypeVar("_Result")

#: The ECS version the ``ecs`` lines declare: every field they write is in it unchanged
#: (and in every 8.x release).
ECS_VERSION = "8.11.0"

#: The request header fields the presets read (none is a credential).
_HEADER_NAMES = ("user-agent", "referer", "traceparent")

#: The methods OpenTelemetry's semantic conventions know (RFC 9110 and PATCH); any other
#: is written as ``_OTHER``, with the method as sent in ``http.request.method_original``.
OTEL_METHODS = frozenset(
    ("CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE")
)


def _severity(status: int) -> int:
    """0 for INFO, 1 for WARNING (4xx), 2 for ERROR (5xx and up)."""
    return 2 if status >= 500 else 1 if status >= 400 else 0


def _is_ip(client: str) -> bool:
    """Whether ``client`` is an IPv4 or IPv6 address as an ``ip`` field takes it (no zone)."""
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return False
    return getattr(address, "scope_id", None) is None


def _version(protocol: str) -> str:
    """``"1.1"`` for ``"HTTP/1.1"``: the version alone, as ECS and OpenTelemetry write it."""
    return protocol[5:] if protocol.startswith("HTTP/") else protocol


def _each(values: Sequence[_Value], convert: Callable[[_Value], _Result]) -> list[_Result]:
    """``convert`` each distinct value once, then look every value up."""
    converted = {value: convert(value) for value in set(values)}
    return list(map(converted.__getitem__, values))


class _Columns:
    """One batch's fields, column by column, each converted once when a preset asks."""

    def __init__(
        self, records: Sequence[Record], clock: Rfc3339Clock, headers: HeaderReader
    ) -> None:
        (
            self.times, self.durations, self.clients, self.methods, self.paths, self.queries,
            self.protocols, self.statuses, sents, self.request_headers, self.response_headers,
            self.notes, self.extras,
        ) = zip(*records, strict=True)  # fmt: skip
        self.stamps = clock.stamps(self.times)
        self.sents = _bytes_on_the_wire(self.methods, self.statuses, sents)
        self.user_agents, self.referers, self.traceparents = headers.columns(self.request_headers)
        self._picked: dict[int, list[list[bytes | None]]] = {}

    def picked(self, reader: HeaderReader, response: bool) -> list[list[bytes | None]]:
        """The columns of the fields ``reader`` picks from the request's headers or the
        response's, read once a batch."""
        columns = self._picked.get(id(reader))
        if columns is None:
            columns = reader.columns(self.response_headers if response else self.request_headers)
            self._picked[id(reader)] = columns
        return columns

    @cached_property
    def paths_json(self) -> list[str]:
        return list(_json_bytes(self.paths))

    @cached_property
    def targets_json(self) -> list[str]:
        """The path and query as the request line had them: ``/items?page=2``."""
        return list(
            _json_bytes([path + b"?" + query if query else path
                         for path, query in zip(self.paths, self.queries, strict=True)])
        )  # fmt: skip

    @cached_property
    def messages_json(self) -> list[str]:
        """``GET /items 200``: the method, path and status."""
        methods = _each(self.methods, lambda method: _text(method) + b" ")
        statuses = _each(self.statuses, b" %d".__mod__)
        return list(
            _json_bytes(list(map(b"".join, zip(methods, self.paths, statuses, strict=True))))
        )

    @cached_property
    def severities(self) -> list[int]:
        return _each(self.statuses, _severity)

    @cached_property
    def traces(self) -> list[tuple[str, str] | None]:
        """Each line's trace and span ids (hex), or None."""
        return [
            trace_ids(None if extras is None else extras[TRACE], traceparent)
            for extras, traceparent in zip(self.extras, self.traceparents, strict=True)
        ]

    def traces_text(self, template: str) -> list[str]:
        """``template`` holding each line's trace id and span id, ``""`` without."""
        return ["" if ids is None else template % ids for ids in self.traces]

    def routes(self) -> list[str | None]:
        """Each line's route as a JSON string, or None."""
        return [
            None if extras is None or extras[ROUTE] is None else _json_text(str(extras[ROUTE]))
            for extras in self.extras
        ]

    def notes_text(self, taken: Container[str]) -> list[str]:
        """Each line's notes as ``,"key":value`` pairs (``_json.notes_json``)."""
        return [notes_json(notes, taken) for notes in self.notes]


def _optional(template: str, values: Iterable[str | None]) -> list[str]:
    """``,`` and ``template % value`` for each value, or ``""`` where it is None."""
    template = "," + template
    return ["" if value is None else template % value for value in values]


def _header(template: str) -> Callable[[bytes | None], str]:
    """A header value's text: ``,`` and ``template`` holding its JSON string, or ``""``
    for a missing or empty one (header values repeat: each is converted once a batch)."""
    template = "," + template
    return lambda value: template % _json_string(value) if value else ""


def _client(present: str, ip: str) -> Callable[[str | None], str]:
    """The client's text: ``present`` holding its JSON string, or ``ip`` when it is an
    IP address; ``""`` without a client."""

    def text(client: str | None) -> str:
        if client is None:
            return ""
        return (ip if _is_ip(client) else present).format(_json_text(client))

    return text


def _present(values: Sequence[bytes | None]) -> list[str | None]:
    """The JSON string of each value; None for a missing or empty one."""
    return [
        None if not value else string
        for value, string in zip(values, _json_bytes(values), strict=True)
    ]


def _integers(values: Sequence[int]) -> Iterable[str]:
    return _per_value(values, "%d".__mod__)


def _scaled(durations: Sequence[float], scale: float, template: str) -> list[str | None]:
    """Each duration times ``scale`` by ``template``, or None where it is not finite."""
    try:
        scaled = list(map(mul, durations, repeat(scale)))
    except OverflowError:  # an integer past a float's range: that one is not finite
        scaled = list(map(_times, durations, repeat(scale)))
    if math.isfinite(sum(scaled)):
        return list(map(template.__mod__, scaled))
    return [template % value if math.isfinite(value) else None for value in scaled]


def _times(duration: float, scale: float) -> float:
    try:
        return duration * scale
    except OverflowError:
        return math.inf


def _or_null(values: Iterable[str | None]) -> list[str]:
    return ["null" if value is None else value for value in values]


#: One field of a preset: the schema's text before it and its column of text.
_Field = tuple[str, Callable[[_Columns], Iterable[str]]]


class SchemaFormat:
    """The lines of one schema preset: ``SchemaFormat("ecs")``, ``"gcp"`` or ``"otel"``.

    ``utc`` is accepted as every built-in format takes it, and ignored: the schemas'
    times are UTC.  The ``otel`` preset also writes the header fields
    ``request_headers`` and ``response_headers`` name, as the attributes
    ``http.request.header.<name>`` and ``http.response.header.<name>`` (the name in
    lower case; the value a list of one string, as OpenTelemetry's HTTP conventions
    say), after the built-in ones; a credential (``Authorization``, ``Cookie``,
    ``Proxy-Authorization``, ``Set-Cookie``) is ``[redacted]`` unless
    ``allow_headers`` names it.
    """

    __slots__ = (
        "_clock", "_columns", "_headers", "_layout", "_name", "_picked", "reads_extras"
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        *,
        utc: bool = True,
        request_headers: Iterable[str] = (),
        response_headers: Iterable[str] = (),
        allow_headers: Iterable[str] = (),
    ) -> None:
        if name not in _PRESETS:
            raise ConfigurationError(
                f"unknown schema {name!r}: choose one of {', '.join(_PRESETS)}"
            )
        fields, end, reads_extras = _PRESETS[name]
        self._name = name
        #: What each preset shows of a record's extras: the trace ids, and the route
        #: where the schema has one.
        self.reads_extras = reads_extras
        self._clock = Rfc3339Clock(True)
        self._headers = HeaderReader(_HEADER_NAMES)
        allow = header_names("allow_headers", allow_headers)
        self._picked = (
            HeaderReader(header_names("request_headers", request_headers), allow=allow),
            HeaderReader(header_names("response_headers", response_headers), allow=allow),
        )
        if self._picked[0].names or self._picked[1].names:
            fields = _with_picked_headers(name, fields, *self._picked)
        self._layout = _Layout([*(piece for text, _ in fields for piece in (text, None)), end])
        self._columns = [column for _, column in fields]

    def __repr__(self) -> str:
        return f"SchemaFormat({self._name!r})"

    @property
    def request_header_names(self) -> frozenset[bytes]:
        """The request header fields the lines show: User-Agent, Referer, the trace
        context's ``traceparent`` and those ``request_headers`` picks."""
        return frozenset(self._headers.names + self._picked[0].names)

    @property
    def response_header_names(self) -> frozenset[bytes]:
        """The response header fields ``response_headers`` picks (none by default)."""
        return frozenset(self._picked[1].names)

    #: The application's fields (``add_fields``).
    reads_notes = True

    def format_batch(self, records: Sequence[Record]) -> bytes:
        if not records:
            return b""
        batch = _Columns(records, self._clock, self._headers)
        fields = [column(batch) for column in self._columns]
        # Each step drops what the next does not need, so that no more than the line's
        # pieces and its text, or its text and its bytes, are held at once.
        del batch
        pieces = self._layout.lines(fields, len(records))
        del fields
        text = "".join(pieces)
        del pieces
        return text.encode("ascii")


def _stamps(batch: _Columns) -> Iterable[str]:
    return batch.stamps


# -- ecs: https://www.elastic.co/guide/en/ecs/8.11/ecs-field-reference.html --------------

#: ``log.level`` (Python's level names, as ecs-logging writes them), and ``event.outcome``
#: from the server's point of view: a status from 400 on is a failure.
_ECS_LEVELS = ('"info"', '"warning"', '"error"')
_ECS_OUTCOMES = ('"success"', '"failure"', '"failure"')


# client.address keeps what the server reported; client.ip (an ip field, which
# Elasticsearch refuses a Unix socket's path for) only an IP address.
_ECS_CLIENT = _client(',"client":{{"address":{0}}}', ',"client":{{"address":{0},"ip":{0}}}')
_ECS_REFERRER = _header('"referrer":%s')
_ECS_USER_AGENT = _header('"user_agent":{"original":%s}')


class _Paths:
    """The names an application's field must not take in a line whose readers take a
    dotted name for a path into objects, as ECS's do (Elasticsearch, ecs-logging):
    ``"http.response.status_code"`` is the line's own status, and ``"message.x"`` would
    make the line's ``message`` an object, refused by the index.  So a name is taken
    when its first part is the first part of one of the line's keys."""

    __slots__ = ("_roots",)

    def __init__(self, keys: Iterable[str]) -> None:
        self._roots = frozenset(key.partition(".")[0] for key in keys)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.partition(".")[0] in self._roots


# The top-level keys of an ECS line, whose paths an application's field must not take.
_ECS_KEYS = _Paths(
    ("@timestamp", "log.level", "message", "ecs.version", "event", "http", "url", "client",
     "user_agent", "trace", "span")
)  # fmt: skip


ECS_FIELDS: list[_Field] = [
    ('{"@timestamp":"', _stamps),
    ('","log.level":', lambda b: map(_ECS_LEVELS.__getitem__, b.severities)),
    (',"message":', lambda b: b.messages_json),
    (f',"ecs.version":"{ECS_VERSION}","event":{{"kind":"event","category":["web"],'
     '"type":["access"],"outcome":', lambda b: map(_ECS_OUTCOMES.__getitem__, b.severities)),
    (',"duration":', lambda b: _or_null(_scaled(b.durations, 1e9, "%.0f"))),
    ('},"http":{"request":{"method":', lambda b: _per_value(b.methods, _json_text)),
    ("", lambda b: _each(b.referers, _ECS_REFERRER)),
    ('},"response":{"status_code":', lambda b: _integers(b.statuses)),
    (',"body":{"bytes":', lambda b: _integers(b.sents)),
    ('}},"version":', lambda b: _per_value(b.protocols, lambda p: _json_text(_version(p)))),
    ('},"url":{"path":', lambda b: b.paths_json),
    ("", lambda b: _optional('"query":%s', _present(b.queries))),
    (',"original":', lambda b: b.targets_json),
    ("}", lambda b: _each(b.clients, _ECS_CLIENT)),
    ("", lambda b: _each(b.user_agents, _ECS_USER_AGENT)),
    ("", lambda b: b.traces_text(',"trace":{"id":"%s"},"span":{"id":"%s"}')),
    ("", lambda b: b.notes_text(_ECS_KEYS)),
]  # fmt: skip


# -- gcp: https://cloud.google.com/logging/docs/structured-logging and LogEntry's
# HttpRequest: https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#HttpRequest

_GCP_SEVERITIES = ('"INFO"', '"WARNING"', '"ERROR"')
_GCP_USER_AGENT = _header('"userAgent":%s')
# remoteIp only for an IP address (a port may follow it; a Unix socket's path may not).
_GCP_REMOTE_IP = _client("", ',"remoteIp":{0}')
_GCP_REFERER = _header('"referer":%s')
# The special fields of a structured log line, which an application's field must not
# take: Cloud Logging moves them out of jsonPayload.
_GCP_KEYS = frozenset(
    ("time", "severity", "message", "httpRequest", "logging.googleapis.com/trace",
     "logging.googleapis.com/spanId", "logging.googleapis.com/trace_sampled",
     "logging.googleapis.com/labels", "logging.googleapis.com/operation",
     "logging.googleapis.com/sourceLocation", "logging.googleapis.com/insertId",
     "timestamp", "timestampSeconds", "timestampNanos")
)  # fmt: skip
#: The environment variable naming the Google Cloud project, as Google's client
#: libraries read it: Cloud Trace links a line to its trace by the trace's resource
#: name, projects/PROJECT/traces/TRACE_ID.
GCP_PROJECT_VARIABLE = "GOOGLE_CLOUD_PROJECT"


def _gcp_trace_template() -> str:
    """The trace and span fields of a line: the trace's resource name when the project
    is known (``GOOGLE_CLOUD_PROJECT``), else the bare trace id."""
    project = os.environ.get(GCP_PROJECT_VARIABLE)
    trace = "%s" if not project else f"projects/{project.replace('%', '%%')}/traces/%s"
    return (
        f',"logging.googleapis.com/trace":{_json_text(trace)},"logging.googleapis.com/spanId":"%s"'
    )


GCP_FIELDS: list[_Field] = [
    ('{"time":"', _stamps),
    ('","severity":', lambda b: map(_GCP_SEVERITIES.__getitem__, b.severities)),
    (',"message":', lambda b: b.messages_json),
    (',"httpRequest":{"requestMethod":', lambda b: _per_value(b.methods, _json_text)),
    (',"requestUrl":', lambda b: b.targets_json),
    (',"status":', lambda b: _integers(b.statuses)),
    (',"responseSize":"', lambda b: _integers(b.sents)),
    ('"', lambda b: _each(b.user_agents, _GCP_USER_AGENT)),
    ("", lambda b: _each(b.clients, _GCP_REMOTE_IP)),
    ("", lambda b: _each(b.referers, _GCP_REFERER)),
    ("", lambda b: _optional('"latency":"%ss"', _scaled(b.durations, 1.0, "%.6f"))),
    (',"protocol":', lambda b: _per_value(b.protocols, _json_text)),
    ("}", lambda b: b.traces_text(_gcp_trace_template())),
    ("", lambda b: b.notes_text(_GCP_KEYS)),
]  # fmt: skip


# -- otel: https://opentelemetry.io/docs/specs/otel/logs/data-model/ and the HTTP server
# attributes of https://opentelemetry.io/docs/specs/semconv/http/http-spans/

_OTEL_SEVERITIES = ('"INFO","severity_number":9', '"WARN","severity_number":13',
                    '"ERROR","severity_number":17')  # fmt: skip


_OTEL_CLIENT = _client(',"client.address":{0}', ',"client.address":{0}')
_OTEL_USER_AGENT = _header('"user_agent.original":%s')
# A header's values: string[].
_OTEL_REFERER = _header('"http.request.header.referer":[%s]')
# The attributes a line may have, which an application's field must not take.
_OTEL_KEYS = frozenset(
    ("http.request.method", "http.request.method_original", "url.path", "url.query",
     "http.response.status_code", "http.response.body.size", "network.protocol.version",
     "client.address", "user_agent.original", "http.request.header.referer",
     "http.server.request.duration", "http.route")
)  # fmt: skip


def _otel_method(method: str) -> str:
    if method in OTEL_METHODS:
        return f'"{method}"'
    return f'"_OTHER","http.request.method_original":{_json_text(method)}'


OTEL_FIELDS: list[_Field] = [
    ('{"timestamp":"', _stamps),
    ('","severity_text":', lambda b: map(_OTEL_SEVERITIES.__getitem__, b.severities)),
    (',"body":', lambda b: b.messages_json),
    # Fields of the log record in the data model, not attributes.
    ("", lambda b: b.traces_text(',"trace_id":"%s","span_id":"%s"')),
    (',"attributes":{"http.request.method":', lambda b: _per_value(b.methods, _otel_method)),
    (',"url.path":', lambda b: b.paths_json),
    ("", lambda b: _optional('"url.query":%s', _present(b.queries))),
    (',"http.response.status_code":', lambda b: _integers(b.statuses)),
    (',"http.response.body.size":', lambda b: _integers(b.sents)),
    (',"network.protocol.version":',
     lambda b: _per_value(b.protocols, lambda p: _json_text(_version(p)))),
    ("", lambda b: _each(b.clients, _OTEL_CLIENT)),
    ("", lambda b: _each(b.user_agents, _OTEL_USER_AGENT)),
    ("", lambda b: _each(b.referers, _OTEL_REFERER)),
    (',"http.server.request.duration":',
     lambda b: _or_null(_scaled(b.durations, 1.0, "%.6f"))),
    ("", lambda b: _optional('"http.route":%s', b.routes())),
    ("", lambda b: b.notes_text(_OTEL_KEYS)),
]  # fmt: skip


def _with_picked_headers(
    preset: str, fields: list[_Field], request: HeaderReader, response: HeaderReader
) -> list[_Field]:
    """``otel``'s fields with the picked header fields as attributes after the built-in
    ones (before the application's, which must not take their names)."""
    if preset != "otel":
        raise ConfigurationError(
            f"the {preset} schema has no field for a picked header: request_headers and "
            "response_headers are for SchemaFormat('otel'); JsonFormat(request_headers=...) "
            "writes them in a JSON line"
        )
    if b"referer" in request.names:
        raise ConfigurationError(
            "the otel schema always writes Referer (http.request.header.referer): "
            "leave it out of request_headers"
        )
    picked: list[_Field] = []
    keys = set(_OTEL_KEYS)
    for reader, side in ((request, "request"), (response, "response")):
        for index, name in enumerate(reader.names):
            key = f"http.{side}.header.{name.decode()}"
            keys.add(key)
            picked.append(("", _picked_column(reader, side == "response", index, key)))
    taken = frozenset(keys)
    return [*fields[:-1], *picked, ("", lambda b: b.notes_text(taken))]


def _picked_column(
    reader: HeaderReader, response: bool, index: int, key: str
) -> Callable[[_Columns], Iterable[str]]:
    """The column of one picked header field: ``,"key":["value"]``, or ``""`` for a
    missing or empty one."""
    before = f',"{key}":['  # a header name is a token: nothing in it to escape

    def text(value: bytes | None) -> str:
        return before + _json_string(value) + "]" if value else ""

    return lambda b: _each(b.picked(reader, response)[index], text)


#: Each preset's fields, the text that ends its line, and what it reads of extras.
_PRESETS: dict[str, tuple[list[_Field], str, frozenset[str]]] = {
    "ecs": (ECS_FIELDS, "}\n", frozenset({"trace"})),
    "gcp": (GCP_FIELDS, "}\n", frozenset({"trace"})),
    "otel": (OTEL_FIELDS, "}}\n", frozenset({"route", "trace"})),
}
#: The preset names, in the order ``FORMATS`` lists them.
SCHEMAS = tuple(_PRESETS)
