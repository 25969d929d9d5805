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

Lifespan and websocket scopes go to the application untouched, but the middleware
watches the lifespan shutdown: before the server hears that shutdown is complete, an
owned log is closed and a borrowed one flushed (see ``_draining_on_shutdown``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, MutableMapping
from time import time
from typing import Any

from ._budget import FIELD_OVERHEAD, RecordBudget
from ._log import AccessLog, log_for_middleware
from ._record import Record

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


class AccessLogMiddleware:
    """Log every HTTP request that passes through ``app``.

    Give it an :class:`~boundlog.AccessLog` as ``log``, or the options of one (``sink``,
    ``format``, ``policy``, ...) to let the middleware build and own its log.
    """

    def __init__(self, app: ASGIApp, log: AccessLog | None = None, **options: Any) -> None:
        self.app = app
        self.log, self.owns_log = log_for_middleware(log, options)
        self._offer = self.log.offer
        self._submit_async = self.log.submit_async
        self._keeps_response_headers = self.log.reads_response_headers
        self._budget = self.log.record_budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                send = self._draining_on_shutdown(send)
            await self.app(scope, receive, send)
            return

        received = time()
        status = 0
        sent = 0
        # The start message, until the record is handed over; then _FINISHED.
        response: Message = _NO_RESPONSE

        # The closure reads the log's methods through self: every name it shares with
        # this frame is a cell made per request, so it shares only what it must.
        def counting_send(message: Message) -> Awaitable[None]:
            # Runs on the event loop for every message: no formatting, no I/O, no lock.
            nonlocal status, sent, response
            kind = message["type"]
            if kind == "http.response.body":
                sent += len(message.get("body", b""))
                if message.get("more_body", False) or response.get("trailers", False):
                    return send(message)
            elif kind == "http.response.start":
                status = message["status"]
                response = message
                return send(message)
            elif kind == "http.response.trailers":
                if message.get("more_trailers", False):
                    return send(message)
            elif kind == "http.response.pathsend":
                sent = _file_size(response, message)
            else:
                return send(message)
            entry = _record(
                scope, received, status, sent, response, self._keeps_response_headers, self._budget
            )
            response = _FINISHED
            if self._offer(entry):
                return send(message)
            return self._admit_then(entry, send, message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            if response is not _FINISHED:
                # The response never finished: the app raised, or returned early because
                # the client left.  A server answers 500 when no response had started.
                entry = _record(
                    scope,
                    received,
                    status or 500,
                    sent,
                    response,
                    self._keeps_response_headers,
                    self._budget,
                )
                await self._submit_async(entry)

    async def _admit_then(self, entry: Record, send: Send, message: Message) -> None:
        # Off the fast path: the queue was full, so apply the policy (count the drop, or
        # wait for room) before the last message goes out.  ``send`` is called only
        # after that: some servers (granian) send a message when ``send`` is called, not
        # when its awaitable is awaited, and a response already on its way would let the
        # client go on while this request waits, so ``wait`` would hold no client back
        # and waiting requests would pile up without bound.
        await self._submit_async(entry)
        await send(message)

    def _draining_on_shutdown(self, send: Send) -> Send:
        # Some servers never run atexit handlers: uvicorn ends by re-raising SIGTERM on
        # itself.  The lifespan shutdown is the last moment the log can be drained, so
        # an owned log is closed there and a borrowed one is flushed.
        drain = self.log.close if self.owns_log else self.log.flush

        async def send_after_draining(message: Message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                await asyncio.get_running_loop().run_in_executor(None, drain)
            await send(message)

        return send_after_draining


def _record(
    scope: Scope,
    received: float,
    status: int,
    sent: int,
    response: Message,
    keeps_response_headers: bool,
    budget: RecordBudget,
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
    # The wall clock measures the duration too: one clock read fewer per request, at
    # the price of a wrong duration in the rare request that spans a clock step.
    # A plain tuple in Record's field order: the NamedTuple constructor would cost a
    # Python-level call per request, and the writer reads fields by position anyway.
    return (  # type: ignore[return-value]
        received, time() - received, client[0] if client else None,
        scope["method"], path, query, _PROTOCOLS.get(version) or "HTTP/" + version,
        # The request's header list goes as it is: picking out the fields the log
        # reads costs the request path more than it saves the writer (callgrind:
        # +5.5k instructions here, -7k on the writer).  The response's goes only to
        # a log that reads it, not to keep an application's list alive for nothing.
        status, sent, headers,
        response.get("headers", ()) if keeps_response_headers else (),
    )  # fmt: skip


def _file_size(response: Message, message: Message) -> int:
    # pathsend hands the server a file instead of body bytes: the response carries its
    # Content-Length when the application set one, else the whole file.
    for name, value in response.get("headers", ()):
        if name.lower() == _CONTENT_LENGTH:
            return int(value)
    try:
        return os.stat(message["path"]).st_size
    except OSError:
        return 0
