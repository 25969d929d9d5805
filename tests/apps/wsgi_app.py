"""The WSGI application gunicorn serves in tests/e2e/test_e2e_gunicorn.py (routes: ``tests.apps``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from boundlog.wsgi import AccessLogMiddleware

from . import log_options, plan_response


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    request_body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    plan = plan_response(environ["REQUEST_METHOD"], environ["PATH_INFO"], request_body)
    write = start_response(f"{plan.status} {plan.reason}", plan.headers)
    if not plan.streamed:
        return plan.chunks
    if not plan.chunks:
        return []
    # A streamed body goes out through both channels PEP 3333 offers, the legacy
    # write() callable for the first piece and a generator for the rest, so that the
    # middleware's byte count covers both.
    write(plan.chunks[0])
    return _pieces(plan.chunks[1:])


def _pieces(chunks: list[bytes]) -> Iterator[bytes]:
    yield from chunks


app = AccessLogMiddleware(application, **log_options())
