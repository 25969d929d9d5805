"""An ASGI application written as a ``@types.coroutine`` generator, which uvicorn serves
in tests/speedups/test_speedups_asgi.py: ``await`` accepts it as a coroutine (its code has
CO_ITERABLE_COROUTINE), and so must the middleware on either core.  It answers every
HTTP request with ``generated``."""

from __future__ import annotations

import types
from collections.abc import Generator
from typing import Any

from boundlog.asgi import AccessLogMiddleware

from . import log_options


@types.coroutine
def application(scope: Any, receive: Any, send: Any) -> Generator[Any, Any, None]:
    if scope["type"] == "lifespan":
        while True:
            message = yield from receive().__await__()
            kind = message["type"].removeprefix("lifespan.")
            yield from send({"type": f"lifespan.{kind}.complete"}).__await__()
            if kind == "shutdown":
                return
    start = {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"9")]}
    yield from send(start).__await__()
    yield from send({"type": "http.response.body", "body": b"generated"}).__await__()


app = AccessLogMiddleware(application, **log_options())
