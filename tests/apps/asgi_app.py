"""The ASGI application uvicorn serves in tests/e2e/test_e2e_uvicorn.py.

Besides the shared routes (see ``tests.apps``) it answers
``/stream-until-disconnect/CHUNKS/SIZE``: pieces of SIZE bytes, one every ``TICK``
seconds, stopping early, without finishing the response, once the client has gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from boundlog.asgi import AccessLogMiddleware

from . import Plan, log_options, plan_response

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

TICK = 0.02


async def application(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    request_body = await _read_body(receive)
    path = scope["path"]
    if path.startswith("/stream-until-disconnect/"):
        _, _, chunks, size = path.split("/")
        await _stream_until_disconnect(receive, send, int(chunks), int(size))
        return
    plan = plan_response(scope["method"], path, request_body)
    await _send_plan(plan, send)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


async def _send_plan(plan: Plan, send: Send) -> None:
    await send(_start(plan.status, plan.headers))
    if plan.streamed:
        for chunk in plan.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    else:
        await send({"type": "http.response.body", "body": b"".join(plan.chunks)})


async def _stream_until_disconnect(receive: Receive, send: Send, chunks: int, size: int) -> None:
    disconnected = asyncio.ensure_future(_wait_for_disconnect(receive))
    await send(_start(200, [("content-type", "text/plain")]))
    for _ in range(chunks):
        await send({"type": "http.response.body", "body": b"d" * size, "more_body": True})
        done, _ = await asyncio.wait({disconnected}, timeout=TICK)
        if done:
            return
    disconnected.cancel()
    await send({"type": "http.response.body", "body": b""})


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _start(status: int, headers: list[tuple[str, str]]) -> Message:
    return {
        "type": "http.response.start",
        "status": status,
        "headers": [(name.encode(), value.encode()) for name, value in headers],
    }


app = AccessLogMiddleware(application, **log_options())
