"""Log templates: Apache's LogFormat directives and gunicorn's atoms, compiled once.

A :class:`Template` is parsed when it is made; an unknown directive is a
ConfigurationError then, never a surprise on the writer thread.  Parsing yields the
template's own text with a *field* wherever a directive stood, and each field turns a
whole batch into a column, the way ``_apache.ApacheFormat`` does (see there for why):
nothing is parsed or looked up per record.

Fields whose values repeat (method, protocol, status, the time, the pid, the user)
convert each distinct value once, and take the template text next to them into the
converted value, so that a line is joined from fewer pieces.

The client-controlled fields (client, path, query, header fields) are laid in raw first,
and the batch checked in one pass for any byte that could change the line's shape, as
``ApacheFormat`` does; only a batch that fails is built again with those fields escaped.
The repeating fields are always escaped, once per distinct value.  The client address
and the user name are escaped with :func:`~boundlog.formats._escape.escape_unquoted` (a space
too), because the Common Log Format leaves them unquoted.

When the C core is built (``_core``), ``Template.format_batch`` runs its C counterpart
(``csrc/formats/template.c``) on *ops* the template is also compiled into (:data:`_C_OPS`);
``format_batch_python`` stays the reference it is tested against
(``tests/speedups/test_speedups_templates.py``) and formats any batch the C code hands back.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from operator import add, attrgetter, floordiv, mod, mul
from typing import Any, TypeAlias, cast

from .._core import CompiledFirst
from .._core import format_template as _format_template
from .._errors import ConfigurationError
from ..capture._trace import trace_ids
from ..record._headers import REDACTED, HeaderReader, environ_key, header_name, header_names
from ..record._notes import note_text
from ..record._record import COMPLETED, ENVIRON, TRACE, Extras, Notes, Record
from ._columns import (
    _DASH,
    _bytes_on_the_wire,
    _dash_for_none,
    _escaped_clients,
    _escaped_column,
    _Layout,
    _per_value,
    _raw_clients,
    _sent_fields,
    _text,
)
from ._escape import PLAIN as _PLAIN
from ._escape import escape, escape_unquoted
from ._timestamps import _MICROSECONDS, ClfClock, StrftimeClock

_AUTHORIZATION = "authorization"

# A directive's kind and its argument (a header name, a time format), or template text.
_Token: TypeAlias = "tuple[str, str] | bytes"
# What the C core walks for each record: (code, number, object), see _C_OPS.
_Op: TypeAlias = "tuple[int, int, object]"

# Apache's directives (and the two aiohttp adds) by name, as kinds of field.
_APACHE = {
    "a": "client", "h": "client", "l": "-", "u": "user", "t": "clf-time", "r": "request",
    "m": "method", "U": "path", "q": "?query", "H": "protocol", "s": "status",
    ">s": "status", "b": "bytes-or-dash", "B": "bytes", "D": "microseconds",
    "T": "seconds", "Tf": "seconds.fraction", "P": "pid", "X": "connection-status",
    "I": "bytes-received",
}  # fmt: skip
_APACHE_BRACED = {
    "i": "request-header", "o": "response-header", "t": "time", "n": "note", "e": "environ",
    "x": "extra",
}  # fmt: skip
# The fields of a record's extras %{NAME}x shows, by name, and the Extras field each
# reads (trace_id and span_id: the trace, else the traceparent header).
_EXTRAS_DIRECTIVES = {
    "route": "route", "trace_id": "trace", "span_id": "trace", "completed": "completed",
    "bytes_received": "bytes_received", "close_code": "close_code",
}  # fmt: skip
# The kinds of field whose values come from a record's extras, by the field each reads.
_EXTRAS_KINDS = {"connection-status": "completed", "bytes-received": "bytes_received"}
_TRACEPARENT = "traceparent"
_CONNECTION = "connection"
# gunicorn's atoms, with gunicorn's meanings (its a is the User-Agent, its q has no ?).
_GUNICORN: dict[str, str | tuple[str, str]] = {
    "h": "client", "l": "-", "u": "user", "t": "clf-time", "r": "request", "m": "method",
    "U": "path", "q": "query", "H": "protocol", "s": "status", "B": "bytes",
    "b": "bytes-or-dash", "f": ("request-header", "referer"),
    "a": ("request-header", "user-agent"), "T": "seconds", "M": "milliseconds",
    "D": "microseconds", "L": "seconds.fraction", "p": "<pid>",
}  # fmt: skip
_GUNICORN_BRACED = {
    "i": "request-header", "o": "response-header", "e": "environ", "n": "note",
}  # fmt: skip
# Apache's %{...}t names for the time since the epoch; begin: (the default) is the only
# prefix, because a record knows when its request was received.
_EPOCH_UNITS = {
    "sec": (1, b"%d"), "msec": (1000, b"%d"), "usec": (_MICROSECONDS, b"%d"),
    "msec_frac": (1000, b"%03d"), "usec_frac": (_MICROSECONDS, b"%06d"),
}  # fmt: skip

SUPPORTED = (
    "Apache directives %% %a %b %B %D %h %H %l %m %P %q %r %s %>s %t %{format}t %T %Tf "
    "%u %U %X %I %{Header}i %{Header}o %{name}n %{NAME}e %{route}x %{trace_id}x %{span_id}x "
    "%{completed}x %{bytes_received}x %{close_code}x, and gunicorn atoms %(a)s %(b)s %(B)s "
    "%(D)s %(f)s %(h)s %(H)s %(l)s %(L)s %(m)s %(M)s %(p)s %(q)s %(r)s %(s)s %(t)s %(T)s "
    "%(u)s %(U)s %({header}i)s %({header}o)s %({NAME}e)s %({name}n)s"
)


# The C core's ops (csrc/formats/template.c), by code: the order of its enum.  Most are a field
# kind; "text" is the template's own bytes, "header" either kind of header field,
# "epoch-fraction" the _frac epoch units, "duration" the three whole units, "extra" a
# field of a record's extras (%I too), "trace" its trace or span id.
_C_OPS = (
    "text", "client", "path", "query", "?", "method", "protocol", "status", "pid", "time",
    "epoch", "epoch-fraction", "bytes", "bytes-or-dash", "duration", "seconds.fraction",
    "header", "user", "extra", "trace", "connection-status", "environ", "note",
)  # fmt: skip
_C_CODE = {name: code for code, name in enumerate(_C_OPS)}
# The flags of a header op: a response field; written as [redacted] when present.
_C_RESPONSE_HEADER = 1
_C_REDACTED_HEADER = 2

# The kinds of field whose values repeat, into which template text is folded.
_FOLDS_TEXT = frozenset(
    ("?", "<pid>", "clf-time", "method", "pid", "protocol", "status", "time", "user")
)


class Template(CompiledFirst):
    """A log template, compiled once into a batch formatter.

    ``template`` holds Apache ``LogFormat`` directives (``%h %l %u %t "%r" %>s %b``),
    aiohttp's ``%Tf`` and ``%P``, and gunicorn's atoms (``%(h)s``, ``%({x-request-id}i)s``),
    in any mix.  Client-controlled values are escaped as boundlog's combined format
    escapes them.  Sensitive header fields come out as ``[redacted]`` unless named in
    ``allow_headers``; times are local unless ``utc``.
    """

    __slots__ = (
        "_client_controlled", "_fields", "_layout", "_ops", "_reads_clients",
        "_request_reader", "_response_reader", "_shape", "environ_names", "reads_extras",
        "reads_notes", "template",
    )  # fmt: skip

    def __init__(
        self, template: str, *, utc: bool = False, allow_headers: Iterable[str] = ()
    ) -> None:
        if not isinstance(template, str):
            raise ConfigurationError(f"a template is a str, not {template!r}")
        for position, char in enumerate(template):
            if len(f"-{char}-".splitlines()) > 1:
                raise ConfigurationError(
                    f"the template {template!r} holds a line break ({char!r} at position "
                    f"{position}): every record must stay on one line"
                )
        self.template = template
        tokens = [*_parse(template), b"\n"]
        directives = [token for token in tokens if isinstance(token, tuple)]
        allow_headers = header_names("allow_headers", allow_headers)
        request_names = [name for kind, name in directives if kind == "request-header"]
        response_names = [name for kind, name in directives if kind == "response-header"]
        reads_user = ("user", "") in directives
        if reads_user:
            # The user name is in the Authorization field: read whole, never logged whole.
            request_names.append(_AUTHORIZATION)
        extras = {
            _EXTRAS_DIRECTIVES[argument] if kind == "extra" else _EXTRAS_KINDS[kind]
            for kind, argument in directives
            if kind == "extra" or kind in _EXTRAS_KINDS
        }
        if any(
            kind == "extra" and argument in ("trace_id", "span_id") for kind, argument in directives
        ):
            # The trace ids of a record without a span's are its traceparent header's.
            request_names.append(_TRACEPARENT)
        if ("connection-status", "") in directives:
            # Whether the connection stays open after the response (%X).
            request_names.append(_CONNECTION)
            response_names.append(_CONNECTION)
        self._request_reader = (
            HeaderReader(request_names, allow=allow_headers + ((_AUTHORIZATION,) * reads_user))
            if request_names
            else None
        )
        self._response_reader = (
            HeaderReader(response_names, allow=allow_headers) if response_names else None
        )
        redact_authorization = reads_user and _AUTHORIZATION.encode() not in set(
            map(header_name, allow_headers)
        )
        build = _FieldBuilder(
            utc, self._request_reader, self._response_reader, redact_authorization
        )
        self._fields: list[_Field] = []
        layout: list[bytes | None] = []
        ops: list[_Op] = []
        for token, prefix, suffix in _fold_text(tokens):
            layout.append(token if isinstance(token, bytes) else None)
            if isinstance(token, tuple):
                field = build(*token, prefix, suffix)
                self._fields.append(field)
                ops.extend(build.ops(*token, prefix, suffix, field))
            else:
                ops.append(_text_op(token))
        self._layout = _Layout(layout)
        self._ops = _joined_text_ops(ops)
        # What remains of a line once its plain bytes are deleted: the template's own.
        literal = b"".join(token for token in tokens if isinstance(token, bytes))
        self._shape = literal.translate(None, _PLAIN)
        self._client_controlled = any(field.client_controlled for field in self._fields)
        self._reads_clients = ("client", "") in directives
        #: Whether lines show a record's notes (``%{name}n``, ``boundlog.add_fields``).
        self.reads_notes = any(kind == "note" for kind, _ in directives)
        #: The server variables lines show (``%{NAME}e``).
        self.environ_names = frozenset(name for kind, name in directives if kind == "environ")
        #: The fields of a record's extras lines show.
        self.reads_extras = frozenset(extras | ({"environ"} if self.environ_names else set()))

    def __repr__(self) -> str:
        return f"Template({self.template!r})"

    @property
    def request_header_names(self) -> frozenset[bytes]:
        """The request header fields the lines show (Authorization for the user name)."""
        reader = self._request_reader
        return frozenset(reader.names if reader is not None else ())

    @property
    def response_header_names(self) -> frozenset[bytes]:
        """The response header fields the lines show."""
        reader = self._response_reader
        return frozenset(reader.names if reader is not None else ())

    def format_compiled(self, records: Sequence[Record]) -> bytes | None:
        assert _format_template is not None
        # The pid is read per batch: it changes in a forked child.
        return _format_template(records, self._ops, os.getpid())

    def format_batch_python(self, records: Sequence[Record]) -> bytes:
        """``format_batch`` in pure Python: the reference the C core is tested against."""
        if not records:
            return b""
        batch = _Batch(records, self._request_reader, self._response_reader)
        count = batch.count
        # The columns no client controls are built once, for both passes.
        fixed = [
            None if field.client_controlled else list(field.column(batch, False))
            for field in self._fields
        ]

        def join(escaped: bool) -> bytes:
            columns = [
                column if column is not None else field.column(batch, escaped)
                for field, column in zip(self._fields, fixed, strict=True)
            ]
            return b"".join(self._layout.lines(columns, count))

        if not self._client_controlled:
            return join(False)
        if self._reads_clients:
            batch.raw_clients = _raw_clients(batch.clients)
            if batch.raw_clients is None:
                return join(True)
        data = join(False)
        if data.translate(None, _PLAIN) == self._shape * count:
            return data
        # Built again escaped: the unescaped bytes need not be held meanwhile.
        del data
        return join(True)


# -- parsing ---------------------------------------------------------------------------


def _parse(template: str) -> list[_Token]:
    """The template's text and directives, with %r, %q and %l spelled out in their parts."""
    tokens: list[_Token] = []
    text: list[str] = []
    start = 0
    while (percent := template.find("%", start)) >= 0:
        text.append(template[start:percent])
        following = template[percent + 1 : percent + 2]
        if following == "%":
            text.append("%")
            start = percent + 2
            continue
        if following == "(":
            directive, start = _gunicorn_atom(template, percent)
        elif following == "{":
            directive, start = _braced_directive(template, percent)
        elif following:
            name = template[percent + 1 : percent + 3]
            if name not in _APACHE:
                name = following
            kind = _APACHE.get(name)
            if kind is None:
                raise _unsupported(template, percent, f"unknown directive %{name}")
            directive, start = (kind, ""), percent + 1 + len(name)
        else:
            raise _unsupported(
                template, percent, "a lone % ends the template (write %% for a percent sign)"
            )
        for token in _parts(directive):
            if isinstance(token, str):
                text.append(token)
            else:
                _append_text(tokens, text)
                tokens.append(token)
    text.append(template[start:])
    _append_text(tokens, text)
    return tokens


def _append_text(tokens: list[_Token], text: list[str]) -> None:
    joined = "".join(text)
    text.clear()
    if joined:
        tokens.append(_text(joined))


def _parts(directive: tuple[str, str]) -> list[tuple[str, str] | str]:
    kind = directive[0]
    if kind == "-":
        return ["-"]
    if kind == "?query":
        return [("?", ""), ("query", "")]
    if kind == "request":
        # method path?query protocol, as the client sent its request line.
        return [("method", ""), " ", ("path", ""), ("?", ""), ("query", ""), " ", ("protocol", "")]
    return [directive]


def _gunicorn_atom(template: str, percent: int) -> tuple[tuple[str, str], int]:
    close = template.find(")", percent)
    if close < 0:
        raise _unsupported(template, percent, "an unterminated %(")
    name = template[percent + 2 : close]
    if template[close + 1 : close + 2] != "s":
        raise _unsupported(
            template, percent, f"%({name}){template[close + 1 : close + 2]} (atoms are %(name)s)"
        )
    kind = _GUNICORN.get(name)
    if isinstance(kind, tuple):
        return kind, close + 2
    if kind is not None:
        return (kind, ""), close + 2
    header_kind = (
        _GUNICORN_BRACED.get(name[-1:]) if name[:1] == "{" and name[-2:-1] == "}" else None
    )
    if header_kind is None:
        raise _unsupported(template, percent, f"unknown atom %({name})s")
    if header_kind in ("environ", "note"):
        return (header_kind, _named(template, percent, name[1:-2], name[-1])), close + 2
    return (header_kind, _header(template, percent, name[1:-2])), close + 2


def _braced_directive(template: str, percent: int) -> tuple[tuple[str, str], int]:
    close = template.find("}", percent)
    if close < 0:
        raise _unsupported(template, percent, "an unterminated %{")
    argument = template[percent + 2 : close]
    letter = template[close + 1 : close + 2]
    kind = _APACHE_BRACED.get(letter)
    if kind is None:
        raise _unsupported(template, percent, f"unknown directive %{{{argument}}}{letter}")
    end = close + 2
    if kind in ("note", "environ"):
        return (kind, _named(template, percent, argument, letter)), end
    if kind == "extra":
        if argument not in _EXTRAS_DIRECTIVES:
            raise _unsupported(
                template,
                percent,
                f"%{{{argument}}}x (a record's extras are {', '.join(_EXTRAS_DIRECTIVES)})",
            )
        return (kind, argument), end
    if kind != "time":
        return (kind, _header(template, percent, argument)), end
    if argument.startswith("end:"):
        raise _unsupported(
            template,
            percent,
            f"%{{{argument}}}t (records hold when a request was received: use begin:)",
        )
    argument = argument.removeprefix("begin:")
    if argument in _EPOCH_UNITS:
        return ("epoch", argument), end
    try:
        time.strftime(argument, time.gmtime(0))
    except ValueError as error:
        raise _unsupported(template, percent, f"%{{{argument}}}t ({error})") from None
    return (kind, argument), end


def _named(template: str, percent: int, name: str, letter: str) -> str:
    """The name of a note or a server variable, which must not be empty."""
    if not name:
        example = "%{user}n" if letter == "n" else "%{REMOTE_USER}e"
        raise _unsupported(template, percent, f"%{{}}{letter} (it needs a name: {example})")
    return name


def _header(template: str, percent: int, name: str) -> str:
    try:
        header_name(name)
    except ConfigurationError as error:
        raise _unsupported(template, percent, str(error)) from None
    return name


def _unsupported(template: str, position: int, what: str) -> ConfigurationError:
    return ConfigurationError(
        f"{what} at position {position} of the template {template!r}: templates support {SUPPORTED}"
    )


def _fold_text(tokens: list[_Token]) -> Iterable[tuple[_Token, bytes, bytes]]:
    """Each token left as a piece of the line, with the text folded into it before and after.

    Text next to a field whose values repeat is folded into that field (into the one
    before it, if both are), since each of its distinct values is converted once.
    """
    folded: set[int] = set()
    around: dict[int, tuple[bytes, bytes]] = {}
    for index, token in enumerate(tokens):
        if not isinstance(token, tuple) or token[0] not in _FOLDS_TEXT:
            continue
        before = tokens[index - 1] if index > 0 and index - 1 not in folded else None
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        prefix = before if isinstance(before, bytes) else b""
        suffix = after if isinstance(after, bytes) else b""
        folded.update(place for place, text in ((index - 1, prefix), (index + 1, suffix)) if text)
        around[index] = prefix, suffix
    for index, token in enumerate(tokens):
        if index not in folded:
            yield (token, *around.get(index, (b"", b"")))


# -- fields ----------------------------------------------------------------------------


class _Batch:
    """A batch of records as columns, with what several fields derive from them."""

    __slots__ = (
        "_microseconds", "_wire", "clients", "count", "durations", "extras", "methods", "notes",
        "paths", "protocols", "queries", "raw_clients", "request_fields", "response_fields",
        "sents", "statuses", "times",
    )  # fmt: skip

    def __init__(
        self,
        records: Sequence[Record],
        request_reader: HeaderReader | None,
        response_reader: HeaderReader | None,
    ) -> None:
        (
            self.times, self.durations, self.clients, self.methods, self.paths, self.queries,
            self.protocols, self.statuses, self.sents, request_headers, response_headers,
            self.notes, self.extras,
        ) = zip(*records, strict=True)  # fmt: skip
        self.count = len(records)
        self.request_fields = request_reader.columns(request_headers) if request_reader else []
        self.response_fields = response_reader.columns(response_headers) if response_reader else []
        #: The clients as bytes for the unescaped pass (None if one needs escaping).
        self.raw_clients: list[bytes] | None = None
        self._wire: tuple[int, ...] | None = None
        self._microseconds: list[int | None] | None = None

    def on_the_wire(self) -> tuple[int, ...]:
        if self._wire is None:
            self._wire = _bytes_on_the_wire(self.methods, self.statuses, self.sents)
        return self._wire

    def microseconds(self) -> list[int | None]:
        """Each duration to the nearest microsecond; None where it is not a duration."""
        if self._microseconds is None:
            durations = self.durations
            if min(durations) >= 0 and math.isfinite(sum(durations)):
                self._microseconds = list(
                    map(int, map(add, map(mul, durations, repeat(1e6)), repeat(0.5)))
                )
            else:
                self._microseconds = [
                    int(duration * 1e6 + 0.5) if 0 <= duration < math.inf else None
                    for duration in durations
                ]
        return self._microseconds


class _Field:
    """A place in the template, filled with a column per batch, the same in both passes."""

    __slots__ = ("_column",)
    #: Whether the column is built again, escaped, when a batch fails the shape check.
    client_controlled = False

    def __init__(self, column: Callable[[_Batch], Iterable[bytes]]) -> None:
        self._column = column

    def column(self, batch: _Batch, escaped: bool) -> Iterable[bytes]:
        return self._column(batch)


class _ClientControlled(_Field):
    """Raw values from the client, laid in as they are unless the batch needs escaping."""

    __slots__ = ()
    client_controlled = True

    def column(self, batch: _Batch, escaped: bool) -> Iterable[bytes]:
        values = cast("Sequence[bytes]", self._column(batch))
        return _escaped_column(values) if escaped else values


class _Client(_Field):
    """The client address: unquoted in the Common Log Format, so a space is escaped too."""

    __slots__ = ()
    client_controlled = True

    def __init__(self) -> None:
        super().__init__(lambda batch: batch.clients)

    def column(self, batch: _Batch, escaped: bool) -> Iterable[bytes]:
        if escaped or batch.raw_clients is None:
            return _escaped_clients(batch.clients, batch.raw_clients)
        return batch.raw_clients


class _Stamped(_Field):
    """A time field: its clock makes each stamp with the template text around it."""

    __slots__ = ("clock",)

    def __init__(self, clock: ClfClock) -> None:
        super().__init__(lambda batch: clock.stamps(batch.times))
        self.clock = clock


def _text_op(text: bytes) -> _Op:
    return (_C_CODE["text"], 0, text)


def _joined_text_ops(ops: list[_Op]) -> tuple[_Op, ...]:
    """``ops`` with the empty texts left out and each run of texts made one."""
    joined: list[_Op] = []
    for op in ops:
        if op[0] != _C_CODE["text"]:
            joined.append(op)
        elif op[2]:
            if joined and joined[-1][0] == _C_CODE["text"]:
                op = _text_op(cast("bytes", joined.pop()[2]) + cast("bytes", op[2]))
            joined.append(op)
    return tuple(joined)


class _FieldBuilder:
    """Makes the field of each directive kind, and its C ops, for one template."""

    __slots__ = (
        "_redact_authorization", "_request_names", "_request_reader", "_response_names",
        "_response_reader", "_utc",
    )  # fmt: skip

    def __init__(
        self,
        utc: bool,
        request_reader: HeaderReader | None,
        response_reader: HeaderReader | None,
        redact_authorization: bool,
    ) -> None:
        self._utc = utc
        self._request_reader = request_reader
        self._response_reader = response_reader
        self._request_names = request_reader.names if request_reader else ()
        self._response_names = response_reader.names if response_reader else ()
        self._redact_authorization = redact_authorization

    def __call__(self, kind: str, argument: str, prefix: bytes, suffix: bytes) -> _Field:
        def each(
            values: Callable[[_Batch], Sequence[Any]], convert: Callable[[Any], bytes]
        ) -> _Field:
            return _Field(
                lambda batch: _per_value(
                    values(batch), lambda value: prefix + convert(value) + suffix
                )
            )

        def constant(value: Callable[[], bytes]) -> _Field:
            # Read once per batch: the pid changes in a forked child.
            return _Field(lambda batch: [prefix + value() + suffix] * batch.count)

        if kind == "client":
            return _Client()
        if kind in ("path", "query"):
            return _ClientControlled(attrgetter("paths" if kind == "path" else "queries"))
        if kind in ("request-header", "response-header"):
            return self._header(kind, argument)
        if kind == "note":
            return _ClientControlled(lambda batch: _note_column(batch.notes, argument))
        if kind == "environ":
            return _ClientControlled(lambda batch: _environ_column(batch.extras, argument))
        if kind == "extra" and argument in _TRACE_IDS:
            header = self._request_names.index(header_name(_TRACEPARENT))
            which = _TRACE_IDS[argument]
            return _Field(
                lambda batch: _trace_column(batch.extras, batch.request_fields[header], which)
            )
        if kind in ("extra", "bytes-received"):
            position = _extras_position(kind, argument)
            return _ClientControlled(lambda batch: _extra_column(batch.extras, position))
        if kind == "connection-status":
            request = self._request_names.index(header_name(_CONNECTION))
            response = self._response_names.index(header_name(_CONNECTION))
            return _Field(
                lambda batch: list(
                    map(
                        _connection_status,
                        batch.extras,
                        batch.protocols,
                        batch.request_fields[request],
                        batch.response_fields[response],
                    )
                )
            )
        if kind == "user":
            index = self._request_names.index(_AUTHORIZATION.encode())
            return each(lambda batch: batch.request_fields[index], _user)
        if kind == "method":
            return each(attrgetter("methods"), _escaped_text)
        if kind == "protocol":
            return each(attrgetter("protocols"), _escaped_text)
        if kind == "status":
            return each(attrgetter("statuses"), b"%d".__mod__)
        if kind == "?":
            return each(
                lambda batch: list(map(bool, batch.queries)), {True: b"?", False: b""}.__getitem__
            )
        if kind == "pid":
            return constant(lambda: b"%d" % os.getpid())
        if kind == "<pid>":
            return constant(lambda: b"<%d>" % os.getpid())
        if kind in ("clf-time", "time"):
            clock = (
                ClfClock(self._utc, prefix=prefix, suffix=suffix)
                if kind == "clf-time"
                else StrftimeClock(argument, self._utc, prefix=prefix, suffix=suffix)
            )
            return _Stamped(clock)
        if kind == "epoch":
            return _Field(lambda batch: _epoch_fields(batch.times, argument))
        if kind == "bytes":
            return _Field(lambda batch: _numbers(b"%d", batch.on_the_wire()))
        if kind == "bytes-or-dash":
            return _Field(lambda batch: _sent_fields(batch.on_the_wire()))
        divisor = _DURATION_DIVISORS.get(kind)
        if divisor is not None:
            return _Field(lambda batch: _numbers(b"%d", _in_units(batch.microseconds(), divisor)))
        if kind == "seconds.fraction":
            return _Field(
                lambda batch: _numbers(b"%d.%06d", batch.microseconds(), split=_MICROSECONDS)
            )
        raise AssertionError(f"no field for {kind!r}")  # the parser makes only the kinds above

    def ops(
        self, kind: str, argument: str, prefix: bytes, suffix: bytes, field: _Field
    ) -> list[_Op]:
        """What the C core does for the field ``field`` of this kind, with the text
        folded into it, in order."""
        if isinstance(field, _Stamped):
            return [(_C_CODE["time"], 0, field.clock)]  # the text is in its stamps
        if kind == "<pid>":
            prefix, suffix, kind = prefix + b"<", b">" + suffix, "pid"
        op: _Op
        if kind in ("request-header", "response-header"):
            name = header_name(argument)
            flags = (_C_RESPONSE_HEADER if kind == "response-header" else 0) | (
                _C_REDACTED_HEADER if self._redacts(kind, name) else 0
            )
            op = (_C_CODE["header"], flags, (name, environ_key(name)))
        elif kind == "user":
            name = _AUTHORIZATION.encode()
            op = (_C_CODE["user"], 0, (name, environ_key(name), _user))
        elif kind == "epoch":
            per_second, _ = _EPOCH_UNITS[argument]
            code = "epoch-fraction" if argument.endswith("_frac") else "epoch"
            op = (_C_CODE[code], per_second, None)
        elif kind in _DURATION_DIVISORS:
            op = (_C_CODE["duration"], _DURATION_DIVISORS[kind], None)
        elif kind == "extra" and argument in _TRACE_IDS:
            name = header_name(_TRACEPARENT)
            op = (_C_CODE["trace"], _TRACE_IDS[argument], (name, environ_key(name)))
        elif kind in ("extra", "bytes-received"):
            op = (_C_CODE["extra"], _extras_position(kind, argument), None)
        elif kind == "connection-status":
            name = header_name(_CONNECTION)
            op = (_C_CODE[kind], 0, (name, environ_key(name)))
        elif kind in ("environ", "note"):
            op = (_C_CODE[kind], 0, argument)
        else:
            op = (_C_CODE[kind], 0, None)
        return [_text_op(prefix), op, _text_op(suffix)]

    def _redacts(self, kind: str, name: bytes) -> bool:
        """Whether the header field ``name`` of this kind is written as [redacted]."""
        reader = self._request_reader if kind == "request-header" else self._response_reader
        if reader is not None and reader.redacts(name):
            return True
        return (
            kind == "request-header"
            and self._redact_authorization
            and name == _AUTHORIZATION.encode()
        )

    def _header(self, kind: str, name: str) -> _Field:
        names = self._request_names if kind == "request-header" else self._response_names
        index = names.index(header_name(name))
        redact = (
            kind == "request-header"
            and self._redact_authorization
            and names[index] == _AUTHORIZATION.encode()
        )

        def column(batch: _Batch) -> Sequence[bytes]:
            fields = batch.request_fields if kind == "request-header" else batch.response_fields
            values = fields[index]
            if redact:
                # Read for the user name with the field allowed; the field itself is not.
                values = [None if value is None else REDACTED for value in values]
            return _dash_for_none(values)

        return _ClientControlled(column)


_DURATION_DIVISORS = {"microseconds": 1, "milliseconds": 1000, "seconds": _MICROSECONDS}
# The ids %{trace_id}x and %{span_id}x show: the first or second of trace_ids'.
_TRACE_IDS = {"trace_id": 0, "span_id": 1}


def _extras_position(kind: str, argument: str) -> int:
    """The position in a record's extras of the field a directive (%{NAME}x, %I) shows."""
    return Extras._fields.index(
        _EXTRAS_DIRECTIVES[argument] if kind == "extra" else "bytes_received"
    )


def _note_column(notes: Sequence[Notes], name: str) -> list[bytes]:
    """The note ``name`` of each record (``note_text``), ``-`` where it has none; raw,
    escaped as client-controlled text when the batch needs it."""
    return [
        _DASH if not note or name not in note else _text(note_text(note[name])) for note in notes
    ]


def _environ_column(extras: Sequence[Extras | None], name: str) -> list[bytes]:
    """The server variable ``name`` of each record (``note_text``), ``-`` where none."""
    column = []
    for extra in extras:
        values = None if extra is None else extra[ENVIRON]
        column.append(_DASH if not values or name not in values else _text(note_text(values[name])))
    return column


def _extra_column(extras: Sequence[Extras | None], position: int) -> list[bytes]:
    """A field of each record's extras (``note_text``: ``true``/``false`` for a bool),
    ``-`` where unknown."""
    return [_DASH if extra is None else _text(note_text(extra[position])) for extra in extras]


def _trace_column(
    extras: Sequence[Extras | None], traceparents: Sequence[Any], which: int
) -> list[bytes]:
    """Each record's trace id (``which`` 0) or span id (1), ``-`` without (see _trace)."""
    column = []
    for extra, traceparent in zip(extras, traceparents, strict=True):
        ids = trace_ids(None if extra is None else extra[TRACE], traceparent)
        column.append(_DASH if ids is None else ids[which].encode("ascii"))
    return column


# What %X writes: Apache's connection status.
_ABORTED = b"X"
_KEPT_ALIVE = b"+"
_CLOSED = b"-"


def _connection_status(
    extras: Extras | None, protocol: str | None, request: Any, response: Any
) -> bytes:
    """Apache's ``%X``: ``X`` when the response did not complete, ``+`` when the
    connection may stay open after it, ``-`` when it closes, or when nobody knows
    whether the response completed (an integration that does not say)."""
    completed = None if extras is None else extras[COMPLETED]
    if completed is False:
        return _ABORTED
    if completed is not True:
        return _CLOSED
    # HTTP/1.1 keeps a connection open unless either side says close; HTTP/1.0 closes
    # it unless the client asks to keep it (RFC 9112 9.3); HTTP/2 and 3 multiplex.
    tokens = {
        token.strip().lower()
        for value in (request, response)
        if value is not None
        for token in (value.decode("latin-1") if isinstance(value, bytes) else value).split(",")
    }
    if "close" in tokens:
        return _CLOSED
    if protocol == "HTTP/1.0" and "keep-alive" not in tokens:
        return _CLOSED
    return _KEPT_ALIVE


def _escaped_text(value: str) -> bytes:
    return escape(_text(value))


def _user(authorization: bytes | None) -> bytes:
    """The user name of Basic credentials, escaped, or ``-``; never the password."""
    if authorization is None:
        return _DASH
    scheme, _, credentials = authorization.strip().partition(b" ")
    if scheme.lower() != b"basic":
        return _DASH
    try:
        decoded = base64.b64decode(credentials.strip())
    except (binascii.Error, ValueError):
        return _DASH
    user, colon, _ = decoded.partition(b":")
    # Without a colon the credentials are malformed, and might be all password.
    return escape_unquoted(user) if colon and user else _DASH


def _in_units(microseconds: list[int | None], divisor: int) -> list[int | None]:
    if divisor == 1:
        return microseconds
    if None in microseconds:
        return [None if number is None else number // divisor for number in microseconds]
    return list(map(floordiv, cast("list[int]", microseconds), repeat(divisor)))


def _numbers(format: bytes, numbers: Sequence[int | None], split: int = 0) -> list[bytes]:
    """Each number formatted (as ``divmod(number, split)`` if ``split``); ``-`` for None."""
    missing = None in numbers
    present = cast("Sequence[int]", [number or 0 for number in numbers] if missing else numbers)
    values = (
        tuple(chain.from_iterable(map(divmod, present, repeat(split)))) if split else tuple(present)
    )
    # One %-formatting for the whole column; no field holds a space.
    fields = ((format + b" ") * len(present) % values).split()
    if missing:
        return [
            field if number is not None else _DASH
            for field, number in zip(fields, numbers, strict=True)
        ]
    return fields


def _epoch_fields(times: Sequence[float], unit: str) -> list[bytes]:
    """Apache's ``%{sec}t`` and its kin: the time since the epoch, or its fraction."""
    per_second, format = _EPOCH_UNITS[unit]
    counts = list(map(math.floor, map(mul, times, repeat(float(per_second)))))
    if unit.endswith("_frac"):
        counts = list(map(mod, counts, repeat(per_second)))
    return _numbers(format, counts)
