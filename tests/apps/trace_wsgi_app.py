"""A WSGI application that answers with the trace and span ids of the OpenTelemetry
span current in its request (tests/unit/capture/test_trace.py), behind OpenTelemetry's WSGI
middleware with boundlog's inside it, as docs/tracing.md tells: a generator, so
that its body is taken, and closed, after OpenTelemetry's call has returned.

The SDK's tracer provider makes real (recording) spans; nothing exports them.  Its log
options come from the environment (see ``tests.apps.log_options``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import TracerProvider

from boundlog.wsgi import AccessLogMiddleware

from . import log_options

trace.set_tracer_provider(TracerProvider())


def ids(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    context = trace.get_current_span().get_span_context()
    seen = (
        {"trace_id": "%032x" % context.trace_id, "span_id": "%016x" % context.span_id}
        if context.is_valid
        else {"trace_id": None, "span_id": None}
    )
    start_response("200 OK", [("Content-Type", "application/json")])
    yield json.dumps(seen).encode()


app = OpenTelemetryMiddleware(AccessLogMiddleware(ids, **log_options()))
