"""The ASGI application uvicorn serves in the fault tests (see ``tests.apps.faults``).

A request with an ``X-Note-Size: N`` header adds a field of N characters to its record
(``boundlog.add_fields``).  Its lifespan runs a ticker, an asyncio task that counts 5 ms sleeps, so that a test can
see whether the event loop kept running while requests waited for room in the queue.
At lifespan shutdown it closes the borrowed log and records the final counters: uvicorn
ends a graceful shutdown by re-raising SIGTERM on itself, so atexit never runs there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from boundlog import add_fields
from boundlog.asgi import AccessLogMiddleware

from .faults import LOG, STATS_PATH, answer, close_and_record, stats_document

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

TICK = 0.005
#: A request with this header makes the application add a field of that many characters.
NOTE_SIZE_HEADER = b"x-note-size"
_ticks = 0


async def application(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    for name, value in scope["headers"]:
        if name == NOTE_SIZE_HEADER:
            # A field of that many characters, new for each request (a log whose format
            # reads notes keeps it in the record).
            add_fields(big="%d " % id(scope) + "n" * int(value))
    await _respond(send, 200, answer())


async def _lifespan(receive: Receive, send: Send) -> None:
    ticker: asyncio.Task[None] | None = None
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            ticker = asyncio.ensure_future(_tick())
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
            await asyncio.get_running_loop().run_in_executor(None, close_and_record)
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _tick() -> None:
    global _ticks
    while True:
        await asyncio.sleep(TICK)
        _ticks += 1


async def _respond(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_logged = AccessLogMiddleware(application, log=LOG)


async def app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "http" and scope["path"] == STATS_PATH:
        await _respond(send, 200, stats_document(_ticks, scope["query_string"].decode()))
        return
    await _logged(scope, receive, send)
