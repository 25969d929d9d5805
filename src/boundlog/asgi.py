"""ASGI middleware: one record per HTTP request, handed over when the response ends.

The middleware wraps ``send`` in a plain function that returns the server's own
awaitable instead of an ``async def`` wrapper: that saves creating and running a
coroutine for every message, which measured as the largest cost of a naive wrapper.

A record is completed at the first of:

* the last body message (``more_body`` false), or the last trailers message when the
  response announced trailers, or an ``http.response.pathsend``;
* the application returning without finishing the response (the client went away, or it
  never started one: the server then answers 500, and so does the record);
* the application raising: status 500 if no response had started, else the status that
  was sent, with the bytes sent so far; the exception propagates unchanged.

A websocket session gets one record too, when the application returns or raises: its
handshake's status (101, 403 for a refusal, 500 when the application answered nothing),
its duration, the bytes of its frames and, for a log that reads it, its close code (see
``_websocket``); the log's ``websockets=False`` lets sessions through unrecorded.

Lifespan scopes go to the application, with no record, but the middleware watches the
lifespan shutdown: before the server hears that shutdown is complete, an owned log is
closed and a borrowed one flushed (see ``_draining_on_shutdown``), once the records held
for applications still running after their responses are handed over (at most
``close_timeout``: see ``_held_records_ended``).  An application that
refuses the lifespan scope (it raises, or returns, before receiving its first message:
Django's handler does) gets the middleware's own answer instead, so that its log is
drained too; see ``_lifespan``.

A log that cannot be built (a missing directory, a misspelt format) raises at once when
the middleware is made at import time.  Frameworks that build their middleware lazily
(Starlette and FastAPI's ``add_middleware``) make it inside the server's first call, the
lifespan startup, where an exception reads to uvicorn's default ``--lifespan auto`` as
"lifespan unsupported": the server would go on answering 500 to every request.  Made
inside a running event loop, the middleware therefore keeps the error, answers the
lifespan startup with ``lifespan.startup.failed`` and the reason, which stops the
server, and raises the error for any request a server without lifespan sends it.

With ``request_id=True`` (or a header name), each HTTP request gets an id in that
request header, the client's or a new one, and its response carries it back (see
``_request_id``); websocket sessions get none.

With the C core (``_core``), ``AccessLogMiddleware(...)`` makes a
``_CompiledAccessLogMiddleware``, whose HTTP requests take the same path in C
(csrc/paths/asgi_*.c); this module stays its reference, and the C code calls back into it
for everything rare, and into ``_request_id`` for the request ids.  For a log that
reads ``bytes_received`` (the body bytes of the ``http.request`` messages the
application received), both paths hand the application a ``_CountingReceive`` instead
of the server's ``receive``; for any other log, the server's goes through untouched.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from time import perf_counter, time
from types import MethodType
from typing import TYPE_CHECKING, Any, Self

from . import _core
from ._errors import AccessLogError, report_on_stderr
from .capture._extras import NO_EXTRAS, learner, with_bytes_received
from .capture._websocket import Session
from .engine._environment import log_for_middleware, request_ids_for_middleware
from .engine._log import AccessLog, LogOptions
from .record._budget import FIELD_OVERHEAD, RecordBudget
from .record._notes import NOTES
from .record._record import Extras, Record, new_record
from .sinks._logging import reaches_a_handler

if TYPE_CHECKING:
    # In typing from 3.12; only a type checker reads it (annotations are not evaluated).
    from typing_extensions import Unpack

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_CONTENT_LENGTH = b"content-length"
# granian reports HTTP/1.0 as "1", which the ASGI spec does not allow.
_PROTOCOLS = {"1.1": "HTTP/1.1", "2": "HTTP/2", "1.0": "HTTP/1.0", "1": "HTTP/1.0", "3": "HTTP/3"}
# What ``response`` holds until the application starts one.
_NO_RESPONSE: Message = {}
# What ``response`` holds once the record is handed over.
_FINISHED: Message = {}


# How often the lifespan's shutdown looks whether the held records were handed over,
# and how long it waits for them at most (close_timeout if shorter).
_HELD_RECORDS_POLL = 0.01
_HELD_RECORDS_WAIT_LIMIT = 30.0


class AccessLogMiddleware:
    """Log every HTTP request and websocket session that passes through ``app``.

    Give it an :class:`~boundlog.AccessLog` as ``log``, or the options of one (``sink``,
    ``format``, ``policy``, ...) to let the middleware build and own its log.
    ``request_id=True`` gives each request an id in its X-Request-ID header (the
    client's, else a new one) and sends it back in the response's; a string names
    another header.
    """

    #: What an instance whose log could not be built becomes (see __init__).
    _unusable_class: type[AccessLogMiddleware]

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # The compiled request path when the C core is in use; a subclass keeps this
        # class's pure-Python one.
        if cls is AccessLogMiddleware and _core.asgi_middleware is not None:
            cls = _CompiledAccessLogMiddleware
        return super().__new__(cls)

    def __init__(
        self,
        app: ASGIApp,
        log: AccessLog | None = None,
        *,
        request_id: bool | str | None = None,
        **options: Unpack[LogOptions],
    ) -> None:
        self.app = app
        try:
            # Checked before a log is built, which a bad option would leave open.
            self._request_ids = request_ids_for_middleware(log, request_id)
            self.log, self.owns_log = log_for_middleware(log, options, request_ids=True)
        except AccessLogError as error:
            if not _inside_event_loop():
                raise
            # Made lazily by a framework, inside the server's first call: see the module
            # docstring.  A class of its own keeps the check off every request's path.
            self.__class__ = self._unusable_class
            self.error = error
            return
        self._offer = self.log._offer
        self._submit_async = self.log.submit_async
        self._keeps_response_headers = self.log.reads_response_headers
        self._budget = self.log.record_budget
        # Set for each request only when the log reads notes (see _notes).
        self._notes_var = NOTES if self.log.reads_notes else None
        # Records held until their applications return, on this module's request path
        # (a log reading notes; the C path counts its own): see _held_records_ended.
        self._held_here = 0
        self._held_lock = threading.Lock()
        # What the log's format reads of a record's extras, learnt when the response
        # ends (see _extras); None for a log that reads none.
        self._extras = learner(self.log.reads_extras, self.log.environ_names, self._budget.limit)
        self._logs_websockets = self.log.websockets
        # Learning a close code means watching every message the application receives.
        self._reads_close_code = "close_code" in self.log.reads_extras
        # So does counting the request body's bytes (both request paths).
        self._counts_received = "bytes_received" in self.log.reads_extras
        if self.owns_log and not self.log._drains_on_sigterm and _called_by_uvicorn():
            _warn_if_built_in_an_http_call()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self._lifespan(scope, receive, self._draining_on_shutdown(send))
            elif scope["type"] == "websocket" and self._logs_websockets:
                await self._websocket(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return

        started = perf_counter()
        request_ids = self._request_ids
        request_id = b""
        if request_ids is not None:
            scope, request_id = request_ids.asgi_scope(scope)
        # The request's notes (boundlog.add_fields), when the log reads them.
        notes: dict[str, Any] | None = None
        if self._notes_var is not None:
            notes = {}
            self._notes_var.set(notes)
        status = 0
        sent = 0
        # The start message, until the record is handed over; then _FINISHED.
        response: Message = _NO_RESPONSE
        # The record of a response that ended, for a log that reads notes: held until
        # the application returns, so that the fields its background tasks add (they
        # run after the last body message, in the application's call) join it.
        held: Record | None = None
        counting = _CountingReceive(receive) if self._counts_received else None

        # The closure reads the log's methods through self: every name it shares with
        # this frame is a cell made per request, so it shares only what it must.
        def counting_send(message: Message) -> Awaitable[None]:
            # Runs on the event loop for every message: no formatting, no I/O, no lock.
            nonlocal status, sent, response, held
            if response is _FINISHED:
                # The response has ended: a server ignores what the application sends
                # after it (uvicorn raises), so it is no part of any record.
                return send(message)
            kind = message["type"]
            if kind == "http.response.body":
                sent += len(message.get("body", b""))
                if message.get("more_body", False) or response.get("trailers", False):
                    return send(message)
            elif kind == "http.response.start":
                status = message["status"]
                if not isinstance(status, int):
                    # No status code (a str, a float): the server refuses it, and a
                    # record's status is an int: 0, as for a WSGI line with no code (500
                    # if the response then never ends, as the server answers).
                    status = 0
                response = message
                return send(message)
            elif kind == "http.response.trailers":
                if message.get("more_trailers", False):
                    return send(message)
            elif kind == "http.response.pathsend":
                sent = _file_size(response, message)
            else:
                return send(message)
            learn = self._extras
            extras = None if learn is None else learn(scope, True)
            entry = _record(
                scope,
                started,
                status,
                sent,
                response,
                self._keeps_response_headers,
                self._budget,
                notes,
                extras if counting is None else with_bytes_received(extras, counting.received),
            )
            response = _FINISHED
            if notes is not None:
                held = entry
                self._count_held(1)
                return send(message)
            if self._offer(entry):
                return send(message)
            return self._admit_then(entry, send, message)

        try:
            await self.app(
                scope,
                receive if counting is None else counting,
                # The id goes into the start message before it is counted, so that the
                # record's response headers are those the server sends.
                counting_send
                if request_ids is None
                else request_ids.asgi_send(counting_send, request_id),
            )
        finally:
            if response is not _FINISHED:
                # The response never finished: the app raised, or returned early because
                # the client left.  A server answers 500 when no response had started.
                learn = self._extras
                extras = None if learn is None else learn(scope, False)
                entry = _record(
                    scope,
                    started,
                    status or 500,
                    sent,
                    response,
                    self._keeps_response_headers,
                    self._budget,
                    notes,
                    extras if counting is None else with_bytes_received(extras, counting.received),
                )
                await self._submit_async(entry)
            elif held is not None:
                self._count_held(-1)
                await self._submit_async(self._with_notes(held, notes))

    def _count_held(self, change: int) -> None:
        with self._held_lock:
            self._held_here += change

    def _records_held_now(self) -> int:
        # The C request path's count is its type's _records_held (a getset).
        return self._held_here + getattr(self, "_records_held", 0)

    async def _held_records_ended(self) -> None:
        """Wait, at the lifespan's shutdown, for the records held until their
        applications return, at most ``close_timeout``; say how many it did not get.

        uvicorn and hypercorn wait for their requests before the lifespan shuts down;
        granian stops its worker right after, without waiting for what applications go
        on doing after their responses (a Starlette BackgroundTask), whose records a log
        reading notes holds for the fields that work may add.  Their event loop still
        runs while the shutdown is awaited here.
        """
        if self._notes_var is None or not self._records_held_now():
            return
        loop = asyncio.get_running_loop()
        # close_timeout, but never for ever: that waits for a sink, this for application
        # code, which may never end.
        close_timeout = self.log._close_timeout
        timeout = (
            _HELD_RECORDS_WAIT_LIMIT
            if close_timeout is None
            else min(close_timeout, _HELD_RECORDS_WAIT_LIMIT)
        )
        deadline = loop.time() + timeout
        while self._records_held_now() and loop.time() < deadline:
            await asyncio.sleep(_HELD_RECORDS_POLL)
        left = self._records_held_now()
        if left:
            report_on_stderr(
                f"{self.log._sink.name}: {left} request(s) still running after their "
                f"responses when the server shut the application down (a background "
                f"task), {timeout} s later: their lines are lost"
            )

    def _with_notes(self, held: Record, notes: dict[str, Any] | None) -> Record:
        # A held record takes the request's notes as they are now, counted against
        # what it keeps of the client's bytes (csrc/paths/asgi_record.c too).
        return held._replace(
            notes=self._budget.notes(notes, held.path, held.query, held.request_headers)
        )

    def _submit_on_close(self, entry: Record) -> None:
        # For a request that cannot wait for room: a closed exchange (coroutine.close(),
        # which the finalizer of an exchange its server dropped calls, on whatever thread
        # the garbage collector runs: hence no lock; csrc/paths/asgi_exchange.c too).
        self.log._admission.offer_unlocked(entry)

    async def _admit_then(self, entry: Record, send: Send, message: Message) -> None:
        # Off the fast path: the queue was full, so apply the policy (count the drop, or
        # wait for room) before the last message goes out.  ``send`` is called only
        # after that: some servers (granian) send a message when ``send`` is called, not
        # when its awaitable is awaited, and a response already on its way would let the
        # client go on while this request waits, so ``wait`` would hold no client back
        # and waiting requests would pile up without bound.
        await self._submit_async(entry)
        await send(message)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = perf_counter()
        notes: dict[str, Any] | None = None
        if self._notes_var is not None:
            notes = {}
            self._notes_var.set(notes)
        session = Session()

        def watching_send(message: Message) -> Awaitable[None]:
            session.sending(message)
            return send(message)

        async def watching_receive() -> Message:
            message = await receive()
            session.receiving(message)
            return message

        watches_receive = self._reads_close_code or self._counts_received
        returned = False
        try:
            await self.app(scope, watching_receive if watches_receive else receive, watching_send)
            returned = True
        finally:
            # A session is complete when the application returned rather than raised.
            learn = self._extras
            extras = None if learn is None else learn(scope, returned)
            if self._reads_close_code:
                extras = (extras or NO_EXTRAS)._replace(close_code=session.close_code)
            if self._counts_received:
                extras = with_bytes_received(extras, session.received)
            entry = _record(
                # The handshake was a GET (RFC 6455 4.1); a websocket scope says neither
                # that nor, at times, its HTTP version, whose default the ASGI spec gives.
                {"method": "GET", "http_version": "1.1", **scope},
                started,
                session.status or 500,
                session.sent,
                session.response,
                self._keeps_response_headers,
                self._budget,
                notes,
                extras,
            )
            await self._submit_async(entry)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        # An application that ends its lifespan call without ever calling ``receive``
        # refuses the scope (Django raises ValueError at once).  The server would then
        # skip the lifespan (uvicorn's ``--lifespan auto``) or refuse to start
        # (``--lifespan on``), and the shutdown would drain nothing: uvicorn skips the
        # exit handlers too.  The middleware answers the lifespan itself in that case.
        # An application that received a message supports the lifespan: what it raises
        # then (a failed startup) reaches the server unchanged.
        received = False
        # Checked here, where the server starts the middleware, rather than when it is
        # built: a module may build one and have another app served.
        _warn_if_uvicorn_logs_too()

        def receiving() -> Awaitable[Message]:
            nonlocal received
            received = True
            return receive()

        try:
            await self.app(scope, receiving, send)
        except Exception:
            if received:
                raise
        if not received:
            await _answer_lifespan(receive, send)

    def _draining_on_shutdown(self, send: Send) -> Send:
        # Some servers never run atexit handlers: uvicorn ends by re-raising SIGTERM on
        # itself.  The lifespan shutdown is the last moment the log can be drained, so
        # an owned log is closed there and a borrowed one is flushed.
        drain = self.log.close if self.owns_log else self.log.flush

        async def send_after_draining(message: Message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                await self._held_records_ended()
                await asyncio.get_running_loop().run_in_executor(None, drain)
            await send(message)

        return send_after_draining


def _warn_if_uvicorn_logs_too() -> None:
    """Say on stderr, once a process, that uvicorn's own access log is on, when uvicorn
    is what calls.

    Forgetting ``--no-access-log`` doubles every line and uvicorn's cost per request,
    and uvicorn's lines show the query values boundlog redacts.  uvicorn's own state
    says whether its access log is on: ``--no-access-log`` empties the handlers of
    ``uvicorn.access`` and stops it propagating, and ``--log-level warning`` raises
    its level above the INFO it logs at.  Only a call from uvicorn's code counts, so
    that hypercorn or granian in a process that imported uvicorn hear nothing.
    """
    global _uvicorn_warned
    if _uvicorn_warned or not _called_by_uvicorn():
        return
    logger = logging.Logger.manager.loggerDict.get("uvicorn.access")
    if not isinstance(logger, logging.Logger):
        return
    if not logger.isEnabledFor(logging.INFO) or not reaches_a_handler(logger):
        return
    _uvicorn_warned = True
    report_on_stderr(
        "uvicorn's own access log is on too: each request is logged twice, at uvicorn's "
        "cost, and uvicorn's lines show the query values boundlog redacts; start uvicorn "
        "with --no-access-log (access_log=False in uvicorn.run; under gunicorn's "
        "UvicornWorker, without --access-logfile)"
    )


_uvicorn_warned = False


def _warn_if_built_in_an_http_call() -> None:
    """Say on stderr that nothing drains the log of a middleware that a framework builds
    in uvicorn's first call when that call is an HTTP request: the lifespan is off.

    A framework builds its middleware stack in its first call (Starlette's and
    FastAPI's ``add_middleware``), which is the lifespan's when uvicorn runs it.  In an
    HTTP call, the lifespan is off (``--lifespan off``), and so is the drain at its
    shutdown; uvicorn ends by re-raising SIGTERM on itself, which skips the exit
    handlers, and SIGTERM was uvicorn's when the log was built, so the log has no drain
    of its own (the caller checked): the lines of its last batch window would be lost
    without a word.  The call is the nearest caller whose ``scope`` is an ASGI scope.
    """
    frame = sys._getframe(2)
    while frame is not None:
        scope = frame.f_locals.get("scope")
        if isinstance(scope, dict) and "type" in scope:
            if scope["type"] == "http":
                report_on_stderr(
                    "the lifespan is off (uvicorn --lifespan off?): nothing drains the "
                    "access log of AccessLogMiddleware when uvicorn stops, and the lines "
                    "of its last moments are lost; run uvicorn with --lifespan auto (the "
                    "default) or on, or wrap the application where it is defined: "
                    "app = AccessLogMiddleware(app, ...)"
                )
            return
        frame = frame.f_back  # type: ignore[assignment]


def _called_by_uvicorn() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("uvicorn."):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class _CountingReceive:
    """``receive`` for a log that reads ``bytes_received``: it counts the body bytes of
    the ``http.request`` messages the application receives, which is what it read of
    the request's body (Apache's ``%I`` without the headers).  The C path makes one per
    request too, and reads ``received`` when it makes the record."""

    __slots__ = ("_receive", "received")

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.received = 0

    async def __call__(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
        return message


async def _answer_lifespan(receive: Receive, send: Send) -> None:
    # The lifespan of an application without one: startup and shutdown complete at
    # once (``send`` drains the log before the shutdown completes).
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _record(
    scope: Scope,
    started: float,
    status: int,
    sent: int,
    response: Message,
    keeps_response_headers: bool,
    budget: RecordBudget,
    notes: dict[str, Any] | None = None,
    extras: Extras | None = None,
) -> Record:
    client = scope.get("client")
    version = scope["http_version"]
    path = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    headers = scope["headers"]
    # What the record keeps of the client's bytes (_budget's client_bytes, inline to
    # save a call per request); only a record over the budget is cut down.  A header
    # container without len() takes the slow path.
    try:
        size = len(path) + len(query) + FIELD_OVERHEAD * len(headers)
        for name, value in headers:
            size += len(name) + len(value)
    except TypeError:
        size = budget.limit + 1
    if size > budget.limit:
        path, query, headers = budget.pairs(path, query, headers)
    # The duration by the monotonic clock, which no clock step can make negative; the
    # time the request was received by the wall clock, as lines show it.
    duration = perf_counter() - started
    return new_record(Record, (
        time() - duration, duration, client[0] if client else None,
        scope["method"], path, query, _PROTOCOLS.get(version) or "HTTP/" + version,
        # The request's header list goes as it is: picking out the fields the log
        # reads costs this path more than it saves the writer (counted with
        # callgrind: benchmarks/HISTORY.md); the C core's packed record copies only
        # those (csrc/record/packed.h).  The response's goes only to
        # a log that reads it, not to keep an application's list alive for nothing.
        status, sent, headers,
        response.get("headers", ()) if keeps_response_headers else (),
        # A copy, cut to the budget's rest: the application may add fields later.
        budget.notes(notes, path, query, headers), extras,
    ))  # fmt: skip


def _file_size(response: Message, message: Message) -> int:
    # pathsend hands the server a file instead of body bytes: the response carries its
    # Content-Length when the application set one, else the whole file is sent.
    for name, value in response.get("headers", ()):
        if name.lower() == _CONTENT_LENGTH:
            length = _content_length(value)
            if length is not None:
                return length
            break
    try:
        return os.stat(message["path"]).st_size
    except (OSError, ValueError):
        # ValueError: a path with a NUL byte.
        return 0


def _content_length(value: object) -> int | None:
    """The length a Content-Length value states, or None for a value that states none.

    RFC 9110 8.6 lets a recipient take a list of identical lengths (``12, 12``) as one.
    """
    if not isinstance(value, bytes):
        return None
    lengths = set(map(bytes.strip, value.split(b",")))
    if len(lengths) != 1:
        return None
    [length] = lengths
    if not length.isdigit():
        return None
    try:
        return int(length)
    except ValueError:  # more digits than int() reads (sys.get_int_max_str_digits)
        return None


def _inside_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _UnusableLogMiddleware(AccessLogMiddleware):
    """The middleware whose log could not be built inside a running event loop."""

    #: Why the log could not be built.
    error: AccessLogError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reason = f"boundlog: {self.error}"
        if scope["type"] == "lifespan":
            message = await receive()
            if message["type"] == "lifespan.startup":
                # Every ASGI server stops when its application's startup fails, and
                # prints the message.
                await send({"type": "lifespan.startup.failed", "message": reason})
                return
        # A server without lifespan support: each request fails, with the reason.  A
        # copy each time, because raising one instance again and again chains the
        # tracebacks of all the requests onto it.
        raise type(self.error)(*self.error.args) from None


AccessLogMiddleware._unusable_class = _UnusableLogMiddleware

if _core.asgi_middleware is not None:

    class _CompiledAccessLogMiddleware(_core.asgi_middleware, AccessLogMiddleware):  # type: ignore[misc,valid-type]
        """AccessLogMiddleware with its HTTP request path in C (csrc/paths/asgi_*.c).

        Servers find the reference ``async def __call__`` where they look for an ASGI 3
        application: the instance's ``__call__`` (uvicorn and hypercorn test it with
        ``inspect.iscoroutinefunction``, and a C callable is not a coroutine function).
        Calling the instance runs the C type's call instead, which gives the same
        records, messages and exceptions (``tests/speedups/test_speedups_asgi.py``) and calls
        back into this module for everything rare.
        """

        def __init__(self, app: ASGIApp, log: AccessLog | None = None, **options: Any) -> None:
            super().__init__(app, log, **options)
            if isinstance(self, _UnusableLogMiddleware):
                return
            reference = MethodType(AccessLogMiddleware.__call__, self)
            self.__call__ = reference  # type: ignore[method-assign]
            ids = self._request_ids
            self.bind(
                reference_call=reference,
                handoff=self.log._offer,
                admit_then=self._admit_then,
                submit_unfinished=self._submit_unfinished,
                submit_on_close=self._submit_on_close,
                python_record=_record,
                file_size=_file_size,
                record_type=Record,
                protocols=_PROTOCOLS,
                budget=self._budget,
                perf_counter=perf_counter,
                wall_clock=time,
                keeps_response_headers=self._keeps_response_headers,
                notes=self._notes_var,
                extras=self._extras,
                request_scope=None if ids is None else ids.asgi_scope,
                request_start=None if ids is None else ids.asgi_start,
                # Only a log that reads the request body's bytes has receive wrapped.
                counting_receive=_CountingReceive if self._counts_received else None,
                no_extras=NO_EXTRAS,
            )

        async def _submit_unfinished(self, entry: Record, error: BaseException | None) -> None:
            # The application ended without ending its response, or with the record of
            # one held (a log reading notes), and the queue had no room: the
            # reference's finally block, from its await on.
            await self._submit_async(entry)
            if error is not None:
                raise error

    class _UnusableCompiledLogMiddleware(_core.asgi_middleware, _UnusableLogMiddleware):  # type: ignore[misc,valid-type]
        """What a _CompiledAccessLogMiddleware whose log could not be built becomes."""

        __call__ = _UnusableLogMiddleware.__call__

    _CompiledAccessLogMiddleware._unusable_class = _UnusableCompiledLogMiddleware
