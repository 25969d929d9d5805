"""The ASGI application uvicorn serves in tests/unit/capture/test_completed.py (routes: exchange_fields)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from boundlog.asgi import AccessLogMiddleware

from . import log_options
from .exchange_fields import CHUNK, STREAM_CHUNKS, ExchangeFieldsFormat

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def application(scope: Message, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/upload":
        length = 0
        more = True
        while more:
            message = await receive()
            length += len(message.get("body", b""))
            more = message.get("more_body", False)
        await _asgi_answer(send, [str(length).encode()])
    elif path == "/stream":
        await _asgi_answer(send, [CHUNK] * STREAM_CHUNKS)
    elif path == "/abandoned":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
        # The request has no body: what comes next is the client leaving.
        while (await receive())["type"] != "http.disconnect":
            pass


async def _asgi_answer(send: Send, chunks: list[bytes]) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for chunk in chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


app = AccessLogMiddleware(application, **{**log_options(), "format": ExchangeFieldsFormat()})
