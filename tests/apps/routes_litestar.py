"""A Litestar application wrapped in boundlog's middleware, whose records carry their
route template (tests/unit/capture/test_routes.py): a handler's path with a typed parameter, one
under a ``Router`` with a prefix, and a 404."""

from __future__ import annotations

from litestar import Litestar, Router, get

from boundlog.asgi import AccessLogMiddleware

from .route_lines import route_log_options


@get("/items/{item_id:int}")
async def item(item_id: int) -> dict[str, int]:
    return {"item": item_id}


@get("/users/{name:str}")
async def user(name: str) -> dict[str, str]:
    return {"user": name}


app = AccessLogMiddleware(
    Litestar([item, Router(path="/api", route_handlers=[user])]), **route_log_options()
)
