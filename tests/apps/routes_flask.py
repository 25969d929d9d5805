"""A Flask application with the hook of docs/wsgi.md ("Flask") that hands its
URL rule to boundlog, wrapped in boundlog's WSGI middleware (tests/unit/capture/test_routes.py)."""

from __future__ import annotations

from flask import Flask, request

from boundlog.wsgi import AccessLogMiddleware

from .route_lines import route_log_options

flask_app = Flask(__name__)


@flask_app.before_request
def boundlog_route() -> None:
    if request.url_rule is not None:
        request.environ["boundlog.route"] = request.url_rule.rule


@flask_app.get("/items/<int:item_id>")
def item(item_id: int) -> dict[str, int]:
    return {"item": item_id}


@flask_app.get("/boom")
def boom() -> None:
    raise RuntimeError("a view that raises, on purpose: Flask answers 500")


app = AccessLogMiddleware(flask_app, **route_log_options())
