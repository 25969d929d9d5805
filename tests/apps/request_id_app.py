"""Applications that answer with the request ids they see (tests/unit/capture/test_request_id.py).

``asgi`` (Starlette, under uvicorn) and ``wsgi`` (plain WSGI, under gunicorn) answer
any path with a JSON object of the X-Request-ID and X-Correlation-ID request headers
they were given, and ``/own`` with an X-Request-ID response header of their own.  Both
are wrapped, when the server asks for them, in boundlog's middleware with a log they own, whose options come from the
environment (see ``tests.apps.log_options``) and whose request ids come from
``BOUNDLOG_REQUEST_ID``.  Their lines are JSON with the X-Correlation-ID request
header and both response headers added, to show which ids the record holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from boundlog import JsonFormat
from boundlog.asgi import AccessLogMiddleware as AsgiMiddleware
from boundlog.wsgi import AccessLogMiddleware as WsgiMiddleware

from . import log_options

OWN_ID = "chosen-by-the-application"
_NAMES = ("X-Request-ID", "X-Correlation-ID")


def _options() -> dict[str, Any]:
    line = JsonFormat(request_headers=["X-Correlation-ID"], response_headers=list(_NAMES))
    return {**log_options(), "format": line}


async def _seen(request: Request) -> JSONResponse:
    own = {"X-Request-ID": OWN_ID} if request.url.path == "/own" else None
    return JSONResponse({name: request.headers.get(name) for name in _NAMES}, headers=own)


def _wsgi_seen(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    seen = {name: environ.get("HTTP_" + name.upper().replace("-", "_")) for name in _NAMES}
    headers = [("Content-Type", "application/json")]
    if environ["PATH_INFO"] == "/own":
        headers.append(("X-Request-ID", OWN_ID))
    start_response("200 OK", headers)
    return [json.dumps(seen).encode()]


def __getattr__(name: str) -> Any:
    # Made when the server asks for one: each owns a log writing to the sink.
    if name == "asgi":
        return AsgiMiddleware(Starlette(routes=[Route("/{path:path}", _seen)]), **_options())
    if name == "wsgi":
        return WsgiMiddleware(_wsgi_seen, **_options())
    raise AttributeError(name)
