"""Micro-benchmarks of boundlog's two costs, measured in one process, one run.

1. The request path: an ASGI app called through ``boundlog.asgi.AccessLogMiddleware``
   minus the same app called directly, in µs per request.  Coroutines are driven by
   hand (no event loop) so that only the middleware and the submission are measured.
   The same for a WSGI app and ``boundlog.wsgi.AccessLogMiddleware``, driven as a
   server drives it (call, iterate the body, close it), with an environ as gunicorn's.
   The writer runs as in production, draining to /dev/null; only the CPU time of the
   calling thread is counted, so the writer's own formatting is not.  With ``--fields``,
   the same for a JSON log, whose middleware collects each request's notes, with an
   app that adds none and one that calls ``boundlog.add_fields`` with two fields.
2. The writer: formatting a batch of combined lines, one of JSON lines, one in
   gunicorn's default template (``GUNICORN_DEFAULT``) and one of each schema preset
   (``ecs``, ``gcp``, ``otel``), and writing it to /dev/null, in
   µs per line, with the core ``boundlog --version`` names
   (``BOUNDLOG_NO_EXTENSIONS=1`` for the pure-Python one).  With ``--logging``, the
   writer's work for a ``LoggingSink`` of each message shape (building and emitting a
   ``LogRecord`` per line), to a NullHandler and to a StreamHandler on /dev/null.

Times are CPU time of the measuring thread (``time.thread_time``), which other load on
a shared machine disturbs far less than wall-clock time.  Each figure is the median of
several rounds; the rounds alternate plain and wrapped calls so that noise hits both
alike.  Run: ``python benchmarks/micro.py``.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from uvicorn.logging import AccessFormatter

from boundlog import AccessLog, LoggingSink, Record, add_fields
from boundlog._core import description as core_description
from boundlog.asgi import AccessLogMiddleware
from boundlog.formats._apache import make_format
from boundlog.formats._schemas import SCHEMAS
from boundlog.wsgi import AccessLogMiddleware as WsgiAccessLogMiddleware

# gunicorn's default access_log_format, a template boundlog compiles (_templates).
GUNICORN_DEFAULT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
# uvicorn's default access format (uvicorn.config.LOGGING_CONFIG).
UVICORN_ACCESS_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
BODY = b"x" * 1024
START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"1024")],
}
END = {"type": "http.response.body", "body": BODY}
SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0"},
    "http_version": "1.1",
    "method": "GET",
    "scheme": "http",
    "path": "/hello",
    "raw_path": b"/hello",
    "query_string": b"name=world",
    "root_path": "",
    "headers": [
        (b"host", b"127.0.0.1:8000"),
        (b"user-agent", b"wrk/4.2.0"),
        (b"accept", b"*/*"),
        (b"referer", b"http://127.0.0.1:8000/"),
    ],
    "client": ("127.0.0.1", 51234),
    "server": ("127.0.0.1", 8000),
}


async def app(scope: Any, receive: Any, send: Callable[[Any], Awaitable[None]]) -> None:
    await send(START)
    await send(END)


async def fields_app(scope: Any, receive: Any, send: Callable[[Any], Awaitable[None]]) -> None:
    add_fields(user="ada", tenant=7)
    await send(START)
    await send(END)


def wsgi_fields_app(environ: Any, start_response: Callable[..., Any]) -> list[bytes]:
    add_fields(user="ada", tenant=7)
    start_response("200 OK", WSGI_HEADERS)
    return [BODY]


async def receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def send(message: Any) -> None:
    return None


# What gunicorn's sync worker puts in an environ for `curl http://127.0.0.1:8000/hello?name=world`.
ENVIRON: dict[str, Any] = {
    "wsgi.errors": None, "wsgi.version": (1, 0), "wsgi.multithread": False,
    "wsgi.multiprocess": False, "wsgi.run_once": False, "wsgi.file_wrapper": None,
    "wsgi.input_terminated": True, "SERVER_SOFTWARE": "gunicorn/23.0.0", "wsgi.input": None,
    "gunicorn.socket": None, "REQUEST_METHOD": "GET", "QUERY_STRING": "name=world",
    "RAW_URI": "/hello?name=world", "SERVER_PROTOCOL": "HTTP/1.1",
    "HTTP_HOST": "127.0.0.1:8000", "HTTP_USER_AGENT": "curl/8.5.0", "HTTP_ACCEPT": "*/*",
    "wsgi.url_scheme": "http", "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "51234",
    "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "PATH_INFO": "/hello",
    "SCRIPT_NAME": "",
}  # fmt: skip
WSGI_HEADERS = [("Content-Type", "text/plain"), ("Content-Length", "1024")]


def wsgi_app(environ: Any, start_response: Callable[..., Any]) -> list[bytes]:
    start_response("200 OK", WSGI_HEADERS)
    return [BODY]


def start_response(status: str, headers: Any, exc_info: Any = None) -> Callable[[bytes], None]:
    return _write


def _write(data: bytes) -> None:
    pass


def time_wsgi_calls(handler: Any, count: int) -> float:
    began = time.thread_time()
    for _ in range(count):
        body = handler(ENVIRON, start_response)
        for _chunk in body:
            pass
        close = getattr(body, "close", None)
        if close is not None:
            close()
    return (time.thread_time() - began) / count * 1e6


def drive(coroutine: Coroutine[Any, Any, None]) -> None:
    try:
        coroutine.send(None)
    except StopIteration:
        return
    raise RuntimeError("the benchmark app suspended; it must not")


def time_calls(handler: Any, count: int) -> float:
    began = time.thread_time()
    for _ in range(count):
        drive(handler(SCOPE, receive, send))
    return (time.thread_time() - began) / count * 1e6


def request_path(
    rounds: int, count: int, wsgi: bool, format_name: str = "combined", fields: bool = False
) -> tuple[float, float, float]:
    # Default settings, but a queue deep enough that no record is dropped.  The app is
    # the same alone and wrapped (with fields, add_fields outside a request does nothing).
    log = AccessLog(os.devnull, format_name, max_queue=count + 1)
    if wsgi:
        plain_app: Any = wsgi_fields_app if fields else wsgi_app
        wrapped: Any = WsgiAccessLogMiddleware(plain_app, log=log)
        timed = time_wsgi_calls
    else:
        plain_app = fields_app if fields else app
        wrapped, timed = AccessLogMiddleware(plain_app, log=log), time_calls
    plain_times, wrapped_times = [], []
    for _ in range(rounds):
        plain_times.append(timed(plain_app, count))
        wrapped_times.append(timed(wrapped, count))
        # Let the writer drain, so that the next round's records find room.
        assert log.flush(timeout=30)
    stats = log.close()
    assert stats.written == rounds * count, stats
    plain = statistics.median(plain_times)
    with_log = statistics.median(wrapped_times)
    return plain, with_log, with_log - plain


def _records(batch: int) -> list[Record]:
    now = time.time()
    return [
        Record(now + i / batch, 0.0004, "127.0.0.1", "GET", b"/hello", b"name=world",
               "HTTP/1.1", 200, 1024,
               [(b"host", b"127.0.0.1:8000"), (b"referer", b"http://127.0.0.1:8000/"),
                (b"user-agent", b"wrk/4.2.0")], [])
        for i in range(batch)
    ]  # fmt: skip


def writer_per_line(rounds: int, batch: int, format_name: str) -> float:
    fmt = make_format(format_name, utc=False)
    records = _records(batch)
    fd = os.open(os.devnull, os.O_WRONLY)
    times = []
    try:
        for _ in range(rounds):
            began = time.thread_time()
            for _ in range(20):
                os.write(fd, fmt.format_batch(records))
            times.append((time.thread_time() - began) / (20 * batch) * 1e6)
    finally:
        os.close(fd)
    return statistics.median(times)


def logging_per_line(rounds: int, batch: int, shape: str, handler: logging.Handler) -> float:
    """The writer's work for a LoggingSink: the messages step, then write() emitting a
    LogRecord per line to a logger whose one handler is ``handler``."""
    logger = logging.getLogger(f"micro.{shape}.{type(handler).__name__}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.handlers[:] = [handler]
    sink = LoggingSink(logger.name, message=shape)
    fmt = sink.messages(make_format("combined", utc=False))
    records = _records(batch)
    times = []
    for _ in range(rounds):
        began = time.thread_time()
        for _ in range(20):
            sink.write(fmt.format_batch(records))
        times.append((time.thread_time() - began) / (20 * batch) * 1e6)
    handler.close()
    return statistics.median(times)


def _devnull_handler(formatter: logging.Formatter) -> logging.Handler:
    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115 - closed by close()
    handler.setFormatter(formatter)
    return handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=20_000, help="per round")
    parser.add_argument("--batch", type=int, default=512, help="lines per writer batch")
    parser.add_argument(
        "--fields", action="store_true", help="also a JSON log, without and with add_fields"
    )
    parser.add_argument(
        "--logging", action="store_true", help="also LoggingSink's writer, per shape and handler"
    )
    args = parser.parse_args()
    plain, wrapped, extra = request_path(args.rounds, args.requests, wsgi=False)
    wsgi_plain, wsgi_wrapped, wsgi_extra = request_path(args.rounds, args.requests, wsgi=True)
    line = writer_per_line(args.rounds, args.batch, "combined")
    json_line = writer_per_line(args.rounds, args.batch, "json")
    template_line = writer_per_line(args.rounds, args.batch, GUNICORN_DEFAULT)
    schema_lines = {name: writer_per_line(args.rounds, args.batch, name) for name in SCHEMAS}
    print(f"core:                      {core_description}")
    print(f"ASGI app alone:            {plain:6.2f} µs/request")
    print(f"ASGI app + boundlog:       {wrapped:6.2f} µs/request")
    # The C core's targets.
    print(f"request-path cost:         {extra:6.2f} µs/request   (target <= 0.4)")
    print(f"WSGI app alone:            {wsgi_plain:6.2f} µs/request")
    print(f"WSGI app + boundlog:       {wsgi_wrapped:6.2f} µs/request")
    print(f"WSGI request-path cost:    {wsgi_extra:6.2f} µs/request")
    print(f"writer, combined->devnull: {line:6.2f} µs/line      (target <= 0.3)")
    print(f"writer, json->devnull:     {json_line:6.2f} µs/line")
    print(f"writer, gunicorn template: {template_line:6.2f} µs/line")
    for name, cost in schema_lines.items():
        print(f"writer, {name + '->devnull:':<19}{cost:6.2f} µs/line      (pure Python)")
    if args.logging:
        print_logging(args.rounds, args.batch)
    if not args.fields:
        return
    for wsgi in (False, True):
        name = "WSGI" if wsgi else "ASGI"
        _, _, json_extra = request_path(args.rounds, args.requests, wsgi, "json")
        _, _, fields_extra = request_path(args.rounds, args.requests, wsgi, "json", fields=True)
        print(f"{name} cost, json log:         {json_extra:6.2f} µs/request")
        print(f"{name} cost, json + 2 fields:  {fields_extra:6.2f} µs/request")


def print_logging(rounds: int, batch: int) -> None:
    plain = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    uvicorn = AccessFormatter(UVICORN_ACCESS_FORMAT, use_colors=False)
    for shape, handler, what in [
        ("line", logging.NullHandler(), "NullHandler"),
        ("line", _devnull_handler(plain), "StreamHandler, %(asctime)s ... %(message)s"),
        ("uvicorn", logging.NullHandler(), "NullHandler"),
        ("uvicorn", _devnull_handler(uvicorn), "StreamHandler, uvicorn's AccessFormatter"),
        ("gunicorn", logging.NullHandler(), "NullHandler"),
        ("gunicorn", _devnull_handler(plain), "StreamHandler, %(asctime)s ... %(message)s"),
    ]:
        cost = logging_per_line(rounds, batch, shape, handler)
        print(f"writer, logging {shape + ',':<9} {cost:6.2f} µs/line      ({what})")


if __name__ == "__main__":
    main()
