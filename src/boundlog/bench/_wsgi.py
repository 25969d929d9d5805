"""The WSGI benchmark application, served by gunicorn's gthread workers.

gunicorn imports ``create_app()`` in its worker process, after the fork, so each worker
builds its own logger from the environment.  boundlog is the exception: it runs as
gunicorn's logger class (see ``_gunicorn``), whose log the master opened and the worker
inherited with a writer thread of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from boundlog.wsgi import Environ, ExcInfo, Headers, StartResponse, WSGIApp

from . import _gunicorn
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

_HEADERS = [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))]


def fixed_body_app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
    """Answer every request with the same 1 KiB body."""
    start_response("200 OK", list(_HEADERS))
    return [BODY]


class CaptureOnlyMiddleware:
    """Capture status and body size the way boundlog's middleware does, then log nothing."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        # The last request's capture, where a logger would build its record from it.
        self.captured = ("", 0)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        status = ""

        def capturing_start_response(
            status_line: str, headers: Headers, exc_info: ExcInfo | None = None
        ) -> Callable[[bytes], object]:
            nonlocal status
            status = status_line
            return start_response(status_line, headers, exc_info)

        body = self.app(environ, capturing_start_response)
        # The benchmark's body is a list: its size is known up front and the list goes
        # to the server as it is, which is what boundlog's middleware does with one.
        self.captured = (status, sum(map(len, body)) if type(body) is list else 0)
        return body


class LineLoggingMiddleware:
    """Hand-written logging middleware: capture the status, join the body, emit a line."""

    def __init__(self, app: WSGIApp, emit: Emit) -> None:
        self.app = app
        self.emit = emit

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        status = "500"

        def capturing_start_response(
            status_line: str, headers: Headers, exc_info: ExcInfo | None = None
        ) -> Callable[[bytes], object]:
            nonlocal status
            status = status_line.split(" ", 1)[0]
            return start_response(status_line, headers, exc_info)

        body = b"".join(self.app(environ, capturing_start_response))
        query = environ.get("QUERY_STRING", "")
        self.emit(
            combined_line(
                environ.get("REMOTE_ADDR"),
                environ["REQUEST_METHOD"],
                environ.get("PATH_INFO", "") + ("?" + query if query else ""),
                environ.get("SERVER_PROTOCOL", "HTTP/1.0"),
                int(status),
                len(body),
                environ.get("HTTP_REFERER"),
                environ.get("HTTP_USER_AGENT"),
            )
        )
        return [body]


def create_app() -> WSGIApp:
    """The application wrapped with the logger the harness asked for."""
    config = LoggerConfig.from_environ()
    if not config.logger.startswith("boundlog-"):
        serve_stats(None, config.stats_socket)
    if config.logger in ("none", "default"):
        # "default" is gunicorn's own access log, switched on by --access-logfile.
        return fixed_body_app
    if config.logger == "capture-only":
        return CaptureOnlyMiddleware(fixed_body_app)
    if config.logger == "naive":
        return LineLoggingMiddleware(fixed_body_app, naive_emitter())
    if config.logger == "stdlib-queue":
        emit, _ = queue_emitter()  # its listener is stopped (and drained) at exit
        return LineLoggingMiddleware(fixed_body_app, emit)
    if config.logger in ("boundlog-drop", "boundlog-wait"):
        log = _gunicorn.opened
        if log is None:
            raise RuntimeError(
                "the boundlog loggers run as gunicorn's logger class: start gunicorn with "
                "--logger-class boundlog.bench._gunicorn.BenchLogger --access-logfile -"
            )
        final_stats_writer(log.close, config.stats_file)
        serve_stats(log, config.stats_socket)
        return fixed_body_app
    raise ValueError(f"unknown logger {config.logger!r}")
