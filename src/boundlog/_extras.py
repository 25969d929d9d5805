"""What an integration learns of an exchange for a log that asks: a record's extras.

The fields of :class:`~boundlog.Extras` cost the request path something to learn, so
an integration asks ``learner(log.reads_extras)`` for a function that learns just the
fields the log's format reads, and hands over None (no extras) when it reads none:
a log whose format shows none of them pays one test of None per request.

The function runs on the request path when the response ends, in the request's own
context: the context OpenTelemetry's middleware, placed outside boundlog's, made its
span current in.  It must never format, search or do I/O: it keeps what it finds as it
is (the span's ids as integers), and the writer thread formats it.

What only the exchange itself shows is learnt by the integration, not here: the bytes of
the request body the application received (ASGI, WSGI) and whether a WSGI body was
sent to its end.  Learning those means wrapping ``receive`` or ``wsgi.input`` and the
body, which the C request paths do not do: a log reading them takes the pure-Python
path, and the integration fills them in (``NO_EXTRAS._replace``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._record import Extras, new_extras
from ._routes import asgi_route, environ_route

#: ``learn(scope, completed)``: the extras of the exchange an ASGI scope describes,
#: whose response did or did not complete.
Learn = Callable[[Mapping[str, Any], bool], Extras]

#: ``learn(environ)``: the extras of the exchange a WSGI environ describes.
WsgiLearn = Callable[[Mapping[str, Any]], Extras]

#: The extras of a log that reads none an integration learns by itself, to fill in what
#: it does learn (``NO_EXTRAS._replace(bytes_received=n)``).
NO_EXTRAS = Extras()

#: The fields ``wsgi_learner`` knows how to learn: what the application left in the
#: environ.
WSGI_LEARNED = frozenset({"route"})


def learner(reads: frozenset[str]) -> Learn | None:
    """A function learning the extras ``reads`` names, or None when there are none."""
    reads_route = "route" in reads
    current_trace = trace_reader() if "trace" in reads else None
    reads_completed = "completed" in reads
    if not reads_route and current_trace is None and not reads_completed:
        # Nothing to learn (no OpenTelemetry API to ask for a span): no call at all.
        return None

    def learn(scope: Mapping[str, Any], completed: bool) -> Extras:
        # By position: Extras(...) with keywords costs a Python-level call more.  The
        # router has run by now: the scope holds what it matched (_routes).
        return new_extras(Extras, (
            asgi_route(scope) if reads_route else None,
            current_trace() if current_trace is not None else None,
            completed if reads_completed else None, None, None, None,
        ))  # fmt: skip

    return learn


def wsgi_learner(reads: frozenset[str]) -> WsgiLearn | None:
    """A function learning the extras ``reads`` names from a WSGI environ once the
    response has ended, or None when there are none to learn."""
    if not reads & WSGI_LEARNED:
        return None

    def learn(environ: Mapping[str, Any]) -> Extras:
        return new_extras(Extras, (environ_route(environ), None, None, None, None, None))

    return learn


def trace_reader() -> Callable[[], tuple[int, int] | None] | None:
    """A function returning the trace and span ids of the OpenTelemetry span current in
    the caller's context, or None when there is none; None without opentelemetry-api
    (the formats then read the ``traceparent`` request header)."""
    try:
        from opentelemetry.trace import get_current_span
    except ImportError:
        return None

    def current_trace() -> tuple[int, int] | None:
        context = get_current_span().get_span_context()
        return (context.trace_id, context.span_id) if context.is_valid else None

    return current_trace
