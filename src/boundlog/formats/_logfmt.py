"""logfmt lines: the fields of a JSON line as ``key=value`` pairs, one line per record.

A line holds the pairs a JSON line of the same options holds (``_json``: the same keys,
added header fields, fields of the extras, server variables and the application's
fields), in the same order, separated by one space::

    time=2026-11-30T09:12:01.123+00:00 client=127.0.0.1 method=GET path=/items query="" ...

Each value is its JSON value loosened, so that a logfmt parser (go-logfmt, Loki's
``| logfmt``, logfmtkv) reads back exactly what a JSON parser reads from the JSON line:

* null (a missing header, an unknown route, a duration that is not finite) leaves the
  pair out: a parser then has no value for the key, and no text stands for one (a
  ``null`` or ``-`` would be read back as that text, as if a client had sent it);
* a number, ``true`` or ``false`` is written as the JSON line writes it, unquoted;
* a string is the JSON line's string: valid UTF-8 as its text, bytes that are not
  valid UTF-8 as the text ``\\xhh`` for each byte from 0x80 on, a backslash as the
  text ``\\x5c`` (so ``boundlog.unescape`` gives back the bytes the client sent), that
  text written in quotes as JSON writes it (ASCII only: ``\\"``, ``\\\\``, ``\\n``,
  ``\\r``, ``\\t``, ``\\b``, ``\\f``, ``\\u00hh`` for other controls and DEL, ``\\uhhhh``
  and surrogate pairs above ASCII), which are exactly the escapes go-logfmt reads
  inside quotes.  The quotes are dropped when the text is not empty and holds no
  space, ``=``, ``"`` or backslash: the text is then printable ASCII that a parser
  reads as it is.  So a bare value never holds a backslash, every backslash of a line
  is inside quotes and starts an escape, and every line is printable ASCII, one line
  whatever the client sent (no byte or character that ``str.splitlines()`` breaks on).

Keys are ASCII and never quoted (go-logfmt reads no quoted key).  The keys the format
is built with (``rename``, a mapping of header names or variables to keys) must hold
only printable ASCII other than space, ``=``, ``"`` and backslash: another is a
ConfigurationError.  A field the application added (``boundlog.add_fields``) is named
at run time, so its name is made safe instead: each character outside those becomes
``_`` (an empty name is ``_``), then, as in a JSON line, a name the line already has
is prefixed ``app.`` until it is new.

When the C core is built (``_core``), ``LogfmtFormat.format_batch`` runs its C
counterpart (``csrc/formats/json.c``, the JSON line's walk, with the loosening of
``csrc/formats/logfmt.c``); the code here stays the reference it is tested against
(``tests/speedups/test_speedups_logfmt.py``) and formats any batch the C code hands back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from itertools import repeat
from operator import mul

from .._core import CompiledFirst
from .._core import format_logfmt as _format_logfmt
from .._errors import ConfigurationError
from ..capture._trace import trace_ids
from ..record._record import COMPLETED, ENVIRON, ROUTE, TRACE, Extras, Notes, Record
from ._columns import _bytes_on_the_wire, _Layout, _per_value
from ._json import (
    JsonFormat,
    _built_in_keys,
    _environ_keys,
    _header_keys,
    _json_bytes,
    _json_milliseconds,
    _json_scalar,
    _json_text,
    _optional_extras,
)

# A character a key may not hold: anything but printable ASCII, and space, =, " and \.
_NOT_KEY = re.compile(r"[^!#-<>-\[\]-~]")
# What makes a JSON string's text keep its quotes.  The text between a JSON string's
# quotes is printable ASCII, and a " there is always escaped (\"), so a backslash
# finds it.
_QUOTED = re.compile(r"[ =\\]")


def logfmt_value(token: str) -> str | None:
    """The logfmt value of a JSON value's text (``token``), or None for null (the pair
    is left out): the rule in the module's docstring."""
    if token == "null":
        return None
    if token[:1] == '"':
        text = token[1:-1]
        if text and _QUOTED.search(text) is None:
            return text
    return token


def logfmt_key(name: str) -> str:
    """A field's name as a logfmt key: each character a key may not hold as ``_``."""
    return _NOT_KEY.sub("_", name) or "_"


def _pair(before: str, token: str) -> str:
    """``before`` (`` key=``) and the value of ``token``, or ``""`` for null."""
    value = logfmt_value(token)
    return "" if value is None else before + value


class LogfmtFormat(CompiledFirst):
    """One logfmt line per record: the fields of a JSON line as ``key=value`` pairs.

    It takes :class:`JsonFormat`'s options, with the same meanings and the same
    checks; every key given (``rename``, a mapping of header names or variables to
    keys) must be printable ASCII without space, ``=``, ``"`` or backslash.
    """

    __slots__ = (
        "_before", "_before_added", "_before_extras", "_before_time", "_extras_fields",
        "_header_fields", "_json", "_layout", "_texts",
    )  # fmt: skip

    #: logfmt lines show a record's notes (``boundlog.add_fields``).
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
        # The JSON line of the same options: it checks them and reads the fields; this
        # format writes what it reads, with keys of its own text.
        if isinstance(request_headers, Iterator):
            request_headers = list(request_headers)
        if isinstance(response_headers, Iterator):
            response_headers = list(response_headers)
        if isinstance(environ, Iterator):
            environ = list(environ)
        if isinstance(extras, Iterator):
            extras = list(extras)
        self._json = JsonFormat(
            utc=utc, request_headers=request_headers, response_headers=response_headers,
            rename=rename, allow_headers=allow_headers, extras=extras, environ=environ,
        )  # fmt: skip
        # Each key, named by what gives it, in the JSON line's order.
        keys = [(key, f"rename[{field!r}]") for field, key in _built_in_keys(rename or {}).items()]
        keys += [(field, f"extra {field}") for field in _optional_extras(extras)]
        keys += [(key, f"environ[{name!r}]") for name, key in _environ_keys(environ)]
        keys += [
            (key, f"{option}[{name!r}]")
            for option, headers, prefix in (
                ("request_headers", request_headers, ""),
                ("response_headers", response_headers, "response_"),
            )
            for name, key in _header_keys(option, headers, prefix=prefix)
        ]
        for key, what in keys:
            _check_key(what, key)
        before = [f" {key}=" for key, _ in keys]
        self._before_time = before[0][1:]
        # The text before each field the Python lines write in a column of their own:
        # client to duration, then the three built-in header fields.
        self._before = before[1:12]
        # The route, trace id, span id, completion, then the optional fields and the
        # variables; then the added header fields.
        added = len(self._json._extras_fields)
        before_extras_fields = before[16 : 16 + added]
        self._before_extras = before[12:16] + before_extras_fields
        self._before_added = before_added = before[16 + added :]
        self._header_fields = tuple(
            (text.encode("ascii"), *field[1:])
            for text, field in zip(
                before[9:12] + before_added, self._json._header_fields, strict=True
            )
        )
        self._extras_fields = tuple(
            (text.encode("ascii"), source)
            for text, (_, source) in zip(
                before_extras_fields, self._json._extras_fields, strict=True
            )
        )
        # What the C core writes between the fields (csrc/formats/json.h): the JSON
        # line's walk, with these texts.
        self._texts = (
            *(text.encode("ascii") for text in [self._before_time, *before[1:9]]),
            b"\n",
            *(text.encode("ascii") for text in before[12:16]),
        )
        columns = 1 + len(self._before) + 1 + len(before_added) + 1
        self._layout = _Layout([None] * columns + ["\n"])

    @property
    def request_header_names(self) -> frozenset[bytes]:
        """The request header fields the lines show."""
        return self._json.request_header_names

    @property
    def response_header_names(self) -> frozenset[bytes]:
        """The response header fields the lines show."""
        return self._json.response_header_names

    @property
    def reads_extras(self) -> frozenset[str]:
        """What lines show of a record's extras (as a JSON line of the same options)."""
        return self._json.reads_extras

    @property
    def environ_names(self) -> frozenset[str]:
        """The server variables lines show (``environ``)."""
        return self._json.environ_names

    def format_compiled(self, records: Sequence[Record]) -> bytes | None:
        assert _format_logfmt is not None
        json = self._json
        return _format_logfmt(
            records,
            json._clock.parts,
            self._texts,
            self._header_fields,
            json._keys,
            json._trace_header,
            self._extras_fields,
        )

    def format_batch_python(self, records: Sequence[Record]) -> bytes:
        """``format_batch`` in pure Python: the reference the C core is tested against."""
        if not records:
            return b""
        # The columns are made one at a time as they are laid out, so that a column's
        # JSON values are dropped once its pairs are made.
        return "".join(self._layout.lines(self._columns(records), len(records))).encode("ascii")

    def _columns(self, records: Sequence[Record]) -> Iterator[Iterable[str]]:
        """Each field's column of pairs (``""`` for a null), in line order."""
        (
            times, durations, clients, methods, paths, queries, protocols, statuses, sents,
            request_headers, response_headers, notes, extras,
        ) = zip(*records, strict=True)  # fmt: skip
        json = self._json
        request_columns = json._request.columns(request_headers)
        (
            before_client, before_method, before_path, before_query, before_protocol,
            before_status, before_sent, before_duration, *before_headers,
        ) = self._before  # fmt: skip
        yield map(self._before_time.__add__, json._clock.stamps(times))
        yield _per_value(clients, lambda client: _pair(before_client, _json_text(client)))
        yield _per_value(methods, lambda method: _pair(before_method, _json_text(method)))
        yield map(partial(_pair, before_path), _json_bytes(paths))
        yield map(partial(_pair, before_query), _json_bytes(queries))
        yield _per_value(protocols, lambda protocol: _pair(before_protocol, _json_text(protocol)))
        yield map(before_status.__add__, map("%d".__mod__, zip(statuses)))
        yield map(
            before_sent.__add__,
            map("%d".__mod__, zip(_bytes_on_the_wire(methods, statuses, sents))),
        )
        milliseconds = tuple(map(mul, durations, repeat(1000.0)))
        yield map(partial(_pair, before_duration), map(_json_milliseconds, milliseconds))
        for before, column in zip(before_headers, request_columns, strict=False):
            yield map(partial(_pair, before), _json_bytes(column))
        yield map(self._extras_pairs, extras, request_columns[json._traceparent])
        response_columns = json._response.columns(response_headers) if json._response_added else []
        added = [request_columns[index] for index in json._request_added]
        added += [response_columns[index] for index in json._response_added]
        for before, column in zip(self._before_added, added, strict=True):
            yield map(partial(_pair, before), _json_bytes(column))
        yield map(partial(notes_logfmt, taken=json._keys), notes)

    def _extras_pairs(self, extras: Extras | None, traceparent: bytes | str | None) -> str:
        """The route, trace id, span id and completion of a line, then the optional
        fields and the variables, as JsonFormat._extras_text writes their values."""
        before_route, before_trace_id, before_span_id, before_completed, *before_added = (
            self._before_extras
        )
        json = self._json
        before_optional = before_added[: len(json._optional)]
        before_environ = before_added[len(json._optional) :]
        route = None if extras is None else extras[ROUTE]
        ids = trace_ids(None if extras is None else extras[TRACE], traceparent)
        completed = None if extras is None else extras[COMPLETED]
        parts = [
            _pair(before_route, _json_text(route) if type(route) is str else _json_scalar(route)),
            "" if ids is None else f"{before_trace_id}{ids[0]}{before_span_id}{ids[1]}",
            _pair(before_completed, _json_scalar(completed)),
        ]
        for before, (_, index) in zip(before_optional, json._optional, strict=True):
            parts.append(_pair(before, _json_scalar(None if extras is None else extras[index])))
        if json._environ:
            values = None if extras is None else extras[ENVIRON]
            for before, (_, name) in zip(before_environ, json._environ, strict=True):
                parts.append(_pair(before, _json_scalar(values.get(name) if values else None)))
        return "".join(parts)


def notes_logfmt(notes: Notes, taken: frozenset[str]) -> str:
    """A record's notes as `` key=value`` pairs, ``""`` for none.

    A name is made a key (``logfmt_key``), then, as in a JSON line (``notes_json``),
    prefixed ``app.`` while it is one the line already has (``taken``, or an earlier
    note's); a note whose value is null takes its key but writes no pair.
    """
    if not notes:
        return ""
    written: set[str] = set()
    parts = []
    for name, value in notes.items():
        key = logfmt_key(name if type(name) is str else str(name))
        while key in taken or key in written:
            key = "app." + key
        written.add(key)
        parts.append(_pair(f" {key}=", _json_scalar(value)))
    return "".join(parts)


def _check_key(what: str, key: str) -> None:
    safe = logfmt_key(key)
    if safe != key:
        raise ConfigurationError(
            f"{what} is {key!r}, which a logfmt key cannot be: a key holds printable "
            f"ASCII other than space, '=', '\"' and '\\', e.g. {safe!r}"
        )
