"""A Starlette application answering the shared routes (see ``tests.apps``), logged by
boundlog's ASGI middleware added with ``add_middleware``, as a FastAPI application does.

uvicorn serves it in tests/integrations/test_integration_starlette.py.  Starlette builds its middleware
stack on the first lifespan event, so the middleware, and the log it owns, are made in
the server's process and closed at the lifespan shutdown.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from boundlog.asgi import AccessLogMiddleware

from . import log_options, plan_response


async def answer(request: Request) -> Response:
    plan = plan_response(request.method, request.url.path, await request.body())
    if plan.streamed:
        return StreamingResponse(iter(plan.chunks), plan.status, dict(plan.headers))
    return Response(b"".join(plan.chunks), plan.status, dict(plan.headers))


app = Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "HEAD", "POST"])])
app.add_middleware(AccessLogMiddleware, **log_options())
