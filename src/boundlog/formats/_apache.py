"""Turning batches of records into bytes: the common and combined formats, and the
choice of a format by name.

Formatting runs on the writer thread, one batch at a time.  A format is an object with
``format_batch(records) -> bytes`` that returns one line per record, each ending in
``\\n``.  Nothing here is called on the request path.  The shared column-wise
machinery is in ``_columns``; the other formats are ``_json``, ``_logfmt``, ``_schemas``,
``_dev`` and ``_templates``.

An Apache line is built with the raw values first and checked in one pass: if the batch
has only printable ASCII, no backslash, and exactly the template's quotes and newlines
in the template's order, no client byte can have changed its shape and the batch is
returned as it is.  Otherwise it is built again with every client-controlled column
that holds an unsafe byte escaped (see ``_escape``).

When the C core is built (``_core``), ``ApacheFormat.format_batch`` runs its C
counterpart (``csrc/formats/clf.c``) instead; the code here stays the reference it is tested
against (``tests/speedups/test_speedups.py``) and formats any batch the C code hands back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import repeat
from typing import Protocol

from .._core import CompiledFirst
from .._core import format_apache as _format_apache
from .._errors import ConfigurationError
from ..record._headers import HeaderReader, environ_key
from ..record._record import Record
from ._columns import (
    _DASH,
    _NO_SEPARATOR_FOR_EMPTY_QUERY,
    _bytes_on_the_wire,
    _escaped_clients,
    _escaped_column,
    _Layout,
    _per_value,
    _raw_clients,
    _sent_fields,
    _text,
    _unchanged,
)
from ._dev import DevFormat
from ._escape import PLAIN as _PLAIN
from ._escape import escape
from ._json import JsonFormat
from ._logfmt import LogfmtFormat
from ._schemas import SCHEMAS, SchemaFormat
from ._timestamps import ClfClock


class Format(Protocol):
    """What the writer needs from a format: give any object with this method as
    ``AccessLog(format=...)`` to write lines of your own.

    The writer thread calls ``format_batch`` with each batch of :class:`Record` s (read
    them by name, ``record.status``, or by position), never on the request path.

    A format may also say which header fields it reads, as ``request_header_names``
    and ``response_header_names`` attributes (frozensets of lower-case bytes):
    integrations then keep just those fields in a record rather than the server's
    header lists (or a whole WSGI environ), which a queued record would keep alive.
    Without them, records keep the server's headers whole.  Likewise ``reads_notes``
    (a bool) says whether lines show a record's ``notes`` (``boundlog.add_fields``):
    False spares each request collecting them; without it they are collected.  And
    ``reads_extras`` (a set of field names of :class:`~boundlog.Extras`) says which of
    what integrations may learn of an exchange lines show; without it, integrations
    learn all they can.
    """

    def format_batch(self, records: Sequence[Record]) -> bytes:
        """Return one ``\\n``-terminated line per record, in order."""
        ...


class ApacheFormat(CompiledFirst):
    """The Common Log Format, optionally with Referer and User-Agent (combined)."""

    __slots__ = ("_clock", "_environ_keys", "_headers", "_layout", "_names", "_shape")

    def __init__(self, *, combined: bool, utc: bool) -> None:
        self._headers = HeaderReader(("referer", "user-agent")) if combined else None
        # What the C core (boundlog._speedups) needs to find the same fields (it redacts
        # nothing: neither field is one of _headers.SENSITIVE_HEADERS).
        self._names = self._headers.names if self._headers is not None else ()
        self._environ_keys = tuple(map(environ_key, self._names))
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
    #: Nor a record's notes (``boundlog.add_fields``).
    reads_notes: bool = False
    #: Nor anything of a record's extras.
    reads_extras: frozenset[str] = frozenset()

    def format_compiled(self, records: Sequence[Record]) -> bytes | None:
        assert _format_apache is not None
        return _format_apache(records, self._clock, self._names, self._environ_keys)

    def format_batch_python(self, records: Sequence[Record]) -> bytes:
        """``format_batch`` in pure Python: the reference the C core is tested against."""
        if not records:
            return b""
        count = len(records)
        (
            times, _, clients, methods, paths, queries, protocols, statuses, sents, headers, _, _, _,
        ) = zip(*records, strict=True)  # fmt: skip
        # The fields no client controls are built once, for both passes.
        stamps = self._clock.stamps(times)
        separators = list(map(_NO_SEPARATOR_FOR_EMPTY_QUERY.get, queries, repeat(b"?")))
        status_fields = list(_per_value(statuses, b"%d ".__mod__))
        sent_fields = _sent_fields(_bytes_on_the_wire(methods, statuses, sents))
        header_fields = self._headers.columns(headers, _DASH) if self._headers is not None else []

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
            # Built again escaped: the unescaped bytes need not be held meanwhile.
            del data
        return join(_escaped_clients(clients, raw_clients), escape, _escaped_column)


#: The format names a log takes as ``format=`` (and ``BOUNDLOG_FORMAT``, gunicorn's
#: ``--access-logformat``); anything else with ``%`` in it is a template.
FORMATS = ("combined", "common", "dev", "json", *SCHEMAS, "logfmt")


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
        for attribute in ("request_header_names", "response_header_names"):
            _check_header_names(name, attribute)
        return name
    if name == "combined":
        return ApacheFormat(combined=True, utc=utc)
    if name == "common":
        return ApacheFormat(combined=False, utc=utc)
    if name == "json":
        return JsonFormat(utc=utc)
    if name == "logfmt":
        return LogfmtFormat(utc=utc)
    if name == "dev":
        return DevFormat(utc=utc)
    if name in SCHEMAS:
        return SchemaFormat(name, utc=utc)
    if "%" in name:
        # Imported here: templates are built from this module's helpers.
        from ._templates import Template

        return Template(name, utc=utc)
    raise ConfigurationError(
        f"unknown format {name!r}: choose one of {', '.join(FORMATS)}, or write a template "
        "such as '%h %t \"%r\" %>s %b %D'"
    )


def _check_header_names(fmt: object, attribute: str) -> None:
    # The log looks these names up in servers' header lists and WSGI environs as it is
    # built, after the sink is opened: a wrong kind must be refused here, before.
    names = getattr(fmt, attribute, None)
    if names is None:
        return
    if (
        isinstance(names, str | bytes)
        or not isinstance(names, Collection)
        or not all(type(n) is bytes and n.isascii() and n == n.lower() for n in names)
    ):
        raise ConfigurationError(
            f"{type(fmt).__name__}.{attribute} must be lower-case bytes, e.g. "
            f"frozenset({{b'user-agent'}}), or None for any field, not {names!r}"
        )
