"""A record from a WSGI environ: the one reading shared by the WSGI middleware and the
gunicorn logger class, so that the same request gives the same line under both.

PEP 3333 strings are the bytes on the wire decoded as latin-1: encoding them back
recovers what the client sent.  A client address or method the environ lacks, or
leaves empty, is logged as missing (``-`` in the Apache formats), never as an empty
field that would shift the fields after it; a missing protocol is logged as HTTP/1.0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import _core
from ..record._record import Extras, Headers, Notes, Record, new_record

#: Cuts path, query and request headers down to the log's budget (see ``_budget``):
#: ``RecordBudget.bounded`` for header pairs, ``bounded_environ`` for an environ.
Bound = Callable[[bytes, bytes, Any], tuple[bytes, bytes, Headers]]

#: With the C core, ``compiled(Record, environ, received, duration, status, sent,
#: request_headers, response_headers, bound, limit, notes, extras)`` is :func:`environ_record`'s record
#: for the usual environ (an exact dict of str values, a latin-1 target), and None for
#: any other, which the caller then hands to :func:`environ_record`.  ``limit`` is the
#: budget when ``bound`` is ``RecordBudget.bounded`` (the C code checks the size as it
#: does and calls it only when over), -1 to call ``bound`` always (csrc/paths/environ.c).
compiled = _core.environ_record


def environ_record(
    environ: Mapping[str, Any],
    received: float,
    duration: float,
    status: int,
    sent: int,
    request_headers: Headers,
    response_headers: Headers,
    bound: Bound,
    notes: Notes = None,
    extras: Extras | None = None,
) -> Record:
    """The record of the request ``environ`` describes, with the response's fields,
    what the client sent cut down by ``bound`` if it is over the log's budget, and
    ``notes`` (the record's field as it is: the caller made the copy)."""
    # The target as sent when the server keeps it (gunicorn's RAW_URI, uWSGI's
    # REQUEST_URI); PATH_INFO is already percent-decoded, and SCRIPT_NAME holds the
    # part of the path the application is mounted at.
    target = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if target:
        path, _, query = target.partition("?")
    else:
        path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        query = environ.get("QUERY_STRING", "")
    raw_path, raw_query, headers = bound(
        path.encode("latin-1"), query.encode("latin-1"), request_headers
    )
    return new_record(Record, (
        received, duration, environ.get("REMOTE_ADDR") or None,
        environ.get("REQUEST_METHOD") or "-", raw_path, raw_query,
        environ.get("SERVER_PROTOCOL") or "HTTP/1.0", status, sent,
        headers, response_headers, notes, extras,
    ))  # fmt: skip
