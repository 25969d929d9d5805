"""The application tests/unit/metrics/test_otel.py serves under gunicorn, with boundlog's logger class
and ``BOUNDLOG_METRICS=opentelemetry``: ``/otel`` answers with what the SDK's in-memory
reader collects in this worker, as JSON, everything else with ``ok``.

The global MeterProvider is set here, in the worker that imports the application (no
``--preload``), as OpenTelemetry asks for forked servers: the log, built by gunicorn's
master before the fork, took the API's proxy meter, which follows this provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

_reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[_reader]))


def _collected() -> list[dict[str, Any]]:
    points = []
    data = _reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    points.append({"name": metric.name, "attributes": attributes,
                                   "value": point.value})  # fmt: skip
    return points


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ.get("PATH_INFO") == "/otel":
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(_collected()).encode()]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
