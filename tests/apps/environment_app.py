"""An ASGI app whose middleware is built without options: the environment configures it.

Served by uvicorn in tests/unit/engine/test_environment.py with ``BOUNDLOG_SINK`` and
``BOUNDLOG_FORMAT`` set, as a container would set them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from boundlog.asgi import AccessLogMiddleware

Message = MutableMapping[str, Any]


async def hello(
    scope: Message,
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


app = AccessLogMiddleware(hello)
