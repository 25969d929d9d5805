"""The immutable record that travels from the request path to the writer thread.

A record holds only what the server already has in hand when the response finishes,
in the form the server gave it: raw bytes for the request target, and the server's own
header lists, so that nothing is decoded, searched, escaped or formatted on the request
path.  Turning a record into a line is the writer thread's job (see ``_formats``), and
so is finding a header field (see ``_headers``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeAlias

#: A message's header fields as a server holds them: ``(name, value)`` pairs of bytes
#: (ASGI, aiohttp's raw headers) or of latin-1 text (WSGI's response headers, gunicorn),
#: names in any case, repeats allowed; or a WSGI environ, whose ``HTTP_*`` variables
#: are the request's headers.  The record keeps a reference, never a copy: the server
#: must not change it once the response has finished, and none does.
Headers: TypeAlias = Iterable[tuple[bytes | str, bytes | str]] | Mapping[str, Any]


class Record(NamedTuple):
    """One completed HTTP exchange.

    The integrations hand plain tuples in this field order to the queue, because the
    generated ``Record(...)`` constructor is a Python-level call that costs three times
    as much on the request path; the formats read fields by position.  The field order
    is therefore part of the contract between the integrations and the formats.
    """

    #: Wall-clock time (seconds since the epoch) when the request was received.
    time: float
    #: Seconds from receiving the request to handing over the last body byte.
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
    status: int
    #: Response body bytes handed to the server.  Lines show 0 for HEAD, 1xx, 204 and
    #: 304 responses, whose bodies servers discard.
    bytes_sent: int
    #: The request's header fields (Referer and User-Agent for the combined format).
    request_headers: Headers = ()
    #: The response's header fields, as the application gave them to the server.
    response_headers: Headers = ()
