"""Trace context in lines (``_trace``): the ids of the request's OpenTelemetry span, else
of its W3C ``traceparent`` header, under a real uvicorn behind OpenTelemetry's ASGI
middleware."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _records import make_record
from _servers import (
    UVICORN_CLEAN_EXITS,
    gunicorn_app_command,
    http_client,
    read_log_lines,
    running_server,
    server_environment,
    stop_gracefully,
    uvicorn_app_command,
)
from boundlog import Extras, JsonFormat
from boundlog.capture._trace import trace_ids

# The example of the W3C Trace Context recommendation, section 3.2.
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.mark.parametrize(
    "value",
    [
        TRACEPARENT,
        TRACEPARENT.encode(),
        f"00-{TRACE_ID}-{PARENT_ID}-00",  # not sampled: the ids are still the request's
        f"cc-{TRACE_ID}-{PARENT_ID}-01",  # a later version, as it is
        f"cc-{TRACE_ID}-{PARENT_ID}-01-what-comes-next",  # a later version, longer
    ],
)
def test_a_valid_traceparent_gives_its_trace_and_parent_ids(value: str | bytes) -> None:
    assert trace_ids(None, value) == (TRACE_ID, PARENT_ID)


@pytest.mark.parametrize(
    "value",
    [
        "",
        f"ff-{TRACE_ID}-{PARENT_ID}-01",  # the version that is never valid
        f"00-{TRACE_ID}-{PARENT_ID}-01-x",  # version 00 has nothing after its flags
        f"cc-{TRACE_ID}-{PARENT_ID}-01x",  # what follows a later version starts with -
        f"00-{TRACE_ID.upper()}-{PARENT_ID}-01",  # hex is lower case
        f"00-{'0' * 32}-{PARENT_ID}-01",  # all-zero ids are invalid
        f"00-{TRACE_ID}-{'0' * 16}-01",
        f"00-{TRACE_ID[:-1]}-{PARENT_ID}-01",
        f"00_{TRACE_ID}-{PARENT_ID}-01",
        f"0-{TRACE_ID}-{PARENT_ID}-01",
        f"00-{TRACE_ID}-{PARENT_ID}-1",
        f"00-{TRACE_ID}-{PARENT_ID}-01\n",
        f"00-{TRACE_ID}-{PARENT_ID}-01, 00-{TRACE_ID}-{PARENT_ID}-01",  # two fields, joined
        f"00-{TRACE_ID}-{PARENT_ID}-0\u0131",
    ],
)
def test_an_invalid_traceparent_gives_no_ids(value: str) -> None:
    assert trace_ids(None, value) is None


def test_the_spans_ids_come_before_the_header() -> None:
    assert trace_ids((1, 2), TRACEPARENT) == ("0" * 31 + "1", "0" * 15 + "2")
    assert trace_ids(((1 << 128) - 1, (1 << 64) - 1), None) == ("f" * 32, "f" * 16)


@pytest.mark.parametrize(
    "trace", [(0, 1), (1, 0), (1 << 128, 1), (1, 1 << 64), (-1, 1), (True, 1), (1.0, 1), (1,)]
)
def test_a_span_without_valid_ids_gives_way_to_the_header(trace: object) -> None:
    assert trace_ids(trace, TRACEPARENT) == (TRACE_ID, PARENT_ID)
    assert trace_ids(trace, None) is None


def test_json_lines_show_the_route_and_the_ids_of_either_source() -> None:
    """In the default JSON line, after the built-in header fields (C and Python alike:
    tests/speedups/test_speedups_json.py)."""
    fmt = JsonFormat(request_headers=["Accept"])
    spanned = make_record(extras=Extras(route="/ids/{n}", trace=(7, 8)))
    headed = make_record(request_headers=[(b"traceparent", TRACEPARENT.encode())])
    environ = make_record(request_headers={"HTTP_TRACEPARENT": TRACEPARENT})
    lines = [json.loads(line) for line in fmt.format_batch([spanned, headed, environ]).splitlines()]
    keys = list(lines[0])
    assert keys[keys.index("request_id") :] == [
        "request_id",
        "route",
        "trace_id",
        "span_id",
        "completed",
        "accept",
    ]
    assert [(line["route"], line["trace_id"], line["span_id"]) for line in lines] == [
        ("/ids/{n}", "%032x" % 7, "%016x" % 8),
        (None, TRACE_ID, PARENT_ID),
        (None, TRACE_ID, PARENT_ID),
    ]


@pytest.mark.parametrize("core", ["c", "python"])
def test_lines_show_the_ids_the_application_sees_under_uvicorn(tmp_path: Path, core: str) -> None:
    """Behind OpenTelemetry's ASGI middleware the line shows the server span's ids, the
    ones the application sees: the header's trace id when the client sent one, a new one
    otherwise.  Without it, the header's ids."""
    log_path = tmp_path / "access.log"
    environment = server_environment(log_path, "json", "0.01")
    if core == "python":
        environment["BOUNDLOG_NO_EXTENSIONS"] = "1"
    seen = []
    for app in ("traced", "untraced"):
        log_path.unlink(missing_ok=True)
        command = lambda port: uvicorn_app_command(port, f"tests.apps.trace_app:{app}")  # noqa: B023, E731
        with running_server(command, environment, tmp_path / "uvicorn.out") as server:
            with http_client(server.port) as client:
                answers = [
                    client.get("/ids", headers={"traceparent": TRACEPARENT}).json(),
                    client.get("/ids").json(),
                ]
            stop_gracefully(server, UVICORN_CLEAN_EXITS)
        lines = [json.loads(line) for line in read_log_lines(log_path)]
        seen.append(([(line["trace_id"], line["span_id"]) for line in lines], answers))
    (traced_lines, traced_answers), (untraced_lines, untraced_answers) = seen
    assert traced_lines == [(answer["trace_id"], answer["span_id"]) for answer in traced_answers]
    assert traced_answers[0]["trace_id"] == TRACE_ID
    assert traced_answers[0]["span_id"] not in (PARENT_ID, None)
    assert traced_answers[1]["trace_id"] not in (TRACE_ID, None)
    assert untraced_answers == [{"trace_id": None, "span_id": None}] * 2
    assert untraced_lines == [(TRACE_ID, PARENT_ID), (None, None)]


@pytest.mark.needs("fastapi")
def test_a_fastapi_line_shows_its_route_and_its_span(tmp_path: Path) -> None:
    """FastAPI behind OpenTelemetry's ASGI middleware: the JSON line shows the route the
    router matched and the trace the endpoint sees.  The span is the one current when
    the response goes out: FastAPI (0.165) runs its endpoint in a span of its own, a
    child of that one, so the endpoint's span id is not the line's."""
    log_path = tmp_path / "access.log"
    environment = server_environment(log_path, "json", "0.01")
    command = lambda port: uvicorn_app_command(port, "tests.apps.trace_fastapi_app:traced")  # noqa: E731
    with running_server(command, environment, tmp_path / "uvicorn.out") as server:
        with http_client(server.port) as client:
            answer = client.get("/items/7", headers={"traceparent": TRACEPARENT}).json()
        stop_gracefully(server, UVICORN_CLEAN_EXITS)
    [line] = [json.loads(line) for line in read_log_lines(log_path)]
    assert line["route"] == "/items/{item_id}"
    assert line["trace_id"] == answer["trace_id"] == TRACE_ID
    assert line["span_id"] not in (PARENT_ID, None)
    assert line["completed"] is True


@pytest.mark.parametrize("core", ["c", "python"])
def test_wsgi_lines_show_the_span_the_application_sees_under_gunicorn(
    tmp_path: Path, core: str
) -> None:
    """Behind OpenTelemetry's WSGI middleware the span is read as the application is
    called: the line shows the ids the application sees, though the server closes the
    body (and the record is made) after that middleware's context has ended."""
    log_path = tmp_path / "access.log"
    environment = server_environment(log_path, "json", "0.01")
    if core == "python":
        environment["BOUNDLOG_NO_EXTENSIONS"] = "1"
    command = lambda port: gunicorn_app_command(port, "tests.apps.trace_wsgi_app:app")  # noqa: E731
    with running_server(command, environment, tmp_path / "gunicorn.out") as server:
        with http_client(server.port) as client:
            answers = [
                client.get("/ids", headers={"traceparent": TRACEPARENT}).json(),
                client.get("/ids").json(),
            ]
        stop_gracefully(server)
    lines = [json.loads(line) for line in read_log_lines(log_path)]
    assert [(line["trace_id"], line["span_id"]) for line in lines] == [
        (answer["trace_id"], answer["span_id"]) for answer in answers
    ]
    assert answers[0]["trace_id"] == TRACE_ID
    assert answers[0]["span_id"] != PARENT_ID
    assert answers[1]["trace_id"] not in (TRACE_ID, None)
