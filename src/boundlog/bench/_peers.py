"""The peers: loggers a uvicorn user would deploy instead of boundlog, as their docs say.

Each wraps the benchmark's fixed-body application under uvicorn and granian and writes
one line per request to the process's standard output, the sink every logger writes to.
They are imported only in the server process of their own cells (``importlib``, so that
``boundlog bench`` runs without them when it measures other loggers).

* ``asgi-logger``: ``asgi_logger.AccessLoggerMiddleware(app, format=...)``, its README's
  setup (uvicorn's own access log off, which ``--no-access-log`` does), with the
  ``format`` parameter the README shows set to gunicorn's combined format, the format
  the other loggers write.  Its default logger is ``logging.getLogger("access")`` with a
  ``StreamHandler`` on ``sys.stdout``: one write and flush per request, on the event loop.
* ``fapilog``: its README's FastAPI setup, ``FastAPIBuilder().with_preset("production")
  .build()`` as the lifespan.  That lifespan builds the async logger (the production
  preset: JSON lines on stdout, ``drop_on_full=False``) and adds ``RequestContextMiddleware``
  and ``LoggingMiddleware`` (one ``request_completed`` JSON line per request) to the
  application it is given.  Here it is given :class:`FapilogApp`, which keeps the
  middleware list the way Starlette does and serves the fixed body inside it, so that
  the cell measures fapilog and not FastAPI's routing.
* ``otel-batch``: OpenTelemetry's logs SDK as its documentation sets it up
  (``LoggerProvider``, ``BatchLogRecordProcessor`` with its default queue of 2,048
  records, a console exporter), the exporter writing each record as one JSON line to
  stdout; the hand-written middleware emits one record per request with the combined
  line as its body.  OpenTelemetry has no access log of its own.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
from collections.abc import Callable
from typing import Any

from boundlog.asgi import ASGIApp, Receive, Scope, Send

# The combined format (gunicorn's default access_log_format) in asgi-logger's atoms, with
# %(B)s for the size: asgi-logger 0.1.0's %(b)s looks the response header up without
# lowercasing its name and so always says "-".
COMBINED_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(B)s "%(f)s" "%(a)s"'

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[None]]


def asgi_logger(app: ASGIApp) -> ASGIApp:
    """asgi-logger's middleware around ``app``, writing combined lines to stdout."""
    middleware: ASGIApp = importlib.import_module("asgi_logger").AccessLoggerMiddleware(
        app, format=COMBINED_FORMAT
    )
    return middleware


class _State:
    """What Starlette's ``app.state`` is to fapilog: a place for its logger."""

    fapilog_logger: Any = None


class FapilogApp:
    """The fixed-body application dressed as far as fapilog's lifespan needs.

    fapilog's FastAPI lifespan stores its logger in ``app.state`` and adds its two
    middleware with ``app.add_middleware`` (each one outside the ones before, as in
    Starlette), resetting ``app.middleware_stack`` so that it is built anew; the stack is
    built on the first request.  Everything else of the request path is fapilog's.
    """

    def __init__(self, app: ASGIApp, lifespan: Lifespan) -> None:
        self.app = app
        self.lifespan = lifespan
        self.state = _State()
        self.user_middleware: list[Any] = []
        self.middleware_stack: ASGIApp | None = None
        self._lifespan_context: contextlib.AbstractAsyncContextManager[None] | None = None

    def add_middleware(self, cls: Callable[..., ASGIApp], *args: Any, **kwargs: Any) -> None:
        """Starlette's ``add_middleware``: the newest middleware is the outermost."""
        middleware = importlib.import_module("starlette.middleware").Middleware
        self.user_middleware.insert(0, middleware(cls, *args, **kwargs))

    def _build(self) -> ASGIApp:
        stack = self.app
        for cls, args, kwargs in reversed(self.user_middleware):
            stack = cls(stack, *args, **kwargs)
        return stack

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._serve_lifespan(receive, send)
            return
        if self.middleware_stack is None:
            self.middleware_stack = self._build()
        await self.middleware_stack(scope, receive, send)

    async def _serve_lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._lifespan_context = self.lifespan(self)
                await self._lifespan_context.__aenter__()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                # The lifespan drains fapilog's queue on its way out.
                if self._lifespan_context is not None:
                    await self._lifespan_context.__aexit__(None, None, None)
                await send({"type": "lifespan.shutdown.complete"})
                return


def fapilog(app: ASGIApp) -> ASGIApp:
    """fapilog's FastAPI request logging, production preset, around ``app``."""
    builder = importlib.import_module("fapilog.fastapi").FastAPIBuilder
    lifespan: Lifespan = builder().with_preset("production").build()
    return FapilogApp(app, lifespan)


def _one_json_line(record: Any) -> str:
    # The console exporter's own serialization, on one line instead of indented.
    line: str = record.to_json(indent=None) + "\n"
    return line


def otel_emitter() -> tuple[Callable[[str], None], Callable[[], None]]:
    """Emit each line as an OpenTelemetry log record; return the emitter and a shutdown."""
    sdk_logs = importlib.import_module("opentelemetry.sdk._logs")
    export = importlib.import_module("opentelemetry.sdk._logs.export")
    severity = importlib.import_module("opentelemetry._logs").SeverityNumber.INFO
    provider = sdk_logs.LoggerProvider()
    exporter = export.ConsoleLogRecordExporter(out=sys.stdout, formatter=_one_json_line)
    provider.add_log_record_processor(export.BatchLogRecordProcessor(exporter))
    logger = provider.get_logger("boundlog.bench.access")
    emit_record = logger.emit

    def emit(line: str) -> None:
        emit_record(body=line.rstrip("\n"), severity_number=severity, severity_text="INFO")

    def shutdown() -> None:
        # Exports what the queue holds; the SDK also registers this at exit.
        provider.shutdown()

    # The SDK logs a dropped record's warning through the standard logging module; keep
    # it off stdout, the sink.
    logging.getLogger("opentelemetry").propagate = False
    return emit, shutdown
