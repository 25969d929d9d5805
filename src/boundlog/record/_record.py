"""The immutable record that travels from the request path to the writer thread.

A record holds only what the server already has in hand when the response finishes,
in the form the server gave it: raw bytes for the request target, and the server's own
header lists, so that nothing is decoded, searched, escaped or formatted on the request
path.  Turning a record into a line is the writer thread's job (see ``boundlog.formats``), and
so is finding a header field (see ``_headers``).  The exceptions are bounded: a request
over the log's ``max_record_bytes`` is cut down to the fields the log reads before its
record is made (see ``_budget``), the WSGI middleware copies the fields a log names
out of the environ rather than keep it, and a header list given as an iterator is read
into a tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, NamedTuple, TypeAlias, cast

from .._errors import ConfigurationError

#: A message's header fields as a server holds them: ``(name, value)`` pairs of bytes
#: (ASGI, aiohttp's raw headers) or of latin-1 text (WSGI's response headers, gunicorn),
#: names in any case, repeats allowed; or a WSGI environ, whose ``HTTP_*`` variables
#: are the request's headers.  The record keeps a reference, not a copy (but see the
#: module docstring): the server must not change it once the response has finished,
#: and none does.
Headers: TypeAlias = Iterable[tuple[bytes | str, bytes | str]] | Mapping[str, Any]

#: A value of a record's notes: a JSON scalar.  Applications may hand over any object
#: (``boundlog.add_fields`` does not check, to cost nothing on the request path); the
#: formats write any other as its ``str()`` (see ``_notes``).
Note: TypeAlias = str | int | float | bool | None

#: What the application or server knows of an exchange besides the exchange itself:
#: names (str) to JSON scalars, or None for nothing.
Notes: TypeAlias = Mapping[str, Any] | None


# The header containers records hold most often, none of them an iterator.
_REREADABLE = frozenset({list, tuple, dict})


class Extras(NamedTuple):
    """What an integration learns of an exchange only when a log asks for it.

    Each field costs the request path something (a span to read, a ``receive`` to
    wrap), so an integration fills in only the fields its log's format reads
    (``AccessLog.reads_extras``) and leaves the others None; a record whose log reads
    none holds None instead of an Extras.  None in a field means unknown, not absent:
    the formats write ``-`` or null for it.
    """

    #: The route template the application matched (``/items/{item_id}``).
    route: str | None = None
    #: The trace and span ids (integers, as OpenTelemetry holds them) of the span that
    #: was current in the request's context; None when there was none, and the formats
    #: then read the ``traceparent`` request header instead.
    trace: tuple[int, int] | None = None
    #: Whether the response was sent to its end: False when the client left or the
    #: application failed before it did.
    completed: bool | None = None
    #: Request body bytes the application read.
    bytes_received: int | None = None
    #: The close code of a websocket session.
    close_code: int | None = None
    #: The values of the server's variables the format names (``%{NAME}e``): the WSGI
    #: environ's, or under ASGI the scope's keys and its ``state``.
    environ: Mapping[str, Any] | None = None


#: The names of the fields of :class:`Extras`.
EXTRAS_FIELDS: Final = frozenset(Extras._fields)
#: What a format that does not say reads: every field but ``bytes_received``, which
#: costs each request a wrapped ``receive`` or ``wsgi.input`` and is counted only when
#: a format asks.
DEFAULT_EXTRAS: Final = EXTRAS_FIELDS - {"bytes_received"}


def extras_read_by(fmt: object) -> frozenset[str]:
    """The fields of a record's extras a format says it reads (its ``reads_extras``,
    field names of :class:`Extras`); if it does not say, ``DEFAULT_EXTRAS``."""
    names = getattr(fmt, "reads_extras", DEFAULT_EXTRAS)
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise ConfigurationError(
            f"{type(fmt).__name__}.reads_extras must be a set of field names of "
            f"boundlog.Extras, not {names!r}"
        )
    unknown = sorted(frozenset(names) - EXTRAS_FIELDS)
    if unknown:
        raise ConfigurationError(
            f"{type(fmt).__name__}.reads_extras names {', '.join(map(repr, unknown))}, which "
            f"records do not have: the fields of boundlog.Extras are "
            f"{', '.join(Extras._fields)}"
        )
    return frozenset(names)


def environ_names_of(fmt: object) -> frozenset[str]:
    """The server variables a format says it reads (its ``environ_names``, a set of
    str: WSGI environ keys, ASGI scope keys or names in the scope's ``state``); none if
    it does not say."""
    names: object = getattr(fmt, "environ_names", frozenset())
    if (
        isinstance(names, str)
        or not isinstance(names, Iterable)
        or not all(isinstance(name, str) for name in names)
    ):
        raise ConfigurationError(
            f"{type(fmt).__name__}.environ_names must be a set of variable names, not {names!r}"
        )
    return frozenset(cast("Iterable[str]", names))


class _Fields(NamedTuple):
    """The fields of a :class:`Record`, in order."""

    #: Wall-clock time (seconds since the epoch) when the request was received.
    time: float
    #: Seconds from receiving the request to handing over the last body byte (for a
    #: websocket session, to its end), measured with a monotonic clock: never negative,
    #: whatever the wall clock does meanwhile.
    duration: float
    #: The client's address (IP or socket path) as the server reported it, or None.
    client: str | None
    #: The request method, e.g. ``"GET"``.
    method: str
    #: The request path as sent on the wire, without the query string.
    path: bytes
    #: The raw query string without the ``?``; empty when there is none.
    query: bytes
    #: The protocol, e.g. ``"HTTP/1.1"``.
    protocol: str
    #: The response status code; 500 when the application raised before responding.
    #: A websocket session's is its handshake's: 101 when accepted, 403 when refused.
    status: int
    #: Response body bytes handed to the server; a websocket session's frames' payload
    #: bytes.  Lines show 0 for HEAD, 204, 304 and 1xx responses (101 aside), whose
    #: bodies servers discard.
    bytes_sent: int
    #: The request's header fields (Referer and User-Agent for the combined format).
    request_headers: Headers = ()
    #: The response's header fields, as the application gave them to the server.
    response_headers: Headers = ()
    #: What the application knows besides the exchange: a dict of names (str) to JSON
    #: scalars (str, int, float, bool, None), or None when there is nothing.
    #: ``boundlog.add_fields(**fields)`` adds to it from the request's code; the
    #: middlewares collect them only for a log whose format reads notes
    #: (``reads_notes``), so other records hold None.  A copy, made when the response
    #: ends: nothing changes it afterwards.
    notes: Notes = None
    #: What the integration learnt of the exchange besides the fields above, for a log
    #: whose format reads it (:class:`Extras`), or None.
    extras: Extras | None = None


class Record(_Fields):
    """One completed HTTP exchange: a named tuple of the fields above, in that order.

    Every format, ``keep`` predicate and rewrite sees records of this type, and may read
    them by name (``record.status``) or by position, in the order above.  A header list
    given as an iterator (a generator, ``map(...)``) is read into a tuple here, because
    the writer may read a record's headers more than once.
    """

    __slots__ = ()

    def __new__(
        cls,
        time: float,
        duration: float,
        client: str | None,
        method: str,
        path: bytes,
        query: bytes,
        protocol: str,
        status: int,
        bytes_sent: int,
        request_headers: Headers = (),
        response_headers: Headers = (),
        notes: Notes = None,
        extras: Extras | None = None,
    ) -> Record:
        # The type test first: the ABC's isinstance costs ten times as much.
        if type(request_headers) not in _REREADABLE and isinstance(request_headers, Iterator):
            request_headers = tuple(request_headers)
        if type(response_headers) not in _REREADABLE and isinstance(response_headers, Iterator):
            response_headers = tuple(response_headers)
        return tuple.__new__(cls, (time, duration, client, method, path, query, protocol,
                                   status, bytes_sent, request_headers, response_headers,
                                   notes, extras))  # fmt: skip


#: ``new_record(Record, (time, duration, ..., notes, extras))``: a Record from its
#: fields in order, for the integrations' request path.  It skips the checks of
#: ``Record(...)``, a Python-level call that costs twice as much; integrations never hand
#: over iterators.
new_record = cast(Callable[[type[Record], tuple[Any, ...]], Record], tuple.__new__)

#: ``new_extras(Extras, (route, trace, ...))``: an Extras from its fields in order,
#: without the keyword handling of ``Extras(...)``, for the integrations' request path.
new_extras = cast(Callable[[type[Extras], tuple[Any, ...]], Extras], tuple.__new__)

# The position of each field, for code that reads records by index in a hot loop
# (Final, so that type checkers know the field type each one selects).
TIME: Final = 0
DURATION: Final = 1
CLIENT: Final = 2
METHOD: Final = 3
PATH: Final = 4
QUERY: Final = 5
PROTOCOL: Final = 6
STATUS: Final = 7
BYTES_SENT: Final = 8
REQUEST_HEADERS: Final = 9
RESPONSE_HEADERS: Final = 10
NOTES: Final = 11
EXTRAS: Final = 12
# The position of each field of Extras.
ROUTE: Final = 0
TRACE: Final = 1
COMPLETED: Final = 2
BYTES_RECEIVED: Final = 3
CLOSE_CODE: Final = 4
ENVIRON: Final = 5
