"""WSGI middleware: one record per request, handed over when the server is done with the body.

PEP 3333 makes the server call ``close()`` on the response iterable when it is done with
it, whether the body was sent in full, the client went away, or sending failed.  The
middleware wraps the iterable, counts the bytes the server takes from it (a list or
tuple body as a whole, when the server starts on it), and submits the record when the
server has taken the whole body (it asked past the last chunk: every byte was
written, so the record is accurate then), else from ``close()``: once.  A server that
never calls ``close()`` (a PEP 3333 violation seen in the wild) still logs every body
it sent in full; a response it drops, neither exhausted nor closed, is logged when it
is garbage-collected, without waiting for room (a finalizer must not block): queued
if there is room, else counted as refused.  An application that raises before returning
a body, or whose body raises before the server took a chunk of it, is logged with status
500, what the server answers then (it has sent no header yet; unless the application's
write() sent bytes: then the status it gave), and the exception propagates unchanged.

For a log that reads them, a record's extras say whether the response completed (the
server took the body's last chunk and asked for more: it stopped early when the client
went away or a write failed, or the application raised), for which a list or tuple
body is iterated chunk by chunk too, its bytes counted as the server takes them; and
how many bytes of the request body the application read from ``wsgi.input``, which the
middleware then wraps (in ``_counting``'s reader, on both request paths).

Under ``policy="wait"`` a full queue blocks the request's own thread in ``close()``,
which is what a threaded server's backpressure looks like; other requests keep going.

With ``request_id=True`` (or a header name), each request gets an id in that request
header, the client's or a new one, and its response carries it back (see
``_request_id``).

With the C core (``_core``), ``AccessLogMiddleware(...)`` makes a
``_CompiledAccessLogMiddleware``, whose requests take the same path in C
(csrc/paths/wsgi_*.c); this module stays its reference, and the C code calls back into it
for an environ or a status line out of the ordinary, and into ``_request_id`` for the
request ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from contextvars import Token
from http import HTTPStatus
from itertools import chain
from time import perf_counter, time
from types import MethodType, TracebackType
from typing import TYPE_CHECKING, Any, Self

from . import _core
from .capture._counting import CountingReader
from .capture._environ import compiled as _compiled_environ_record
from .capture._environ import environ_record
from .capture._extras import NO_EXTRAS, early_trace_reader, with_bytes_received, wsgi_learner
from .engine._environment import log_for_middleware, request_ids_for_middleware
from .engine._log import AccessLog, LogOptions
from .record._headers import environ_key
from .record._notes import NOTES
from .record._record import Record

if TYPE_CHECKING:
    # In typing from 3.12; only a type checker reads it (annotations are not evaluated).
    from typing_extensions import Unpack

Environ = dict[str, Any]
Headers = list[tuple[str, str]]
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]
StartResponse = Callable[..., Callable[[bytes], object]]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]
HeaderPicker = Callable[[Environ], dict[str, Any]]

# The status lines applications send, by far, are the standard ones: a dict lookup
# finds their code many times faster than parsing the line does.
_STANDARD_STATUS_CODES = {f"{status.value} {status.phrase}": status.value for status in HTTPStatus}


class AccessLogMiddleware:
    """Log every request that passes through the WSGI application ``app``.

    Give it an :class:`~boundlog.AccessLog` as ``log``, or the options of one (``sink``,
    ``format``, ``policy``, ...) to let the middleware build and own its log.
    ``request_id=True`` gives each request an id in its X-Request-ID header (the
    client's, else a new one) and sends it back in the response's; a string names
    another header.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # The compiled request path when the C core is in use; a subclass keeps this
        # class's pure-Python one.
        if cls is AccessLogMiddleware and _core.wsgi_middleware is not None:
            cls = _CompiledAccessLogMiddleware
        return super().__new__(cls)

    def __init__(
        self,
        app: WSGIApp,
        log: AccessLog | None = None,
        *,
        request_id: bool | str | None = None,
        **options: Unpack[LogOptions],
    ) -> None:
        self.app = app
        # Checked before a log is built, which a bad option would leave open.
        self._request_ids = request_ids_for_middleware(log, request_id)
        self.log, self.owns_log = log_for_middleware(log, options, request_ids=True)
        self._submit = self.log.submit
        names = self.log.request_header_names
        # The environ keys of the header fields the log reads, which are copied out
        # of the environ for the record; None for any field (the whole environ).
        self._picked_keys = None if names is None else tuple(map(environ_key, sorted(names)))
        self._pick_headers = (
            None if self._picked_keys is None else _header_picker(self._picked_keys)
        )
        self._keeps_response_headers = self.log.reads_response_headers
        self._budget = self.log.record_budget
        # Set for each request only when the log reads notes (see _notes).
        self._notes_var = NOTES if self.log.reads_notes else None
        # What the log's format reads of a record's extras, learnt from the environ when
        # the response ends (see _extras); None for a log that reads none.
        self._extras = wsgi_learner(
            self.log.reads_extras, self.log.environ_names, self._budget.limit
        )
        # The span current as the application is called, for a log that reads it.
        self._trace = early_trace_reader(self.log.reads_extras)
        reads = self.log.reads_extras
        self._reads_completed = "completed" in reads
        self._counts_received = "bytes_received" in reads
        # A class of its own keeps the work of learning off the other logs' path.
        self._learns = self._reads_completed or self._counts_received
        self._exchange = _LearningExchange if self._learns else _Exchange

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        exchange = self._exchange(environ, start_response, self)
        request_ids = self._request_ids
        try:
            if self._trace is not None:
                # Now, inside OpenTelemetry's middleware: its span's context has ended
                # by the time the server closes the body (see _extras).
                exchange._trace = self._trace()
            body = self.app(
                environ,
                # The id goes into the headers before the exchange keeps them, so that
                # the record's response headers are those the server sends.
                exchange.start_response
                if request_ids is None
                else request_ids.wsgi(environ, exchange.start_response),
            )
        except BaseException:
            exchange._failed_unsent()
            exchange.close()
            raise
        exchange.body = body
        return exchange

    def _submit_unclosed(self, record: Record | None) -> None:
        # From the finalizer of a response the server dropped: it may run on any thread,
        # at any allocation, so it never waits for room (csrc/paths/wsgi_exchange.c too).
        # None: the record could not be made (the finalizer reports why); still counted.
        if record is None:
            self.log._admission.refuse_unlocked()
        else:
            self.log._admission.offer_unlocked(record)


class _Exchange:
    """The response iterable the server sees; it counts bytes and submits on close."""

    __slots__ = (
        "_closed",
        "_completed",
        "_environ",
        "_logged",
        "_middleware",
        "_notes",
        "_notes_token",
        "_response_headers",
        "_sent",
        "_server_write",
        "_start_response",
        "_started",
        "_status",
        "_trace",
        "body",
    )  # fmt: skip

    def __init__(
        self, environ: Environ, start_response: StartResponse, middleware: AccessLogMiddleware
    ) -> None:
        # Nothing to log until the exchange is whole (see __del__).
        self._logged = True
        self._started = perf_counter()
        self._environ = environ
        self._middleware = middleware
        self._start_response = start_response
        self._status = 500
        self._sent = 0
        self._response_headers: Sequence[tuple[str, str]] = ()
        self._closed = False
        # Whether the server asked past the body's last chunk, for a log that reads it
        # (_LearningExchange).
        self._completed = False
        # The span's ids as the application is called (see __call__), when read.
        self._trace: tuple[int, int] | None = None
        self.body: Iterable[bytes] = ()
        # The request's notes (boundlog.add_fields), when the log reads them: set in
        # the request's thread before the application runs.
        notes_var = middleware._notes_var
        self._notes: dict[str, Any] | None = None
        self._notes_token: Token[dict[str, Any] | None] | None = None
        if notes_var is not None:
            self._notes = {}
            self._notes_token = notes_var.set(self._notes)
        # Whether the record was handed over: once, when the body ends or at close().
        self._logged = False

    def start_response(
        self, status: str, headers: Headers, exc_info: ExcInfo | None = None
    ) -> Callable[[bytes], object]:
        # "200 OK" -> 200; a malformed status is the server's to reject, not ours.
        try:
            self._status = _STANDARD_STATUS_CODES.get(status) or _parsed_status_code(status)
        except TypeError:
            self._status = 0  # an unhashable status: not a status line either
        if self._middleware._keeps_response_headers:
            self._response_headers = headers
        self._server_write = (
            self._start_response(status, headers, exc_info)
            if exc_info
            else self._start_response(status, headers)
        )
        return self._counting_write

    def _counting_write(self, data: bytes) -> object:
        # The legacy write() callable (PEP 3333) sends bytes outside the body iterable.
        self._sent += len(data)
        return self._server_write(data)

    def __iter__(self) -> Iterator[bytes]:
        body = self.body
        if type(body) is list or type(body) is tuple:
            # Most applications return a list: the server then iterates it at C speed
            # instead of resuming a generator per chunk.  Its bytes are counted when the
            # server starts taking them, so a server that stops halfway through a
            # list of several chunks logs them all.
            self._sent += sum(map(len, body))
            # Still iterated at C speed; the generator after it sees the end.
            return chain(body, self._ending())
        return self._counting(body)

    def _counting(self, body: Iterable[bytes]) -> Iterator[bytes]:
        taken = False
        try:
            for chunk in body:
                self._sent += len(chunk)
                taken = True
                yield chunk
        except BaseException:
            if not taken:
                self._failed_unsent()
            raise
        self._exhausted()

    def _failed_unsent(self) -> None:
        # The application or its body raised before the server took a chunk: unless
        # write() sent bytes, the server has sent no header either (gunicorn, waitress
        # and wsgiref send them with the first chunk, even an empty one), and answers
        # 500 in place of the status the application gave.
        if not self._sent:
            self._status = 500

    def _ending(self) -> Iterator[bytes]:
        self._exhausted()
        yield from ()

    def _exhausted(self) -> None:
        # The server asked past the last chunk: it wrote the whole body, so the record
        # made now is accurate, and a server that never calls close() still logs it.
        # close() then closes the body without logging again.
        if self._logged:
            return
        self._logged = True
        self._forget_notes()
        self._middleware._submit(self._record())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            close_body = getattr(self.body, "close", None)
            if close_body is not None:
                close_body()
        finally:
            self._forget_notes()
            if not self._logged:
                self._logged = True
                self._middleware._submit(self._record())

    def __del__(self) -> None:
        # The server dropped the response, neither exhausted nor closed: still logged,
        # never lost uncounted.  Not the body's close() (application code, at a time
        # and on a thread nobody chose), and no waiting for room.
        if not self._logged:
            self._logged = True
            record = None
            try:
                record = self._record()
            finally:
                self._middleware._submit_unclosed(record)

    def _forget_notes(self) -> None:
        # The thread's context goes back to what it held before the request: a thread
        # serves request after request in one context.  A close() from another context
        # (another thread) leaves it.
        token, self._notes_token = self._notes_token, None
        if token is not None:
            with suppress(ValueError):
                NOTES.reset(token)

    def _record(self) -> Record:
        environ = self._environ
        # The header fields the log reads, in an environ of their own: a queued record
        # holding the server's environ keeps its input stream, socket and every object
        # they reference alive until the writer takes it, which tripled the garbage
        # collector's work under gunicorn.  Values of text only are never tracked by it.
        pick_headers = self._middleware._pick_headers
        headers = environ if pick_headers is None else pick_headers(environ)
        # The duration by the monotonic clock, which no clock step can make negative.
        duration = perf_counter() - self._started
        received = time() - duration
        budget = self._middleware._budget
        bound = budget.bounded_environ
        # The C code measures picked fields against the budget as bounded_environ does
        # and calls it only when over; a whole environ is measured by it (limit -1).
        limit = -1 if pick_headers is None else budget.limit
        notes = self._notes
        if notes:
            # Cut to the budget's rest, as the record's path, query and headers leave it:
            # a whole environ holds its path and query among its text values.
            notes = budget.notes(
                notes,
                "" if pick_headers is None else environ.get("PATH_INFO", ""),
                "" if pick_headers is None else environ.get("QUERY_STRING", ""),
                headers,
            )
        else:
            notes = None
        # The application has run: what it left in the environ is there to learn.
        learn = self._middleware._extras
        extras = None if learn is None else learn(environ, self._completed, self._trace)
        record = None if _compiled_environ_record is None else _compiled_environ_record(
            Record, environ, received, duration, self._status, self._sent, headers,
            self._response_headers, bound, limit, notes, extras,
        )  # fmt: skip
        if record is None:
            record = environ_record(
                environ, received, duration, self._status, self._sent, headers,
                self._response_headers, bound, notes, extras,
            )  # fmt: skip
        return record


class _LearningExchange(_Exchange):
    """The exchange of a log that reads ``completed`` or ``bytes_received``, which only
    the exchange sees: whether the server asked for the body's next chunk after the
    last, and what the application read of ``wsgi.input``."""

    __slots__ = ("_input",)

    def __init__(
        self, environ: Environ, start_response: StartResponse, middleware: AccessLogMiddleware
    ) -> None:
        super().__init__(environ, start_response, middleware)
        self._input: CountingReader | None = None
        if middleware._counts_received and "wsgi.input" in environ:
            # Before the application runs: what it reads, it reads through the wrapper.
            self._input = environ["wsgi.input"] = CountingReader(environ["wsgi.input"])

    def __iter__(self) -> Iterator[bytes]:
        # A list chunk by chunk too: taking its last chunk is not the end of sending it.
        return self._counting(self.body)

    def _exhausted(self) -> None:
        # The server asked for the chunk after the last: it sent the whole body.
        self._completed = True
        super()._exhausted()

    def _record(self) -> Record:
        record = super()._record()
        counted = self._input
        if counted is None:
            return record
        return record._replace(extras=with_bytes_received(record.extras, counted.bytes_read))


def _status_code(status: object) -> int:
    """The code of a WSGI status line, as ``_Exchange.start_response`` finds it (the C
    path calls this for a line not in the table)."""
    if not isinstance(status, str):
        return 0  # see _parsed_status_code
    return _STANDARD_STATUS_CODES.get(status) or _parsed_status_code(status)


def _parsed_status_code(status: object) -> int:
    """The code a WSGI status line such as ``"299 Custom"`` starts with; 0 if none.

    Callers look the line up in ``_STANDARD_STATUS_CODES`` first and parse only what
    that misses.  Anything but a str (an int, which PEP 3333 does not allow) is 0 too:
    the server refuses it with its own error, which boundlog must not replace with one
    of its own.
    """
    if not isinstance(status, str):
        return 0
    code = status[:3]
    return int(code) if code.isascii() and code.isdigit() else 0


def _header_picker(keys: Sequence[str]) -> HeaderPicker:
    """A function that copies the environ variables ``keys`` (of header fields).

    The combined format's two fields (Referer and User-Agent) get a dict display of
    their own: it costs a fifth of ``dict(zip(keys, map(environ.get, keys)))`` with
    ``strict=True``, and half a comprehension.
    """
    if len(keys) == 2:
        first, second = keys
        return lambda environ: {first: environ.get(first), second: environ.get(second)}
    return lambda environ: {key: environ.get(key) for key in keys}


if _core.wsgi_middleware is not None:

    class _CompiledAccessLogMiddleware(_core.wsgi_middleware, AccessLogMiddleware):  # type: ignore[misc,valid-type]
        """AccessLogMiddleware with its request path in C (csrc/paths/wsgi_*.c): the same
        records, responses and exceptions (``tests/speedups/test_speedups_wsgi.py``)."""

        def __init__(self, app: WSGIApp, log: AccessLog | None = None, **options: Any) -> None:
            super().__init__(app, log, **options)
            picked = self._picked_keys
            self.bind(
                reference_call=MethodType(AccessLogMiddleware.__call__, self),
                handoff=self.log._offer,
                submit=self._submit,
                status_code=_status_code,
                status_codes=_STANDARD_STATUS_CODES,
                picked_keys=picked,
                bound=self._budget.bounded_environ,
                python_record=environ_record,
                record_type=Record,
                perf_counter=perf_counter,
                wall_clock=time,
                keeps_response_headers=self._keeps_response_headers,
                notes=self._notes_var,
                extras=self._extras,
                request_ids=None if self._request_ids is None else self._request_ids.wsgi,
                trace=self._trace,
                counting_input=CountingReader if self._counts_received else None,
                no_extras=NO_EXTRAS,
                # The C code measures picked fields against the budget; a whole environ
                # is measured by bounded_environ (limit -1), as in _Exchange._record.
                limit=-1 if picked is None else self._budget.limit,
                # As _LearningExchange takes a list or tuple body.
                counts_chunks=self._learns,
            )
