"""What an integration learns of an exchange for a log that asks: a record's extras.

The fields of :class:`~boundlog.Extras` cost the request path something to learn, so
an integration asks ``learner(log.reads_extras)`` for a function that learns just the
fields the log's format reads, and hands over None (no extras) when it reads none:
a log whose format shows none of them pays one test of None per request.

The function runs on the request path when the response ends, in the request's own
context: the context OpenTelemetry's middleware, placed outside boundlog's, made its
span current in.  It must never format, search or do I/O: it keeps what it finds as it
is (the span's ids as integers), and the writer thread formats it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._record import Extras, new_extras

#: ``learn(scope, completed)``: the extras of the exchange a scope (or a WSGI environ)
#: describes, whose response did or did not complete.
Learn = Callable[[Mapping[str, Any], bool], Extras]


def learner(reads: frozenset[str]) -> Learn | None:
    """A function learning the extras ``reads`` names, or None when there are none."""
    current_trace = trace_reader() if "trace" in reads else None
    reads_completed = "completed" in reads
    if current_trace is None and not reads_completed:
        # Nothing to learn (no OpenTelemetry API to ask for a span): no call at all.
        return None

    def learn(scope: Mapping[str, Any], completed: bool) -> Extras:
        # By position: Extras(...) with keywords costs a Python-level call more.
        return new_extras(Extras, (
            None, current_trace() if current_trace is not None else None,
            completed if reads_completed else None, None, None, None,
        ))  # fmt: skip

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
