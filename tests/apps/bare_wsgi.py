"""The shared routes (see ``tests.apps``) as a WSGI application that does no logging.

Servers whose own access log is replaced by a boundlog integration serve it:
tests/integrations/test_integration_gunicorn.py runs it under ``boundlog.gunicorn.Logger``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import plan_response


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    request_body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    plan = plan_response(environ["REQUEST_METHOD"], environ["PATH_INFO"], request_body)
    start_response(f"{plan.status} {plan.reason}", plan.headers)
    return plan.chunks
