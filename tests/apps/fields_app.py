"""A FastAPI application that adds fields to its records with ``boundlog.add_fields``
(tests/e2e/test_e2e_fields.py), from every place a request's code runs:

* ``TenantMiddleware``, a Starlette ``BaseHTTPMiddleware`` (its downstream application
  runs in a task of its own): ``tenant``, the request's ``X-Tenant`` header;
* ``/async/{rid}``, an async endpoint: ``rid`` and ``kind="async"``, then it yields to
  the other requests before it answers, and adds ``status`` (a built-in JSON key,
  written ``app.status``);
* ``/sync/{rid}``, a sync endpoint Starlette runs in its thread pool: ``rid`` and
  ``kind="sync"``;
* both add ``late`` from a background task, which runs after the response has ended,
  still in the application's call: the record waits for it;
* ``/plain``: adds nothing.

Its log options come from the environment (see ``tests.apps.log_options``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastapi import BackgroundTasks, FastAPI, Request, Response
from starlette.middleware.base import BaseHTTPMiddleware

from boundlog import add_fields
from boundlog.asgi import AccessLogMiddleware

from . import log_options


class TenantMiddleware(BaseHTTPMiddleware):
    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        add_fields(tenant=request.headers.get("x-tenant"))
        return await call_next(request)


app = FastAPI()
# Starlette wraps the middleware added last outermost: boundlog's sees every request.
app.add_middleware(TenantMiddleware)
app.add_middleware(AccessLogMiddleware, **log_options())


@app.get("/async/{rid}")
async def async_endpoint(rid: str, background: BackgroundTasks) -> dict[str, str]:
    add_fields(rid=rid, kind="async")
    # Other requests run meanwhile, on the same event loop.
    await asyncio.sleep(0)
    add_fields(status="from the app")
    background.add_task(add_fields, late=rid)
    return {"rid": rid}


@app.get("/sync/{rid}")
def sync_endpoint(rid: str, background: BackgroundTasks) -> dict[str, str]:
    add_fields(rid=rid, kind="sync")
    background.add_task(add_fields, late=rid)
    return {"rid": rid}


@app.get("/plain")
async def plain() -> dict[str, str]:
    return {}
