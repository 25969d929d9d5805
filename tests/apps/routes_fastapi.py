"""A FastAPI application whose records carry their route template (tests/unit/capture/test_routes.py),
boundlog's middleware added as docs/fastapi.md says: inside Starlette's stack,
between its error middleware and the router.

* ``/items/{item_id}`` (an int: ``/items/abc`` is FastAPI's 422), GET only (a POST is
  its 405, with the route it matched partly);
* ``/api/users/{user_id}``, from an ``APIRouter`` included with a prefix;
* ``/sub/things/{name}``, from a FastAPI application mounted at ``/sub``;
* ``/legacy/pages/{number}``, from a Starlette application mounted at ``/legacy``;
* ``/boom``, which raises: the record still has its route.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from boundlog.asgi import AccessLogMiddleware

from .route_lines import route_log_options

app = FastAPI()
app.add_middleware(AccessLogMiddleware, **route_log_options())


@app.get("/items/{item_id}")
async def item(item_id: int) -> dict[str, int]:
    return {"item": item_id}


@app.get("/boom")
async def boom() -> None:
    raise RuntimeError("an endpoint that raises, on purpose")


users = APIRouter(prefix="/api")


@users.get("/users/{user_id}")
def user(user_id: int) -> dict[str, int]:
    return {"user": user_id}


app.include_router(users)

sub = FastAPI()


@sub.get("/things/{name}")
async def thing(name: str) -> dict[str, str]:
    return {"thing": name}


app.mount("/sub", sub)


async def page(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"page {request.path_params['number']}\n")


app.mount("/legacy", Starlette(routes=[Route("/pages/{number:int}", page)]))
