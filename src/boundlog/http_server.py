"""http.server: a mixin that writes a handler's access log through boundlog.

Put :class:`AccessLogMixin` first among the bases of a request handler::

    class Handler(AccessLogMixin, SimpleHTTPRequestHandler):
        access_log = AccessLog("access.log", format="json")

Every request the handler answers, error responses included, becomes one record,
submitted once the response is written, with the body bytes counted as they are
written.  ``log_request`` no longer writes the stderr line; ``log_error`` and
``log_message`` keep theirs.  Without an ``access_log`` the class builds one on first use
from ``access_log_options`` and, for the options it does not give, the ``BOUNDLOG_*``
variables of the environment (see ``_environment``; by default: stdout, combined).

For a log that reads them, a record's extras say whether the response completed (the
handler returned: a write to a client that went away, or the handler, raised otherwise)
and how many bytes of the request body the handler read from ``rfile``, which is then
wrapped to count them (from the end of the request's header fields on).

http.server has no graceful stop of its own and Python's default ``SIGTERM`` action
ends the process without running exit handlers; install a handler that stops the server
(see docs/wsgi.md) so that the exit handlers drain the log.
"""

from __future__ import annotations

import io
import threading
from http.server import BaseHTTPRequestHandler
from time import perf_counter, time
from typing import TYPE_CHECKING, ClassVar, cast

from .capture._counting import CountingReader
from .engine._environment import log_for_middleware
from .engine._log import AccessLog, LogOptions
from .record._record import Extras, Record, new_extras, new_record

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

_building = threading.Lock()
# The extras the mixin learns.
_LEARNED = frozenset({"completed", "bytes_received"})


class AccessLogMixin(BaseHTTPRequestHandler):
    """Log each request a ``BaseHTTPRequestHandler`` answers to a boundlog AccessLog."""

    #: The log the handler writes to; built from ``access_log_options`` when None.
    access_log: ClassVar[AccessLog | None] = None
    #: The :class:`~boundlog.AccessLog` options used to build the log on first use.
    access_log_options: ClassVar[LogOptions] = {}

    wfile: _CountingWriter
    # Counting what the handler reads, for a log that reads bytes_received; else None.
    _counted: CountingReader | None
    # Where the request's body starts in what _counted counted; -1 until the request's
    # header fields are read (a request line too long to read has no body read).
    _body_read_start: int
    _status: int
    # When the request was received, by the monotonic clock; 0.0 until then.
    _started: float
    _body_start: int
    # The response's header fields, kept only for a log that reads them.
    _response_headers: list[tuple[str, str]] | None

    @classmethod
    def _log(cls) -> AccessLog:
        log = cls.access_log
        if log is None:
            with _building:
                log = cls.access_log
                if log is None:
                    log, _ = log_for_middleware(None, dict(cls.access_log_options))
                    cls.access_log = log
        return log

    def setup(self) -> None:
        super().setup()
        self.wfile = _CountingWriter(self.wfile)
        self._counted = None
        if "bytes_received" in self._log().reads_extras:
            self._counted = CountingReader(self.rfile)
            # Not a BufferedIOBase, but it reads like one: what it does not count, the
            # handler's own rfile does.
            self.rfile = cast(io.BufferedIOBase, self._counted)

    def handle_one_request(self) -> None:
        log = self._log()
        self._status = 0
        self._started = 0.0
        self._body_start = self.wfile.count
        self._response_headers = [] if log.reads_response_headers else None
        self._body_read_start = -1
        completed = False
        try:
            super().handle_one_request()
            completed = True
        except Exception:
            if not self._status and self._started:
                # The handler raised before responding: http.server drops the
                # connection, which is logged as the 500 other servers would send.
                self._status = 500
            raise
        finally:
            if self._status:
                extras = self._extras(log, completed) if log.reads_extras else None
                log.submit(self._record(extras))

    def parse_request(self) -> bool:
        self._started = perf_counter()
        parsed = super().parse_request()
        if self._counted is not None:
            # The header fields are read, or the request refused: what the handler reads
            # next is the body.
            self._body_read_start = self._counted.bytes_read
        return parsed

    def _extras(self, log: AccessLog, completed: bool) -> Extras | None:
        reads = log.reads_extras
        if not reads & _LEARNED:
            return None
        counted, start = self._counted, self._body_read_start
        return new_extras(Extras, (
            None, None, completed if "completed" in reads else None,
            None if counted is None else 0 if start < 0 else counted.bytes_read - start, None, None,
        ))  # fmt: skip

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Remember the status ``send_response`` sends; the record is made when it is done."""
        if isinstance(code, int):
            self._status = int(code)
            # A request line too long to read is answered before it is parsed.
            self._started = self._started or perf_counter()

    def send_header(self, keyword: str, value: str) -> None:
        super().send_header(keyword, value)
        if self._response_headers is not None:
            self._response_headers.append((keyword, str(value)))

    def end_headers(self) -> None:
        super().end_headers()
        self._body_start = self.wfile.count

    def _record(self, extras: Extras | None) -> Record:
        # http.server decodes the request line and headers as latin-1: encoding them
        # back recovers the bytes the client sent.  The target comes from the request
        # line, because ``self.path`` collapses a leading "//".
        words = self.requestline.split()
        target = words[1] if len(words) >= 2 else ""
        text_path, _, text_query = target.partition("?")
        message = getattr(self, "headers", None)
        # What the client sent, cut down if it is over the log's budget (see _budget).
        path, query, headers = self._log().record_budget.bounded(
            text_path.encode("latin-1"),
            text_query.encode("latin-1"),
            () if message is None else message.items(),
        )
        address = self.client_address
        # The duration by the monotonic clock, which no clock step can make negative.
        duration = perf_counter() - self._started
        return new_record(Record, (
            time() - duration, duration,
            address[0] if isinstance(address, tuple) else None,
            self.command or "-", path, query,
            self.request_version or "-", self._status, self.wfile.count - self._body_start,
            headers, self._response_headers or (), None, extras,
        ))  # fmt: skip


class _CountingWriter(io.BufferedIOBase):
    """The handler's ``wfile``, counting the bytes written through it."""

    def __init__(self, raw: io.BufferedIOBase) -> None:
        super().__init__()
        self._raw = raw
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer, /) -> int:
        written = self._raw.write(data)
        self.count += written
        return written

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        # IOBase.close flushes first, which must reach the raw writer while it is open.
        try:
            super().close()
        finally:
            self._raw.close()
