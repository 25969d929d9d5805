"""The WSGI application gunicorn serves in the fault tests (see ``tests.apps.faults``).

A gunicorn worker leaves through ``sys.exit``, so an atexit handler closes the borrowed
log and records the final counters of the process it runs in.  It is registered after
boundlog's own exit backstop and therefore runs before it.  Under ``--preload`` the
master imports this module, so the master records its counters at exit too.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Iterable
from typing import Any

from boundlog.wsgi import AccessLogMiddleware

from .faults import LOG, STATS_PATH, answer, close_and_record, stats_document

atexit.register(close_and_record)


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    return _respond(start_response, answer())


def _respond(start_response: Callable[..., Any], body: bytes) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


_logged = AccessLogMiddleware(application, log=LOG)


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ["PATH_INFO"] == STATS_PATH:
        return _respond(start_response, stats_document(query=environ.get("QUERY_STRING", "")))
    return _logged(environ, start_response)
