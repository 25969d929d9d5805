"""The OTLP sink end to end: FastAPI under uvicorn, behind OpenTelemetry's ASGI
middleware, logging to a collector on loopback (tests/_collectors.py) that decodes each
request with the official opentelemetry-proto messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from _collectors import otlp_collector
from _ports import LOOPBACK
from _servers import (
    SINK_VARIABLE,
    UVICORN_CLEAN_EXITS,
    http_client,
    running_server,
    server_environment,
    stop_gracefully,
    uvicorn_app_command,
)

REQUESTS = 30


@pytest.mark.needs("fastapi")
def test_every_request_arrives_once_with_the_trace_the_application_sees(tmp_path: Path) -> None:
    """Each request carries its own traceparent; the collector gets one LogRecord for
    each, whose trace id is the request's and whose span id is the server span's (a
    child of the caller's), with the route FastAPI matched; SIGTERM drains the rest."""
    sent = {}
    with otlp_collector() as collector:
        environment = server_environment(tmp_path / "unused.log", "combined", "0.05")
        environment[SINK_VARIABLE] = f"otlp+http://{LOOPBACK}:{collector.port}"
        environment["OTEL_SERVICE_NAME"] = "shop"
        command = lambda port: uvicorn_app_command(port, "tests.apps.trace_fastapi_app:traced")  # noqa: E731
        with running_server(command, environment, tmp_path / "uvicorn.out") as server:
            with http_client(server.port) as client:
                for number in range(REQUESTS):
                    trace_id = "%032x" % (number + 1)
                    parent = "%016x" % (number + 1)
                    answer = client.get(
                        f"/items/{number}", headers={"traceparent": f"00-{trace_id}-{parent}-01"}
                    ).json()
                    assert answer["trace_id"] == trace_id
                    sent[f"/items/{number}"] = (trace_id, parent)
            stop_gracefully(server, UVICORN_CLEAN_EXITS)
        output = server.output()
    assert "boundlog:" not in output, output
    assert sorted(collector.paths) == sorted(sent)
    assert set(collector.service_names) == {"shop"}
    for log in collector.records:
        attributes = {kv.key: kv.value for kv in log.attributes}
        trace_id, parent = sent[attributes["url.path"].string_value]
        assert log.trace_id.hex() == trace_id
        assert log.span_id.hex() not in (parent, "")
        assert attributes["http.route"].string_value == "/items/{item_id}"
        assert attributes["http.response.status_code"].int_value == 200
        assert (log.severity_number, log.severity_text) == (9, "INFO")
