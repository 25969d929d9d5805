"""A Starlette application wrapped in boundlog's middleware from outside, whose records
carry their route template (tests/unit/capture/test_routes.py): a plain ``Route`` with a
convertor, routes under a ``Mount`` (one with a parameter), a mounted application that
routes no further, and 404s."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from boundlog.asgi import AccessLogMiddleware

from .route_lines import route_log_options


async def echo(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"{request.path_params}\n")


async def files(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"a file\n"})


app = AccessLogMiddleware(
    Starlette(
        routes=[
            Route("/users/{user_id:int}", echo),
            Mount("/v1", routes=[Route("/orders/{order_id}", echo)]),
            Mount("/tenants/{tenant}", routes=[Route("/reports/{year:int}", echo)]),
            Mount("/files", app=files),
        ]
    ),
    **route_log_options(),
)
