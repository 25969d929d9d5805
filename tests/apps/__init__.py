"""Applications that real servers run in the end-to-end tests.

The ASGI and WSGI applications answer the same routes, planned here, so that one list of
requests and expected log fields checks both servers.  Each application wraps itself in
boundlog's middleware with a log it owns, configured by the test through the environment
variables below, because a server imports the application in its own process.

Routes (``HEAD`` answers like ``GET`` with the same headers and no body):

* ``/bytes/N``: 200 with a body of N bytes;
* ``/echo``: 200 with the request body as the response body;
* ``/stream/CHUNKS/SIZE``: 200 streamed as CHUNKS separate pieces of SIZE bytes;
* ``/status/CODE``: CODE, with no body for 204 and 304;
* ``/raise``: the application raises before starting a response;
* ``/healthz``: 200 ``ok``, a health check the log skips (it would log a failing one);
* anything else: 404.
"""

from __future__ import annotations

import json
import os
from http import HTTPStatus
from typing import Any, NamedTuple

SINK_VARIABLE = "TESTAPP_SINK"
FORMAT_VARIABLE = "TESTAPP_FORMAT"
FLUSH_INTERVAL_VARIABLE = "TESTAPP_FLUSH_INTERVAL"
# Further AccessLog options, as a JSON object (lists for the list options).
OPTIONS_VARIABLE = "TESTAPP_OPTIONS"
# The format name that gives the logs tests.apps.named_fields' format object.
NAMED_FIELDS = "named-fields"

NOT_FOUND_BODY = b"not found\n"
HEALTH_CHECK = "/healthz"
TRUSTED_PROXY = "127.0.0.1"
_BODILESS_STATUSES = (204, 304)


class Plan(NamedTuple):
    """What an application sends back for one request."""

    status: int
    headers: list[tuple[str, str]]
    chunks: list[bytes]
    streamed: bool

    @property
    def reason(self) -> str:
        return HTTPStatus(self.status).phrase


def log_options() -> dict[str, Any]:
    """The AccessLog options the test chose for this server process.

    Every server skips its health check and trusts the tests' loopback address as a
    proxy; queries are redacted by default.
    """
    log_format: object = os.environ.get(FORMAT_VARIABLE, "combined")
    if log_format == NAMED_FIELDS:
        from .named_fields import NamedFieldsFormat

        log_format = NamedFieldsFormat()
    return {
        "sink": os.environ[SINK_VARIABLE],
        "format": log_format,
        "flush_interval": float(os.environ.get(FLUSH_INTERVAL_VARIABLE, "0.01")),
        "skip_paths": [HEALTH_CHECK],
        "trusted_proxies": [TRUSTED_PROXY],
        **json.loads(os.environ.get(OPTIONS_VARIABLE, "{}")),
    }


def status_body(status: int) -> bytes:
    """The body ``/status/CODE`` sends for a status that allows one."""
    return b"" if status in _BODILESS_STATUSES else b"status %d\n" % status


def plan_response(method: str, path: str, request_body: bytes) -> Plan:
    """Decide the response to ``method path``; raise for ``/raise``."""
    parts = path.strip("/").split("/")
    if parts == ["raise"]:
        raise RuntimeError("the test application raises before responding, on purpose")
    if parts[0] == "bytes" and len(parts) == 2:
        plan = _whole(200, b"x" * int(parts[1]))
    elif parts == ["healthz"]:
        plan = _whole(200, b"ok\n")
    elif parts == ["echo"]:
        plan = _whole(200, request_body)
    elif parts[0] == "stream" and len(parts) == 3:
        chunk = b"s" * int(parts[2])
        plan = Plan(200, [("content-type", "text/plain")], [chunk] * int(parts[1]), True)
    elif parts[0] == "status" and len(parts) == 2:
        status = int(parts[1])
        if status in _BODILESS_STATUSES:
            plan = Plan(status, [], [], False)
        else:
            plan = _whole(status, status_body(status))
    else:
        plan = _whole(404, NOT_FOUND_BODY)
    if method == "HEAD":
        # Same headers as GET, Content-Length included (RFC 9110 9.3.2), but no body.
        return plan._replace(chunks=[])
    return plan


def _whole(status: int, body: bytes) -> Plan:
    headers = [("content-type", "text/plain"), ("content-length", str(len(body)))]
    return Plan(status, headers, [body], False)
