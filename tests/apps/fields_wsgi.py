"""A WSGI application that adds fields to its records with ``boundlog.add_fields``
(tests/e2e/test_e2e_fields.py, under gunicorn): ``/view/{rid}`` adds ``rid`` from the view
and ``chunks`` from its body's generator, which the server iterates after the view
returned; ``/plain`` adds nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from boundlog import add_fields
from boundlog.wsgi import AccessLogMiddleware

from . import log_options


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path = environ["PATH_INFO"]
    start_response("200 OK", [("Content-Type", "text/plain")])
    if not path.startswith("/view/"):
        return [b"plain\n"]
    rid = path.removeprefix("/view/")
    add_fields(rid=rid, worker_pid=None)
    return _body(rid)


def _body(rid: str) -> Iterator[bytes]:
    yield rid.encode()
    add_fields(chunks=2)
    yield b"\n"


app = AccessLogMiddleware(application, **log_options())
