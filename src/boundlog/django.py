"""Django: the URL pattern each request matched, for the records of boundlog's logs.

Add the middleware to ``MIDDLEWARE`` in settings.py::

    MIDDLEWARE = ["boundlog.django.RouteMiddleware", ...]

It leaves the matched pattern (``request.resolver_match.route``: ``"items/<int:item_id>"``,
as Django writes it, without a leading slash) where boundlog's WSGI middleware, its
ASGI middleware and its gunicorn logger class read a record's ``route``
(``_routes.ROUTE_KEY``): the server's own environ under WSGI (``request.environ``), the
server's own scope under ASGI (``request.scope``).  A request that matched no pattern
(a 404) leaves none, and its route is unknown.  It costs a method call and a dict
store per request, whatever the log reads, and nothing of Django's own handling
changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils.deprecation import MiddlewareMixin  # type: ignore[import-untyped]

from .capture._routes import ROUTE_KEY


class RouteMiddleware(MiddlewareMixin):  # type: ignore[misc]
    """Leave the URL pattern a request matched for boundlog (a sync and async
    middleware: Django's ``MiddlewareMixin`` runs it either way)."""

    def process_view(
        self,
        request: Any,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> None:
        # Django calls this once the URL is resolved, before the view: a view that
        # raises still has its pattern logged.  Django's WSGIRequest keeps the server's
        # environ, its ASGIRequest the server's scope: the very mappings boundlog holds.
        server = request.scope if hasattr(request, "scope") else request.environ
        server[ROUTE_KEY] = request.resolver_match.route
