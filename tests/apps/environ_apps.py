"""Applications that leave server variables for the log (tests/unit/capture/test_environ_extras.py).

* ``plain_wsgi``: sets ``environ["user"]``, gunicorn's way, for the logger class;
* ``wsgi``: the same wrapped in boundlog's WSGI middleware;
* ``starlette``: a Starlette view setting ``request.state.user`` and the scope key
  ``boundlog.tenant``, wrapped in boundlog's ASGI middleware.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from boundlog.asgi import AccessLogMiddleware
from boundlog.wsgi import AccessLogMiddleware as WsgiMiddleware

from .environ_lines import environ_log_options


def plain_wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    environ["user"] = "ada"
    start_response("200 OK", [("content-type", "text/plain"), ("content-length", "2")])
    return [b"ok"]


wsgi = WsgiMiddleware(plain_wsgi, **environ_log_options())


async def whoami(request: Request) -> PlainTextResponse:
    request.state.user = "ada"
    request.scope["boundlog.tenant"] = "acme"
    return PlainTextResponse("ok")


starlette = AccessLogMiddleware(
    Starlette(routes=[Route("/whoami", whoami)]), **environ_log_options()
)
