"""The standard library's ThreadingHTTPServer serving the fixed body.

Run as ``python -m boundlog.bench._stdlib_server --port PORT``; the logger comes from the
environment (see ``_loggers``).  http.server has no middleware, so the loggers hook
into the handler: ``default`` keeps ``log_message`` (one line to stderr per request,
written when the status line is sent); ``naive`` and ``stdlib-queue`` log after the body
is written; the boundlog loggers use boundlog's own ``AccessLogMixin``, and
``capture-only`` a mixin that captures what it does (status, body bytes through a
counting ``wfile``) and logs nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, ClassVar

from boundlog import AccessLog
from boundlog.http_server import AccessLogMixin

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


@dataclass
class HandlerLogging:
    """How the handler logs: at most one of the three is in use.

    ``access_log`` is boundlog's log, written by the mixin; the handler only reports its
    stats.
    """

    log_message: bool = False
    emit: Emit | None = None
    access_log: AccessLog | None = None
    capture_only: bool = False
    on_shutdown: list[Callable[[], None]] = field(default_factory=list)


class BenchHandler(BaseHTTPRequestHandler):
    """Keep-alive handler that answers GET with the fixed body."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm on, the second waits
    # for the client's delayed ACK (40 ms) and the server would measure nothing else.
    disable_nagle_algorithm = True
    logging: ClassVar[HandlerLogging] = HandlerLogging()

    def do_GET(self) -> None:
        logging = self.logging
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
        if logging.emit is not None:
            self._emit_line(logging.emit)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if self.logging.log_message:
            super().log_request(code, size)

    def _emit_line(self, emit: Emit) -> None:
        emit(
            combined_line(
                self.client_address[0],
                self.command,
                self.path,
                self.request_version,
                200,
                len(BODY),
                self.headers.get("Referer"),
                self.headers.get("User-Agent"),
            )
        )


class BenchServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with a listen backlog for wrk, taking a client's goodbye quietly."""

    daemon_threads = True
    # socketserver's backlog of 5 overflows when wrk opens its connections all at once;
    # the connections left out wait for TCP retransmissions (1 s, 3 s), which would
    # dominate the latencies measured.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # wrk resets its keep-alive connections when it stops; socketserver would print
        # a traceback for each, and with the default logger they would land in the sink.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def handler_logging(config: LoggerConfig) -> HandlerLogging:
    """Set up the logger the harness asked for."""
    if not config.logger.startswith("boundlog-"):
        serve_stats(None, config.stats_socket)
    if config.logger == "none":
        return HandlerLogging()
    if config.logger == "default":
        # log_message writes to stderr, and the harness's sink is stdout.
        os.dup2(1, 2)
        return HandlerLogging(log_message=True)
    if config.logger == "capture-only":
        return HandlerLogging(capture_only=True)
    if config.logger == "naive":
        return HandlerLogging(emit=naive_emitter())
    if config.logger == "stdlib-queue":
        emit, stop_listener = queue_emitter()
        return HandlerLogging(emit=emit, on_shutdown=[stop_listener])
    if config.logger in ("boundlog-drop", "boundlog-wait"):
        log = AccessLog(sink=config.sink, policy=config.policy, max_queue=config.max_queue)
        serve_stats(log, config.stats_socket)
        return HandlerLogging(
            access_log=log, on_shutdown=[final_stats_writer(log.close, config.stats_file)]
        )
    raise ValueError(f"unknown logger {config.logger!r}")


class _CountedWrites:
    """A handler's ``wfile`` that counts what goes through it, as boundlog's mixin does."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.count = 0

    def write(self, data: bytes) -> int:
        written: int = self._raw.write(data)
        self.count += written
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class CaptureOnlyMixin(BaseHTTPRequestHandler):
    """Capture status and body size the way boundlog's mixin does, then log nothing."""

    wfile: _CountedWrites  # type: ignore[assignment]
    _status: int
    _body_start: int
    # The last request's capture, where a logger would build its record from it.
    captured: tuple[int, int] = (0, 0)

    def setup(self) -> None:
        super().setup()
        self.wfile = _CountedWrites(self.wfile)

    def handle_one_request(self) -> None:
        self._status = 0
        self._body_start = self.wfile.count
        try:
            super().handle_one_request()
        finally:
            if self._status:
                self.captured = (self._status, self.wfile.count - self._body_start)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if isinstance(code, int):
            self._status = code

    def end_headers(self) -> None:
        super().end_headers()
        self._body_start = self.wfile.count


def handler_class(logging: HandlerLogging) -> type[BenchHandler]:
    """The handler, with a mixin in front when boundlog or capture-only is the logger."""
    BenchHandler.logging = logging
    if logging.capture_only:

        class CapturingHandler(CaptureOnlyMixin, BenchHandler):
            pass

        return CapturingHandler
    if logging.access_log is None:
        return BenchHandler

    class BoundlogHandler(AccessLogMixin, BenchHandler):
        access_log = logging.access_log

    return BoundlogHandler


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT, then drain the logger."""
    parser = argparse.ArgumentParser(prog="python -m boundlog.bench._stdlib_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    logging = handler_logging(LoggerConfig.from_environ())
    server = BenchServer((args.host, args.port), handler_class(logging))

    def shut_down(signum: int, frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever to return, so it cannot run on its thread.
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, shut_down)
    signal.signal(signal.SIGINT, shut_down)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        for hook in logging.on_shutdown:
            hook()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
