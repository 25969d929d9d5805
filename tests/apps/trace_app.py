"""A Starlette application that answers ``/ids`` with the trace and span ids of the
OpenTelemetry span current in its request (tests/unit/capture/test_trace.py), logged by boundlog's
ASGI middleware two ways:

* ``traced``: boundlog inside OpenTelemetry's ASGI middleware, as docs/tracing.md
  tells: the server span OpenTelemetry makes is current while the application runs,
  so the lines show its ids;
* ``untraced``: boundlog alone: no span, so the lines show the ids of the request's
  ``traceparent`` header.

The SDK's tracer provider makes real (recording) spans; nothing exports them.
Its log options come from the environment (see ``tests.apps.log_options``).
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import TracerProvider
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from boundlog.asgi import AccessLogMiddleware

from . import log_options

trace.set_tracer_provider(TracerProvider())


async def ids(request: Request) -> JSONResponse:
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return JSONResponse({"trace_id": None, "span_id": None})
    return JSONResponse(
        {"trace_id": "%032x" % context.trace_id, "span_id": "%016x" % context.span_id}
    )


traced = OpenTelemetryMiddleware(
    AccessLogMiddleware(Starlette(routes=[Route("/ids", ids)]), **log_options())
)
untraced = AccessLogMiddleware(Starlette(routes=[Route("/ids", ids)]), **log_options())
