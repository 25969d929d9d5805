"""The WSGI application gunicorn serves in tests/unit/capture/test_completed.py (routes:
exchange_fields), and ``ExchangeFieldsLogger``, gunicorn's logger class writing the
same format."""

from __future__ import annotations

import socket
from collections.abc import Iterable, Iterator
from contextlib import suppress
from typing import Any

from boundlog.gunicorn import Logger
from boundlog.wsgi import AccessLogMiddleware

from . import log_options
from .exchange_fields import CHUNK, STREAM_CHUNKS, ExchangeFieldsFormat

# How many chunks the application offers after its client left: far more than the
# socket buffers hold, so that the server's writes fail long before the end.
_AFTER_LEAVING = 100_000


class ExchangeFieldsLogger(Logger):  # type: ignore[misc]
    def log_options(self, cfg: Any) -> dict[str, Any]:
        return {**super().log_options(cfg), "format": ExchangeFieldsFormat()}


def application(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    path = environ["PATH_INFO"]
    start_response("200 OK", [])
    if path == "/upload":
        return [str(len(environ["wsgi.input"].read())).encode()]
    if path == "/stream":
        return _streamed(STREAM_CHUNKS)
    if path == "/abandoned":
        return _abandoned(environ["gunicorn.socket"])
    return [b""]


def _streamed(chunks: int) -> Iterator[bytes]:
    for _ in range(chunks):
        yield CHUNK


def _abandoned(connection: socket.socket) -> Iterator[bytes]:
    yield CHUNK
    # The client reads that chunk and resets the connection: peeking returns when it
    # has, and the server's next writes fail.
    with suppress(OSError):
        connection.recv(1, socket.MSG_PEEK)
    yield from _streamed(_AFTER_LEAVING)


app = AccessLogMiddleware(application, **{**log_options(), "format": ExchangeFieldsFormat()})
