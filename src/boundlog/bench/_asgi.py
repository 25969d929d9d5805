"""The ASGI benchmark application, served by uvicorn and granian.

``create_app`` is the factory the servers import (``--factory``); it reads the logger
to wrap the application with from the environment (see ``_loggers``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from boundlog.asgi import AccessLogMiddleware, ASGIApp, Message, Receive, Scope, Send

from . import _peers
from ._loggers import (
    BODY,
    Emit,
    LoggerConfig,
    combined_line,
    final_stats_writer,
    naive_emitter,
    queue_emitter,
    serve_stats,
)

_CONTENT_LENGTH = str(len(BODY)).encode()


class FixedBodyApp:
    """Answers every request with the same 1 KiB body; runs hooks at lifespan shutdown."""

    def __init__(self) -> None:
        self.on_shutdown: list[Callable[[], None]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", _CONTENT_LENGTH)],
        })  # fmt: skip
        await send({"type": "http.response.body", "body": BODY})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for hook in self.on_shutdown:
                    hook()
                await send({"type": "lifespan.shutdown.complete"})
                return


class CaptureOnlyMiddleware:
    """Capture status and body size the way boundlog's middleware does, then log nothing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # The last request's capture, where a logger would build its record from it.
        self.captured = (0, 0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        size = 0

        def capturing_send(message: Message) -> Awaitable[None]:
            # A plain function returning the server's awaitable, as boundlog's is.
            nonlocal status, size
            kind = message["type"]
            if kind == "http.response.body":
                size += len(message.get("body", b""))
            elif kind == "http.response.start":
                status = message["status"]
            return send(message)

        await self.app(scope, receive, capturing_send)
        self.captured = (status, size)


class LineLoggingMiddleware:
    """Hand-written logging middleware: capture status and size, then emit a line."""

    def __init__(self, app: ASGIApp, emit: Emit) -> None:
        self.app = app
        self.emit = emit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        size = 0

        async def logging_send(message: Message) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                size += len(message.get("body", b""))
            await send(message)

        await self.app(scope, receive, logging_send)
        headers = dict(scope["headers"])
        referer = headers.get(b"referer")
        user_agent = headers.get(b"user-agent")
        query = scope["query_string"].decode("latin-1")
        client = scope.get("client")
        self.emit(
            combined_line(
                client[0] if client else None,
                scope["method"],
                scope["path"] + ("?" + query if query else ""),
                "HTTP/" + scope["http_version"],
                status,
                size,
                referer.decode("latin-1") if referer else None,
                user_agent.decode("latin-1") if user_agent else None,
            )
        )


def create_app() -> ASGIApp:
    """The application wrapped with the logger the harness asked for."""
    config = LoggerConfig.from_environ()
    app = FixedBodyApp()
    if not config.logger.startswith("boundlog-"):
        serve_stats(None, config.stats_socket)
    if config.logger in ("none", "default"):
        # "default" is the server's own access log, switched on by its command line.
        return app
    if config.logger == "capture-only":
        return CaptureOnlyMiddleware(app)
    if config.logger == "naive":
        return LineLoggingMiddleware(app, naive_emitter())
    if config.logger == "stdlib-queue":
        emit, stop_listener = queue_emitter()
        app.on_shutdown.append(stop_listener)
        return LineLoggingMiddleware(app, emit)
    if config.logger in ("boundlog-drop", "boundlog-wait"):
        middleware = AccessLogMiddleware(
            app, sink=config.sink, policy=config.policy, max_queue=config.max_queue
        )
        app.on_shutdown.append(final_stats_writer(middleware.log.close, config.stats_file))
        serve_stats(middleware.log, config.stats_socket)
        return middleware
    if config.logger == "asgi-logger":
        return _peers.asgi_logger(app)
    if config.logger == "fapilog":
        return _peers.fapilog(app)
    if config.logger == "otel-batch":
        emit, shutdown = _peers.otel_emitter()
        app.on_shutdown.append(shutdown)
        return LineLoggingMiddleware(app, emit)
    raise ValueError(f"unknown logger {config.logger!r}")
