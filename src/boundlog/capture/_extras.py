"""What an integration learns of an exchange for a log that asks: a record's extras.

The fields of :class:`~boundlog.Extras` cost the request path something to learn, so
an integration asks ``learner(log.reads_extras, ...)`` for a function that learns just the
fields the log's format reads, and hands over None (no extras) when it reads none:
a log whose format shows none of them pays one test of None per request.

The function runs on the request path when the response ends, in the request's own
context: the context OpenTelemetry's middleware, placed outside boundlog's, made its
span current in.  It must never format, search or do I/O: it keeps what it finds as it
is (the span's ids as integers), and the writer thread formats it.

The server variables a format names (``%{NAME}e``, ``AccessLog.environ_names``) are
copied out, name by name, into a dict of their own (``Extras.environ``): a record never
keeps the environ or scope they come from (see ``wsgi._Exchange._record``).

The bytes of the request body the application received (ASGI, WSGI) are counted by
the integration, not here: counting them means wrapping ``receive`` or ``wsgi.input``
before the application runs, for a log that reads them.  Both request paths fill the
count in with :func:`with_bytes_received` (the C ones as csrc/record/extras.h does).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from .. import _core
from .._options import DEFAULT_MAX_RECORD_BYTES
from ..record._budget import CUT_MARKER
from ..record._record import Extras, new_extras
from ._routes import ROUTE_KEY, asgi_route, environ_route

#: ``learn(scope, completed)``: the extras of the exchange an ASGI scope describes,
#: whose response did or did not complete.
Learn = Callable[[Mapping[str, Any], bool], Extras]

#: ``learn(environ, completed, trace)``: the extras of the exchange a WSGI environ describes,
#: whose response did or did not complete.
WsgiLearn = Callable[[Mapping[str, Any], bool, "tuple[int, int] | None"], Extras]

#: ``read(variables)``: the values of the variables a format names that ``variables``
#: holds (a WSGI environ, an ASGI scope, an aiohttp request), by name.
ReadEnviron = Callable[[Mapping[Any, Any]], dict[str, Any]]

# What ends a str value cut to its bound; the number is the characters cut.
_CUT_TEXT = CUT_MARKER.decode("ascii").replace("bytes", "characters")

#: The extras of a log that reads none an integration learns by itself, to fill in what
#: it does learn (``NO_EXTRAS._replace(close_code=n)``).
NO_EXTRAS = Extras()


def with_bytes_received(extras: Extras | None, received: int) -> Extras:
    """``extras`` (None: those of a log that reads no other) with ``bytes_received``.

    By position, as ``learn`` builds them: ``_replace`` costs the request path a keyword
    dict and two Python-level calls more.
    """
    route, trace, completed, _, close_code, environ = extras or NO_EXTRAS
    return new_extras(Extras, (route, trace, completed, received, close_code, environ))


def learner(
    reads: frozenset[str],
    environ_names: frozenset[str] = frozenset(),
    limit: int = DEFAULT_MAX_RECORD_BYTES,
) -> Learn | None:
    """A function learning the extras ``reads`` names, or None when there are none.

    ``environ_names`` are the server variables the format names, each looked up as a
    key of the scope, then in the scope's ``state`` (see :func:`scope_reader`); a str
    or bytes value is kept to ``limit`` (see :func:`environ_reader`).
    """
    reads_route = "route" in reads
    current_trace = trace_reader() if "trace" in reads else None
    reads_completed = "completed" in reads
    read_scope = scope_reader(environ_names, limit) if "environ" in reads else None
    if not reads_route and current_trace is None and not reads_completed and read_scope is None:
        # Nothing to learn (no OpenTelemetry API to ask for a span): no call at all.
        return None
    if read_scope is None:
        compiled = compiled_learner(reads_route, current_trace is not None, reads_completed)
        if compiled is not None:
            return compiled
    return python_learner(reads_route, current_trace, reads_completed, read_scope)


def python_learner(
    reads_route: bool,
    current_trace: Callable[[], tuple[int, int] | None] | None,
    reads_completed: bool,
    read_scope: ReadEnviron | None,
) -> Learn:
    """:func:`learner`'s function in Python: the reference of ``compiled_learner``."""

    def learn(scope: Mapping[str, Any], completed: bool) -> Extras:
        # By position: Extras(...) with keywords costs a Python-level call more.  The
        # router has run by now: the scope holds what it matched (_routes).
        return new_extras(Extras, (
            asgi_route(scope) if reads_route else None,
            current_trace() if current_trace is not None else None,
            completed if reads_completed else None, None, None,
            read_scope(scope) if read_scope is not None else None,
        ))  # fmt: skip

    return learn


def compiled_learner(reads_route: bool, reads_trace: bool, reads_completed: bool) -> Learn | None:
    """:func:`learner`'s function in C (csrc/paths/asgi_learn.c) for a log that names
    no server variables, or None: no C core, or an OpenTelemetry API whose current span
    C would not find where the API finds it."""
    if _core.learn_asgi_extras is None:
        return None
    trace_parts: tuple[Any, ...] = (None, None, None, None)
    if reads_trace:
        found = _span_lookup()
        if found is None:
            return None
        trace_parts = found
    parts = (
        Extras, reads_route, ROUTE_KEY, asgi_route, reads_completed, *trace_parts,
        ("route", "path_template", "get_span_context", "is_valid", "trace_id", "span_id",
         "path_format", "app_root_path"),
    )  # fmt: skip
    return functools.partial(_core.learn_asgi_extras, parts)


def _span_lookup() -> tuple[Any, ...] | None:
    """Where OpenTelemetry's API keeps the current span: the context variable of its
    runtime context, the span's key in the context, and the API's Span and SpanContext
    classes; None when the API keeps it anywhere else (another runtime context chosen
    by ``OTEL_PYTHON_CONTEXT``, an API of another shape)."""
    try:
        from opentelemetry import context as otel_context
        from opentelemetry.context.context import Context
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
        from opentelemetry.trace import Span, SpanContext
        from opentelemetry.trace.propagation import _SPAN_KEY
    except ImportError:
        return None
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    variable = getattr(runtime, "_current_context", None)
    if (
        type(runtime) is not ContextVarsRuntimeContext
        or type(variable) is not ContextVar
        or not issubclass(Context, dict)
        or Context.get is not dict.get
        or not isinstance(_SPAN_KEY, str)
        or not issubclass(SpanContext, tuple)
    ):
        return None
    return variable, _SPAN_KEY, Span, SpanContext


def wsgi_learner(
    reads: frozenset[str],
    environ_names: frozenset[str] = frozenset(),
    limit: int = DEFAULT_MAX_RECORD_BYTES,
) -> WsgiLearn | None:
    """A function learning the extras ``reads`` names from a WSGI environ once the
    response has ended, or None when there are none to learn.

    ``environ_names`` are the environ variables the format names, whose values are
    kept (a str to ``limit``, see :func:`environ_reader`).
    """
    reads_route = "route" in reads
    read_environ = environ_reader(environ_names, limit) if "environ" in reads else None
    reads_completed = "completed" in reads
    reads_trace = "trace" in reads and trace_reader() is not None
    if not reads_route and read_environ is None and not reads_completed and not reads_trace:
        return None

    def learn(environ: Mapping[str, Any], completed: bool, trace: tuple[int, int] | None) -> Extras:
        return new_extras(Extras, (
            environ_route(environ) if reads_route else None, trace,
            completed if reads_completed else None, None, None,
            read_environ(environ) if read_environ is not None else None,
        ))  # fmt: skip

    return learn


def early_trace_reader(reads: frozenset[str]) -> Callable[[], tuple[int, int] | None] | None:
    """For a log that reads the trace, a function returning the ids of the span current
    as the application is called, or None.

    The WSGI middleware and aiohttp's read the span then, not when the response ends:
    OpenTelemetry's WSGI middleware makes its span current while it calls the
    application and while the server takes the body, but the server closes the body
    (where the record is made) after that middleware's context has ended; aiohttp calls
    its access logger after OpenTelemetry's aiohttp middleware has returned.  What the
    reader raises gives no ids rather than fail the request: the trace is the
    telemetry's, the request the application's.
    """
    current_trace = trace_reader() if "trace" in reads else None
    if current_trace is None:
        return None
    read = current_trace

    def guarded() -> tuple[int, int] | None:
        try:
            return read()
        except Exception:
            return None

    return guarded


def environ_reader(names: frozenset[str], limit: int) -> ReadEnviron | None:
    """A function copying the variables ``names`` that a mapping holds into a dict of
    their own, or None when there are no names (nothing to read, no call).

    Values are kept as they are (the writer thread writes other than str with
    ``str()``), but a str or bytes longer than ``limit`` (the log's
    ``max_record_bytes``) is cut to it: the server fills some variables from the
    request (``HTTP_*``, ``QUERY_STRING``, an ASGI scope's ``path``), and what a queued
    record keeps of the client's bytes stays bounded as with its other fields (see
    ``_budget``), ``limit`` for each name the format names.
    """
    if not names:
        return None
    # In one order whatever the set's: a format iterating the dict writes every line alike.
    ordered = tuple(sorted(names))

    def read(variables: Mapping[Any, Any]) -> dict[str, Any]:
        found = {}
        for name in ordered:
            if name in variables:
                found[name] = _bounded(variables[name], limit)
        return found

    return read


def scope_reader(names: frozenset[str], limit: int) -> ReadEnviron | None:
    """:func:`environ_reader` for an ASGI scope: a name the scope does not hold is
    looked up in its ``state``, the dict that Starlette's ``request.state`` attributes
    are set in (and that ASGI servers fill from the lifespan's state)."""
    if not names:
        return None
    ordered = tuple(sorted(names))  # as in environ_reader

    def read(scope: Mapping[str, Any]) -> dict[str, Any]:
        found = {}
        state = scope.get("state")
        if not isinstance(state, Mapping):
            state = None
        for name in ordered:
            if name in scope:
                found[name] = _bounded(scope[name], limit)
            elif state is not None and name in state:
                found[name] = _bounded(state[name], limit)
        return found

    return read


def _bounded(value: Any, limit: int) -> Any:
    """``value``, or a str or bytes longer than ``limit`` cut to it and marked so."""
    if type(value) is str and len(value) > limit:
        return value[:limit] + _CUT_TEXT % (len(value) - limit)
    if type(value) is bytes and len(value) > limit:
        return value[:limit] + CUT_MARKER % (len(value) - limit)
    return value


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
