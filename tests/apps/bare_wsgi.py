"""The shared routes (see ``tests.apps``) as a WSGI application that does no logging.

Servers whose own access log is replaced by a boundlog integration serve it:
tests/integrations/test_integration_gunicorn.py runs it under ``boundlog.gunicorn.Logger``.
One route more: ``/raise-in-body`` starts a 200 response whose body raises before its
first piece (the server then answers 500: no header was sent yet).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from . import plan_response


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ["PATH_INFO"] == "/raise-in-body":
        start_response("200 OK", [("content-type", "text/plain")])
        return _raising_body()
    request_body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    plan = plan_response(environ["REQUEST_METHOD"], environ["PATH_INFO"], request_body)
    start_response(f"{plan.status} {plan.reason}", plan.headers)
    return plan.chunks


def _raising_body() -> Iterator[bytes]:
    raise RuntimeError("the test application's body raises before its first piece, on purpose")
    yield b""  # a generator: it raises when the server asks for the first piece
