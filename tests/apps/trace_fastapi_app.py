"""tests/apps/trace_app.py's ``traced`` application in FastAPI: ``/items/{item_id}``
answers with the ids of the OpenTelemetry span current in its request, behind
OpenTelemetry's ASGI middleware, boundlog's inside it (tests/unit/capture/test_trace.py)."""

from __future__ import annotations

from fastapi import FastAPI
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

from boundlog.asgi import AccessLogMiddleware

from . import log_options
from .trace_app import ids

api = FastAPI()
api.add_api_route("/items/{item_id}", ids)
traced = OpenTelemetryMiddleware(AccessLogMiddleware(api, **log_options()))
