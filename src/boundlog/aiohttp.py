"""aiohttp: an access logger class for ``web.run_app`` and ``web.AppRunner``.

aiohttp builds its access logger itself, once per connection, as
``access_log_class(logger, access_log_format)``, so the class carries its log:

* ``access_logger(app, sink=..., format=..., ...)`` returns a subclass of
  :class:`AccessLogger` bound to a new :class:`~boundlog.AccessLog` built from those
  options (and, for those not given, the ``BOUNDLOG_*`` variables of the environment,
  see ``_environment``), and closes that log when ``app`` is cleaned up, after aiohttp has finished the
  last request of a graceful stop.  ``access_logger(app, log=a_log)`` borrows a log
  instead, and only flushes it then.
* :class:`AccessLogger` itself, used as it is, writes to stdout in the format named by
  ``access_log_format``: ``combined`` (also for aiohttp's default template), ``common``,
  ``json`` or a schema preset (``ecs``, ``gcp``, ``otel``), or any other aiohttp template, compiled as a :class:`~boundlog.Template`
  (``%a %t "%r" %s %b %T %Tf %D %P %{Name}i %{Name}o``); the exit handlers drain that log.
  As in ``combined``, ``%b`` counts body bytes only (aiohttp's counts the headers
  too); ``%T`` is truncated and ``%P`` is the bare pid, as Apache writes them.

aiohttp calls the logger on its event loop once the response is written.  Under
``policy="wait"`` a full queue therefore blocks the loop until the writer makes room.

For a log that reads them, the logger learns a record's extras (``_extras``) from the
request and response aiohttp hands it, once the handler has run:

* ``route``: the template of the resource ``request.match_info`` names (``_routes``);
* ``completed``: whether aiohttp wrote the response's end.  aiohttp logs a response
  whose last write failed (a client that left) as well as one sent in full; but when a
  write of the handler's own fails (a ``StreamResponse`` whose client left mid-stream)
  and the handler lets the error out, aiohttp drops the connection without calling the
  logger at all, and there is no record;
* ``bytes_received``: the request body bytes the handler read from ``request.content``
  (what aiohttp received less what it holds unread);
* ``environ``: the request's items the format names;
* ``trace``: the ids of the OpenTelemetry span current as the handler is called.  By
  the time aiohttp calls the logger, the span of OpenTelemetry's middleware
  (``opentelemetry-instrumentation-aiohttp-server``) has ended, so
  ``access_logger(app, ...)`` appends a middleware of its own to ``app``, inside
  OpenTelemetry's (which its instrumentation puts first), that reads the span and
  leaves its ids in the request's items: only for a log that reads the trace, with
  ``opentelemetry-api`` installed.  Without ``app`` the formats read the ``traceparent``
  header.

aiohttp gives no request ids: its handlers see the request's headers read-only, so a
new id could not reach them as a header, as it does under ``boundlog.asgi`` and
``boundlog.wsgi``.  Handing the handler ``request.clone(headers=...)`` instead would
hide from the logger, which aiohttp gives the request it made, the items the handler
leaves on the clone, and the clone encodes the headers again, which fails on a
header's bytes that are not UTF-8.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from time import time
from typing import TYPE_CHECKING, Any, ClassVar

from aiohttp import web, web_log
from aiohttp.abc import AbstractAccessLogger

from ._errors import ConfigurationError
from .capture._extras import early_trace_reader, environ_reader, trace_reader
from .capture._routes import aiohttp_route
from .engine._environment import log_for_middleware
from .engine._log import AccessLog, LogOptions
from .formats._apache import FORMATS
from .record._budget import RecordBudget
from .record._record import Extras, Record, new_extras, new_record

if TYPE_CHECKING:
    # In typing from 3.12; only a type checker reads it (annotations are not evaluated).
    from typing_extensions import Unpack

#: ``learn(request, response)``: the extras of an exchange aiohttp has finished.
Learn = Callable[[web.BaseRequest, web.StreamResponse], Extras]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# aiohttp's default template, '%a %t "%r" %s %b "%{Referer}i" "%{User-Agent}i"', is the
# combined format without its ident and user fields.
_AIOHTTP_DEFAULT = web_log.AccessLogger.LOG_FORMAT

# The logs the plain AccessLogger writes, one per format, built on first use.
_stdout_logs: dict[str, AccessLog] = {}
_building = threading.Lock()

# Where boundlog's middleware leaves the span's ids among the request's items: an
# aiohttp that has RequestKey warns of a str key (NotAppKeyWarning).
_TRACE: Any = (
    web.RequestKey("boundlog.trace", tuple) if hasattr(web, "RequestKey") else "boundlog.trace"
)


class AccessLogger(AbstractAccessLogger):
    """Hand every request aiohttp finishes to a boundlog :class:`~boundlog.AccessLog`.

    Used as it is, it logs to stdout; :func:`access_logger` makes a configured subclass.
    """

    __slots__ = ("_budget", "_keeps_response_headers", "_learn", "_submit")

    #: The log of a class made by :func:`access_logger`; None for this class itself.
    access_log: ClassVar[AccessLog | None] = None

    def __init__(self, logger: logging.Logger, log_format: str) -> None:
        super().__init__(logger, log_format)
        try:
            log = self.access_log
            if log is None:
                log = _stdout_log(log_format)
            elif log_format != _AIOHTTP_DEFAULT:
                raise ConfigurationError(
                    f"access_log_format={log_format!r} has no effect on a logger made by "
                    "boundlog.aiohttp.access_logger(): pass format= to it instead"
                )
        except ConfigurationError as error:
            # aiohttp makes its access logger as it accepts a connection, and asyncio
            # drops the connection on an error there without a word (outside debug mode).
            logger.error("boundlog: %s", error)
            raise
        self._submit = log.submit
        self._keeps_response_headers = log.reads_response_headers
        self._budget = log.record_budget
        # None for a log that reads no extras: one test per request.
        self._learn = _learner(log.reads_extras, log.environ_names, self._budget.limit)

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        """Submit one record; ``time`` is how long aiohttp took to answer, in seconds."""
        learn = self._learn
        extras = None if learn is None else learn(request, response)
        self._submit(
            _record(request, response, time, self._keeps_response_headers, self._budget, extras)
        )


def access_logger(
    app: web.Application | None = None,
    log: AccessLog | None = None,
    *,
    request_id: bool | str | None = None,
    **options: Unpack[LogOptions],
) -> type[AccessLogger]:
    """Return an :class:`AccessLogger` subclass bound to one log, for ``access_log_class``.

    Give it an :class:`~boundlog.AccessLog` as ``log``, or the options of one (``sink``,
    ``format``, ``policy``, ...) to build a log the class owns.  With ``app`` given, an
    owned log is closed, and a borrowed one flushed, when the application is cleaned up,
    and a log that reads the trace gets the span's ids from a middleware appended to
    ``app``; call this before the application starts.  ``request_id`` is refused: see
    the module's docstring.
    """
    if request_id:
        raise ConfigurationError(
            f"request_id={request_id!r} is not available under aiohttp, whose handlers see "
            "the request's headers read-only: set the id in a middleware of your own "
            "(response.headers['X-Request-ID'] = ...) and show it with "
            "JsonFormat(response_headers=['X-Request-ID']) or %{X-Request-ID}o"
        )
    bound, owned = log_for_middleware(log, options)
    if app is not None:
        current_trace = early_trace_reader(bound.reads_extras)
        if current_trace is not None:
            app.middlewares.append(_trace_middleware(current_trace))
        drain = bound.close if owned else bound.flush

        async def drain_on_cleanup(app: web.Application) -> None:
            # aiohttp runs cleanup after its last connection is done: every record is
            # in the queue, and the writer may take a while to write it.
            await asyncio.get_running_loop().run_in_executor(None, drain)

        app.on_cleanup.append(drain_on_cleanup)

    class BoundAccessLogger(AccessLogger):
        __slots__ = ()
        access_log = bound

    return BoundAccessLogger


def _trace_middleware(current_trace: Callable[[], tuple[int, int] | None]) -> Any:
    """A middleware leaving the ids of the span current as the handler is called among
    the request's items, for the logger."""

    @web.middleware
    async def boundlog_trace(request: web.Request, handler: Handler) -> web.StreamResponse:
        request[_TRACE] = current_trace()
        return await handler(request)

    return boundlog_trace


def _learner(reads: frozenset[str], environ_names: frozenset[str], limit: int) -> Learn | None:
    """A function learning the extras ``reads`` names once aiohttp has written the
    response, or None when there are none to learn."""
    reads_route = "route" in reads
    # Left by boundlog's middleware, which only a log reading the trace has, and only
    # with the OpenTelemetry API to read it.
    reads_trace = "trace" in reads and trace_reader() is not None
    reads_completed = "completed" in reads
    reads_received = "bytes_received" in reads
    # The server variables the log's format names (%{NAME}e) are the request's own
    # items (request["name"], aiohttp's place for a handler's data).
    read_environ = environ_reader(environ_names, limit) if "environ" in reads else None
    if not (reads_route or reads_trace or reads_completed or reads_received or read_environ):
        return None

    def learn(request: web.BaseRequest, response: web.StreamResponse) -> Extras:
        return new_extras(Extras, (
            aiohttp_route(request) if reads_route else None,
            request.get(_TRACE) if reads_trace else None,
            # Set once write_eof() has written the end of the response: aiohttp logs a
            # response whose end it failed to write as well.
            response._eof_sent if reads_completed else None,
            _body_bytes_read(request.content) if reads_received else None,
            None,
            read_environ(request) if read_environ is not None else None,
        ))  # fmt: skip

    return learn


def _body_bytes_read(content: Any) -> int:
    """The request body bytes the handler read: those aiohttp received, less those it
    holds unread.  A request without a body has an EmptyStreamReader, which holds none
    (no ``_size``)."""
    received: int = content.total_bytes
    return received - getattr(content, "_size", 0)


def _stdout_log(log_format: str) -> AccessLog:
    name = "combined" if log_format == _AIOHTTP_DEFAULT else log_format
    if name not in FORMATS and "%" not in name:
        raise ConfigurationError(
            f"access_log_format={log_format!r} is not supported: give a template such as "
            f"'%a %t \"%r\" %s %b %Tf' or one of the formats {', '.join(FORMATS)} by name"
        )
    with _building:
        log = _stdout_logs.get(name)
        if log is None:
            log = _stdout_logs[name] = AccessLog("stdout", name)
        return log


def _record(
    request: web.BaseRequest,
    response: web.StreamResponse,
    duration: float,
    keeps_response_headers: bool,
    budget: RecordBudget,
    extras: Extras | None = None,
) -> Record:
    # aiohttp decodes the request line and headers as UTF-8 with surrogateescape:
    # encoding them back the same way recovers the bytes the client sent.
    target, _, text_query = request.raw_path.partition("?")
    # What the client sent, cut down if it is over the log's budget (see _budget).
    path, query, headers = budget.bounded(
        target.encode("utf-8", "surrogateescape"),
        text_query.encode("utf-8", "surrogateescape"),
        request.raw_headers,
    )
    version = request.version
    # aiohttp measures the duration by its event loop's monotonic clock.
    return new_record(Record, (
        time() - duration, duration, request.remote, request.method, path, query,
        f"HTTP/{version.major}.{version.minor}", response.status,
        _body_bytes(request, response), headers,
        response.headers if keeps_response_headers else (), None, extras,
    ))  # fmt: skip


def _body_bytes(request: web.BaseRequest, response: web.StreamResponse) -> int:
    """The bytes aiohttp wrote after the response headers.

    ``body_length`` counts the header block too; aiohttp writes it as the status line and
    one ``Name: value`` line per header, each ending in CRLF, then an empty line, in
    UTF-8.  With chunked transfer encoding the result includes the chunk framing, as
    nginx's ``$body_bytes_sent`` does.  A file goes out with ``sendfile()``, past the
    count: its Content-Length is what was sent.
    """
    if isinstance(response, web.FileResponse) and response.content_length is not None:
        return response.content_length
    written = response.body_length
    if not written:
        # aiohttp sets body_length at the response's end: a response that never got
        # there (its client left mid-stream, and the handler returned it) has what its
        # writer put out so far.
        written = getattr(getattr(response, "_payload_writer", None), "output_size", 0)
        if not isinstance(written, int) or not written:
            return 0
    version = request.version
    lines = [f"HTTP/{version.major}.{version.minor} {response.status} {response.reason}"]
    lines += [f"{name}: {value}" for name, value in response.headers.items()]
    head = "\r\n".join(lines) + "\r\n\r\n"
    size = len(head) if head.isascii() else len(head.encode("utf-8", "surrogatepass"))
    return max(written - size, 0)
