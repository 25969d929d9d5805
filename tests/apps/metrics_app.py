"""The applications tests/unit/metrics/test_metrics.py serves: each answers ``/metrics`` with
prometheus_client's exposition, everything else with ``ok``.

``asgi_app`` (uvicorn, one process) logs through boundlog's ASGI middleware with
``metrics=True``, its sink named by ``BOUNDLOG_SINK``; ``wsgi_app`` (gunicorn
workers, with boundlog's logger class and ``BOUNDLOG_METRICS=1``) answers with the
multiprocess collector, which sums every worker's files in ``PROMETHEUS_MULTIPROC_DIR``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, make_asgi_app, multiprocess

from boundlog.asgi import AccessLogMiddleware

_OK = b"ok"


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": _OK})


_metrics = make_asgi_app()


async def _routes(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == "/metrics":
        await _metrics(scope, receive, send)
    else:
        await _ok(scope, receive, send)


def _asgi_app() -> Any:
    # The sink comes from BOUNDLOG_SINK, which only the uvicorn test sets (under
    # gunicorn's logger class --access-logfile names it, and BOUNDLOG_SINK is refused).
    if "BOUNDLOG_SINK" not in os.environ:
        return None
    return AccessLogMiddleware(_routes, metrics=True, skip_paths=["/metrics"], flush_interval=0.01)


asgi_app = _asgi_app()


def wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ.get("PATH_INFO") == "/metrics":
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        start_response("200 OK", [("Content-Type", "text/plain; version=0.0.4")])
        return [generate_latest(registry)]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [_OK]
