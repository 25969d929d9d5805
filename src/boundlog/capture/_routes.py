"""The route template an application matched (``/items/{item_id}``), for a record's extras.

Frameworks route inside the application, after boundlog's middleware has handed the
request on, so the template is read when the response ends, from what the framework
left in the very mapping the middleware holds:

* a key of boundlog's own, ``ROUTE_KEY``, which an integration that has no other way
  sets (``boundlog.django.RouteMiddleware``, Flask's hook in docs/wsgi.md): it
  is read first, in a WSGI environ and an ASGI scope alike;
* Starlette and FastAPI: their routers set ``scope["route"]`` to the matched route
  object and update the scope they were given in place (``scope.update(child_scope)``),
  so the middleware's scope is theirs as long as nothing between the two passes on a
  copy: Starlette's own middleware, ``BaseHTTPMiddleware`` included, and its mounts
  pass the same dict on;
* Litestar: its router sets ``scope["path_template"]``, the full template, router
  prefixes included;
* aiohttp: the request's ``match_info`` names the route matched, whose resource's
  ``canonical`` is the template, a sub-application's prefix included (a static route's
  is its prefix); a 404 or 405 matched a system route, which has no resource.  The
  logger reads it from the request aiohttp logs, whose items hold ``ROUTE_KEY`` too.

Only lookups here: it runs on the request path of every request whose log reads the
route, and keeps no reference to the route object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

#: The environ (WSGI) or scope (ASGI) key an application may set to the route template
#: it matched; boundlog reads it before anything a framework leaves.
ROUTE_KEY: Final = "boundlog.route"


def environ_route(environ: Mapping[str, Any]) -> str | None:
    """The route template a WSGI application left in its environ, or None."""
    route = environ.get(ROUTE_KEY)
    return route if type(route) is str else None


def asgi_route(scope: Mapping[str, Any]) -> str | None:
    """The route template the application matched, from its scope; None when unknown
    (no route matched: a 404)."""
    route = scope.get(ROUTE_KEY)
    if type(route) is str:
        return route
    matched = scope.get("route")
    if matched is not None:
        return _starlette_template(scope, matched)
    template = scope.get("path_template")
    return template if type(template) is str and template else None


def _starlette_template(scope: Mapping[str, Any], route: Any) -> str | None:
    # path_format, not path: "/items/{item_id}" where Starlette's path reads
    # "/items/{item_id:int}".  A Host, or any object some other framework keeps under
    # "route", has none.
    template = getattr(route, "path_format", None)
    if type(template) is not str:
        return None
    # A route under a Mount is relative to it.  Each Mount matched adds what it matched
    # to root_path, and the first one keeps the root_path it found (the server's,
    # --root-path) in app_root_path: what lies between is the mounts' prefix.  It is the
    # path as sent, so a Mount with parameters ("/users/{user_id}") shows their values;
    # Starlette keeps no record of the mounts it passed through.
    app_root = scope.get("app_root_path")
    if app_root is None:
        return template
    prefix: str = scope.get("root_path", "")[len(app_root) :]
    mounted = getattr(route, "routes", None)
    if mounted is not None:
        # The route matched last is a Mount itself.  With routes of its own, its router
        # matched none of them (a 404): unknown.  Without (a mounted application that
        # routes no further, StaticFiles say), the prefix ends with what the Mount
        # matched: its own path, when that has no parameters; else as sent.
        if mounted:
            return None
        own = getattr(route, "path", None)
        if type(own) is str and prefix.endswith(own):
            return prefix[: len(prefix) - len(own)] + template
        return prefix + "/{path}"
    return prefix + template


def aiohttp_route(request: Mapping[Any, Any]) -> str | None:
    """The route template an aiohttp request matched, or None (no route matched: a 404
    or a 405; a low-level ``web.Server``'s requests have no ``match_info``)."""
    route = request.get(ROUTE_KEY)
    if type(route) is str:
        return route
    resource = getattr(
        getattr(getattr(request, "match_info", None), "route", None), "resource", None
    )
    template = getattr(resource, "canonical", None)
    return template if type(template) is str else None
