"""A Starlette application whose response leaves a background task running until the
application's lifespan shuts down, logged in JSON by boundlog's ASGI middleware.

The task adds a field once the shutdown begins (Starlette runs its shutdown handlers
before it says the shutdown is complete): its line, held until the application's call
returns, is whole only if the log waits for it before it closes.  granian stops its
worker right after the lifespan shutdown, without waiting for such work; served by
tests/integrations/test_integration_granian.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

import boundlog
from boundlog.asgi import AccessLogMiddleware

from . import log_options

shutting_down = asyncio.Event()


async def finish_at_shutdown() -> None:
    await shutting_down.wait()
    boundlog.add_fields(finished="at shutdown")


async def answer(request: Request) -> Response:
    return PlainTextResponse("answered\n", background=BackgroundTask(finish_at_shutdown))


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    yield
    shutting_down.set()


app = AccessLogMiddleware(
    Starlette(routes=[Route("/{path:path}", answer)], lifespan=lifespan),
    **{**log_options(), "format": "json"},
)
