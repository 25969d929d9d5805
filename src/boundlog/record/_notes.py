"""Fields the application adds to its request's record: ``boundlog.add_fields``.

A middleware whose log reads notes (its format's ``reads_notes``) sets ``NOTES``, a
context variable, to a new dict at the start of each request, in the request's own
context; ``add_fields`` adds to that dict.  Every place a request's code runs sees it:
the endpoint's task, a thread pool's thread that copied the context (Starlette's
``run_in_threadpool``, ``asyncio.to_thread``), a task a middleware started for the
downstream application (Starlette's ``BaseHTTPMiddleware``), since a copied context
holds the same dict.  The record takes a copy of the dict (``RecordBudget.notes``,
which cuts long values to the log's ``max_record_bytes``) when the application's
call ends (under ASGI after its background tasks, which run once the response has
gone: the middleware holds the record until then), so nothing changes a record the
writer may be reading.  A new request starts with a
new dict, so fields never pass from one request to another, even in a thread or a
context that serves many; outside a logged request ``NOTES`` holds None and
``add_fields`` does nothing.  The WSGI middleware resets ``NOTES`` when the server
closes the body, since a thread serves request after request in one context; under
ASGI each request runs in a task, whose context is its own.  A log whose format reads no notes sets nothing: the
request path pays nothing for the feature.

Values are not checked here, which would cost every call: on the writer thread, the
formats write a str, int, float, bool or None as the JSON scalar it is (a float that
is not finite as null), and any other value as the string of its ``str()``
(``note_text``).
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from typing import Any

#: The notes of the request whose code is running: a dict, or None outside a request
#: of a log that reads notes.
NOTES: ContextVar[dict[str, Any] | None] = ContextVar("boundlog_notes", default=None)

_get = NOTES.get


def add_fields(**fields: Any) -> None:
    """Add ``fields`` to the record of the request whose code is running.

    ``boundlog.add_fields(user="ada", tenant=7)``: JSON lines show them as top-level
    keys after the built-in ones, a template as ``%{user}n``.  Values should be JSON
    scalars (str, int, float, bool or None); any other is written as its ``str()``.  A
    name given again replaces the earlier value.  Outside a request logged by a
    middleware whose log reads notes, it does nothing.
    """
    notes = _get()
    if notes is not None:
        notes.update(fields)


def note_text(value: object) -> str:
    """The text of a note's value in a template line: a str as it is, a bool as
    ``true`` or ``false``, a number as Python writes it (``7``, ``0.5``), ``-`` for
    None and for a float that is not finite, and any other value as its ``str()``
    (``<unprintable TYPE>`` if that raises, or an int too long to write)."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    try:
        if isinstance(value, int):
            return int.__repr__(value)
        if isinstance(value, float):
            return float.__repr__(value) if math.isfinite(value) else "-"
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__qualname__}>"
