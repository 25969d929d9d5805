"""``sink="otlp+http://HOST:PORT"``: each batch one OTLP/HTTP POST to a collector.

The writer formats and writes as for any sink.  The sink's own format step
(:meth:`OtlpSink.messages`) writes each record's line in the ``otel`` schema preset,
which the writer counts as it counts any lines, and keeps each record's LogRecord
(``_logs``) for :meth:`OtlpSink.write`, which sends them in one
``ExportLogsServiceRequest``, or in several when their LogRecords come to more than
:data:`MOST_REQUEST_BYTES` (or the collector answers 413: the request is sent again in
halves).  A 2xx answer means written, less the records its
``partial_success`` says were rejected, which are failed; 429, 502, 503 and 504 and a
connection that fails are retried, with a growing pause or the one ``Retry-After``
asks for, while later records wait in the bounded queue (the log's policy deciding);
any other answer fails the request's records, as a collector that refuses it would
refuse it again, the report saying the collector's reason.
"""

from __future__ import annotations

import collections
import contextlib
import email.utils
import gzip
import http.client
import json
import math
import os
import random
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from ..._errors import ConfigurationError, report_on_stderr
from ..._version import __version__
from ...formats._schemas import SchemaFormat
from ...record._record import Record
from .._network import cause_of
from .._outages import OutageReports
from .._pathless import Pathless
from .._urls import OTLP_SCHEMES, refuse_blanks
from ._logs import (
    export_request,
    json_export_request,
    json_log_record_bytes,
    log_record,
    rejected,
    rejected_json,
    resource,
    resource_attributes,
)
from ._protobuf import fields

#: Where ``sink="otlp"`` sends when no variable says: a collector on this host.
DEFAULT_ENDPOINT = "http://localhost:4318/v1/logs"
#: OTLP's default timeout of an export, in seconds (``OTEL_EXPORTER_OTLP_TIMEOUT``: ms).
DEFAULT_TIMEOUT = 10.0
#: The answers the OTLP/HTTP specification says to retry.
RETRYABLE = frozenset({429, 502, 503, 504})
#: The most bytes of encoded LogRecords (before compression) one request carries: a
#: batch whose records come to more goes out in several requests, a record never split.
#: Well under the 20 MiB the OpenTelemetry Collector's OTLP/HTTP receiver takes by
#: default (``max_request_body_size``): a batch of records each grown by a hostile
#: client's escaped header values would otherwise be refused whole, with the records
#: of every other client in it.
MOST_REQUEST_BYTES = 4 << 20
#: The most bytes of an answer read: a longer one's rest is left unread (and its
#: connection closed), so that a collector, or a file server at that URL, that answers
#: with megabytes costs the writer no more than this.  A partial_success is a few bytes.
MOST_ANSWER_BYTES = 64 << 10
#: The most characters of the collector's reason said in a report.
MOST_REASON_CHARACTERS = 200
#: The first pause before a retry, and the longest.
FIRST_PAUSE = 0.5
LONGEST_PAUSE = 30.0


def _unix_nanos(seconds: float) -> int:
    return int(seconds * 1e9) if math.isfinite(seconds) and 0 <= seconds < 1.8e10 else 0


#: The protocols ``OTEL_EXPORTER_OTLP_PROTOCOL`` may name, and what each sends.
PROTOCOLS = {"http/protobuf": "application/x-protobuf", "http/json": "application/json"}
#: What ``OTEL_EXPORTER_OTLP_COMPRESSION`` may name (the exporter specification's).
COMPRESSIONS = ("none", "gzip")
#: The fastest level: varied access-log records come to about a sixth of their bytes for
#: 1.7 µs a record of the writer's time; zlib's default (6) to an eighth, for 4.8 µs.
GZIP_LEVEL = 1


class _LogRecords:
    """The format step of a log writing to an :class:`OtlpSink`."""

    def __init__(self, pending: list[Any], json_records: bool, lines: SchemaFormat) -> None:
        self._pending = pending
        self._encode = json_log_record_bytes if json_records else log_record
        self._lines = lines
        self.request_header_names = self._lines.request_header_names
        self.response_header_names = self._lines.response_header_names
        self.reads_notes = True
        self.reads_extras = self._lines.reads_extras

    def format_batch(self, records: Sequence[Record]) -> bytes:
        data = self._lines.format_batch(records)
        # The lines as one JSON array, parsed by one call: half the cost of a call a
        # line.  A line never holds a newline (every value's is escaped).
        lines = json.loads(b"[" + data[:-1].replace(b"\n", b",") + b"]") if data else []
        observed = time.time_ns()
        entries = [
            self._encode(line, _unix_nanos(record.time), observed)
            for line, record in zip(lines, records, strict=True)
        ]
        # Kept only once the whole batch is built: the writer retries a batch that raised
        # record by record, and no record may be sent twice.
        self._pending.extend(entries)
        return data


class OtlpSink(Pathless):
    """A sink that POSTs each batch to an OpenTelemetry collector (OTLP/HTTP, protobuf).

    ``OtlpSink("otlp+http://collector:4318")`` sends to ``/v1/logs`` under the URL's
    path; ``OtlpSink("otlp")`` (``sink="otlp"``) reads the OpenTelemetry SDK's variables:
    ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` (the whole URL) or
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base), their ``_HEADERS``, ``_TIMEOUT``
    (milliseconds), ``_PROTOCOL`` (``http/protobuf``), ``_COMPRESSION`` (``gzip``)
    and ``_CERTIFICATE`` (a CA file),
    and ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` for the resource.

    ``request_headers`` and ``response_headers`` name header fields to send as the
    attributes ``http.request.header.<name>`` and ``http.response.header.<name>``
    (``["value"]``); credentials are ``[redacted]`` unless ``allow_headers`` names them.
    """

    retries = 0
    wakes_when_stopped = True

    def __init__(
        self,
        url: str = "otlp",
        *,
        environ: Mapping[str, str] | None = None,
        request_headers: Iterable[str] = (),
        response_headers: Iterable[str] = (),
        allow_headers: Iterable[str] = (),
    ) -> None:
        # Checked here, where a misspelt header name is the caller's mistake.
        self._lines = SchemaFormat(
            "otel",
            request_headers=request_headers,
            response_headers=response_headers,
            allow_headers=allow_headers,
        )
        env = os.environ if environ is None else environ
        settings = _settings(url, env)
        self.endpoint, self.protocol = settings.endpoint, settings.protocol
        #: What each request is sent with: its content type, and the variables' headers.
        self.headers = {"Content-Type": PROTOCOLS[settings.protocol]}
        if not any(name.lower() == "user-agent" for name in settings.headers):
            # What the exporter specification asks of an exporter: its name and version.
            self.headers["User-Agent"] = f"boundlog/{__version__}"
        self.headers.update(settings.headers)
        self.gzip = settings.compression == "gzip"
        if self.gzip:
            self.headers["Content-Encoding"] = "gzip"
        self.timeout = settings.timeout
        parts = urlsplit(self.endpoint)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._https else 80)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._context = _tls_context(settings) if self._https else None
        for note in settings.notes:
            report_on_stderr(note)
        self._attributes = resource_attributes(env)
        self._resource = resource(self._attributes)
        self.name = self.endpoint
        self.delivered = 0
        self._stopped = False
        # Each pending record's LogRecord, encoded (protobuf, or OTLP/JSON).
        self._pending: list[bytes] = []
        self._connection: http.client.HTTPConnection | None = None
        # The socket connecting, for close() giving up to shut down (http.client's
        # connection has none until the connect completes); taken and closed under the
        # lock, so that what is shut down is never a descriptor closed and reused.
        self._connecting: socket.socket | None = None
        self._connecting_lock = threading.Lock()
        self._wake = threading.Event()
        self._taken = False
        self._reports = OutageReports(self.name)
        self._waiting: Callable[[], int] = lambda: 0
        self._said_long_answer = False

    @property
    def stopped(self) -> bool:
        return self._stopped

    @stopped.setter
    def stopped(self, value: bool) -> None:
        # close() gave up: end a request in flight and a pause between attempts.
        self._stopped = value
        if value:
            self._wake.set()
            with self._connecting_lock:
                if self._connecting is not None:
                    with contextlib.suppress(OSError):
                        self._connecting.shutdown(socket.SHUT_RDWR)
            connection = self._connection
            if connection is not None and connection.sock is not None:
                with contextlib.suppress(OSError):
                    connection.sock.shutdown(socket.SHUT_RDWR)

    def messages(self, fmt: object) -> _LogRecords:
        """The format step of a log writing to this sink (the log's format does not
        apply: a collector gets LogRecords, not lines)."""
        if self._taken:
            raise ConfigurationError(
                f"{self!r} already serves a log: give each log an OtlpSink of its own"
            )
        self._taken = True
        return _LogRecords(self._pending, self.protocol == "http/json", self._lines)

    def write(self, data: bytes) -> tuple[int, OSError | None]:
        """Send the batch's LogRecords, in as many requests as :data:`MOST_REQUEST_BYTES`
        asks (a request answered 413 again in halves), retrying what may be retried,
        until answered or stopped; return how far into ``data`` the written lines go
        (as many lines as the collector kept: it does not say which), and what failed."""
        pending, self._pending[:] = self._pending[:], []
        if not pending:
            return len(data), None
        parts = collections.deque(_parts(pending, MOST_REQUEST_BYTES))
        kept = 0
        failures: list[str] = []
        while parts:
            start, end = parts.popleft()
            answer = self._send(pending[start:end], len(pending) - start)
            if answer is None:
                break  # stopped: close() counts what was delivered
            status = answer.status
            if status == 413 and end - start > 1:
                # Too big for the collector: each half is a request of its own.
                middle = (start + end) // 2
                parts.extendleft(((middle, end), (start, middle)))
                continue
            if status == 413:
                failures.append(
                    f"the collector refused a record of {len(pending[start])} bytes "
                    "as too large (HTTP 413)"
                )
                continue
            written, failure = self._answered(end - start, answer)
            kept += written
            self.delivered = _line_end(data, kept)
            if failure:
                failures.append(failure)
        if not failures and kept == len(pending):
            return len(data), None
        # The first failure said, the others counted: a batch of hostile records could
        # have hundreds refused alone.
        more = len(failures) - 1
        said = (
            (failures[0] + (f" (and {more} more failed request(s))" if more > 0 else ""))
            if failures
            else "stopped"
        )
        return _line_end(data, kept), OSError(said)

    def _send(self, records: list[bytes], unsent: int) -> _Answer | None:
        """One request of ``records``, retried while the collector is busy or away:
        the answer not retried, or None once stopped (``unsent``: the batch's records
        not yet answered, for reports)."""
        if self.protocol == "http/json":
            body = json_export_request(self._attributes, records)
        else:
            body = export_request(self._resource, records)
        if self.gzip:
            body = gzip.compress(body, GZIP_LEVEL, mtime=0)
        pause = FIRST_PAUSE
        while not self._stopped:
            self._wake.clear()
            try:
                answer = self._post(body)
            except (OSError, http.client.HTTPException) as error:
                self._disconnect()
                if self._stopped:
                    break
                wait = pause * random.uniform(0.5, 1.0)
                self._failed(f"cannot send to {self.name}: {cause_of(error)}", wait, unsent)
            else:
                if answer.status in RETRYABLE:
                    # The growing pause is the least: a Retry-After of 0 or of a past
                    # date would have the writer ask again at once, as fast as the
                    # collector answers, while it asks clients to back off.
                    retry_after = answer.retry_after
                    wait = pause if retry_after is None else max(retry_after, pause)
                    reason = _reason(answer)
                    self._failed(
                        f"{self.name} answered HTTP {answer.status}"
                        + (f": {reason}" if reason else ""),
                        wait,
                        unsent,
                    )
                else:
                    self._reports.recovered()
                    return answer
            pause = min(LONGEST_PAUSE, pause * 2)
            # Not cleared here: a hurry() that came during the attempt skips this wait.
            self._wake.wait(wait)
        return None

    def _answered(self, sent: int, answer: _Answer) -> tuple[int, str]:
        """What an answer that is not retried means for a request of ``sent`` records:
        how many the collector kept, and what failed (``""``: nothing)."""
        if not 200 <= answer.status < 300:
            # 400, 401, 404, 500...: the same request would be refused again.
            return 0, self._refusal(answer)
        if not answer.whole:
            if not self._said_long_answer:
                self._said_long_answer = True
                report_on_stderr(
                    f"{self.name} answers with more than {MOST_ANSWER_BYTES >> 10} KiB: "
                    "its records count as written, and a partial_success in it is not read"
                )
            return sent, ""
        read = rejected_json if self.protocol == "http/json" else rejected
        try:
            count, message = read(answer.body)
        except ValueError:
            count, message = 0, ""
        if count <= 0:
            return sent, ""
        # Which ones it does not say: as many lines as were kept count as written.
        return max(0, sent - count), (
            f"{self.name} rejected {count} record(s): {message or 'no reason given'}"
        )

    def _failed(self, what: str, wait: float, unsent: int) -> None:
        """Count a failed attempt, and say so on stderr now and then."""
        self.retries += 1
        self._reports.failed(what, wait, self._waiting() + unsent)

    def outage(self) -> str | None:
        """What the last failed attempt to reach the receiver said, while it is away."""
        return self._reports.last_failure

    def watch_backlog(self, waiting: Callable[[], int]) -> None:
        """Learn how to count the records waiting behind this sink, for reports."""
        self._waiting = waiting

    def hurry(self) -> None:
        self._wake.set()

    def after_fork(self) -> None:
        self._connection = None
        self._pending.clear()

    def close(self) -> None:
        self._disconnect()

    def _refusal(self, answer: _Answer) -> str:
        """What a refusal says: the status, the collector's reason, and a hint."""
        status = answer.status
        reason = _reason(answer)
        words = f"the collector answered HTTP {status}" + (f": {reason}" if reason else "")
        if status in (401, 403):
            words += (
                "; check the credentials it asks for: OTEL_EXPORTER_OTLP_HEADERS, "
                "e.g. Authorization=Bearer <token> or api-key=<key>"
            )
        elif status == 404 and self._target.split("?")[0].endswith("/v1/logs/v1/logs"):
            words += (
                "; boundlog adds /v1/logs to the path of a sink URL (and of "
                "OTEL_EXPORTER_OTLP_ENDPOINT): drop /v1/logs from it"
            )
        elif 300 <= status < 400:
            location = _printable(answer.location)
            words += (
                f"; it redirects to {location}: point the sink there"
                if location
                else " (a redirect without a Location)"
            )
        return words

    def _post(self, body: bytes) -> _Answer:
        # A connection kept from an earlier request that fails before any byte of an
        # answer came was most likely closed by the collector (or a load balancer) while
        # idle: sent again at once on a new one, as urllib3 and the SDK do, not reported
        # as the collector failing.  A new connection's failure is the collector's.
        reused = self._connection is not None and self._connection.sock is not None
        try:
            response = self._request(body)
        except (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError):
            # (http.client's RemoteDisconnected, no status line at all, is a
            # ConnectionResetError.)
            if not reused or self._stopped:
                raise
            self._disconnect()
            response = self._request(body)
        # At most MOST_ANSWER_BYTES (and one more, to know): whatever the collector (or
        # a file server at that URL) sends, the writer holds no more.
        answer = response.read(MOST_ANSWER_BYTES + 1)
        if not response.isclosed():
            # Left unread: the connection cannot carry another request.
            self._disconnect()
        return _Answer(
            response.status,
            answer[:MOST_ANSWER_BYTES],
            len(answer) <= MOST_ANSWER_BYTES,
            response.getheader("Content-Type") or "",
            response.getheader("Location") or "",
            _retry_after(response.getheader("Retry-After")),
        )

    def _request(self, body: bytes) -> http.client.HTTPResponse:
        """Send ``body``, and read the answer's status line and header."""
        connection = self._connection
        if connection is None:
            if self._https:
                connection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self.timeout, context=self._context
                )
            else:
                connection = http.client.HTTPConnection(
                    self._host, self._port, timeout=self.timeout
                )
            connection._create_connection = self._connect  # type: ignore[attr-defined]
            self._connection = connection
        connection.request("POST", self._target, body=body, headers=self.headers)
        return connection.getresponse()

    def _connect(
        self, address: tuple[str, int], timeout: float, source: object = None
    ) -> socket.socket:
        """As socket.create_connection (http.client's connect calls it), each socket
        held while it connects, so that close() giving up can end a connect that
        never completes (a host that drops the SYNs) as it ends a request in flight."""
        host, port = address
        error: OSError = OSError(f"{host} has no address")
        for family, kind, proto, _, where in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM
        ):
            sock = socket.socket(family, kind, proto)
            with self._connecting_lock:
                if self._stopped:
                    sock.close()
                    raise ConnectionAbortedError(0, "close() gave up")
                self._connecting = sock
            try:
                sock.settimeout(timeout)
                sock.connect(where)
            except OSError as failed:
                with self._connecting_lock:
                    self._connecting = None
                    sock.close()
                if self._stopped:
                    raise
                error = failed
                continue
            with self._connecting_lock:
                self._connecting = None
            return sock
        raise error

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def __repr__(self) -> str:
        return f"OtlpSink({self.endpoint!r})"


class _Answer(NamedTuple):
    status: int
    #: At most MOST_ANSWER_BYTES of the body.
    body: bytes
    #: Whether that is the whole body.
    whole: bool
    content_type: str
    location: str
    retry_after: float | None


def _reason(answer: _Answer) -> str:
    """The collector's reason for an answer, as a report may say it: the message of a
    ``google.rpc.Status`` (OTLP's error body in protobuf) or of its JSON form, or the
    start of a text body (not an HTML page); ``""`` when there is none to say."""
    kind = answer.content_type.partition(";")[0].strip().lower()
    body = answer.body
    if kind in ("application/x-protobuf", "application/protobuf"):
        # Status { int32 code = 1; string message = 2; repeated Any details = 3; }
        try:
            for number, _wire_type, value in fields(body):
                if number == 2 and isinstance(value, bytes):
                    return _printable(value.decode("utf-8", "replace"))
        except ValueError:
            pass
        return ""
    text = body.decode("utf-8", "replace")
    if kind == "application/json" or kind.endswith("+json"):
        with contextlib.suppress(ValueError):
            parsed = json.loads(text)
            if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
                return _printable(parsed["message"])
        return _printable(text)
    if (kind.startswith("text/") and kind != "text/html") or not kind:
        # (Not a page's markup: a proxy's or a web server's error page says nothing.)
        return _printable(text)
    return ""


def _printable(text: str) -> str:
    """``text`` on one line, without control characters, and cut to a report's size."""
    words = "".join(c if c.isprintable() else " " for c in text[: MOST_REASON_CHARACTERS * 4])
    words = " ".join(words.split())
    if len(words) > MOST_REASON_CHARACTERS:
        words = words[: MOST_REASON_CHARACTERS - 3] + "..."
    return words


def _tls_context(settings: _Settings) -> ssl.SSLContext:
    """The TLS context of an https collector: checked against the CA file if one is
    named, and with the client certificate (mTLS) if one is."""
    context = _checked(
        settings.cafile_variable,
        settings.cafile,
        "the PEM file of the CA that signed the collector's certificate",
        lambda: ssl.create_default_context(cafile=settings.cafile),
    )
    certificate_variable, certificate = settings.client_certificate
    key_variable, key = settings.client_key
    if key and not certificate:
        raise ConfigurationError(
            f"{key_variable} is set but not {certificate_variable}: give the client "
            "certificate too (PEM), or neither"
        )
    if certificate:
        _checked(
            certificate_variable if not key else f"{certificate_variable}/{key_variable}",
            certificate if not key else f"{certificate}, {key}",
            "the client certificate's PEM file and its key's (the key's file can be the "
            "same), the certificate one the collector trusts",
            lambda: context.load_cert_chain(certificate, key or None),
        )
    return context


_Made = TypeVar("_Made")


def _checked(variable: str, value: str | None, what: str, make: Callable[[], _Made]) -> _Made:
    """``make()``, its error a ConfigurationError naming ``variable`` and saying what
    to give."""
    try:
        return make()
    except FileNotFoundError:
        why = "no such file"
    except ssl.SSLError as error:
        reason = error.reason or str(error)
        why = (
            "no PEM certificate in it"
            if "PEM" in reason or reason == "NO_CERTIFICATE_OR_CRL_FOUND"
            else reason.lower().replace("_", " ")
        )
    except OSError as error:
        why = error.strerror or str(error)
    raise ConfigurationError(f"{variable}={value!r}: {why}: give {what}")


def _parts(records: Sequence[bytes], most: int) -> Iterator[tuple[int, int]]:
    """``records`` cut into runs (start, end) of at most ``most`` bytes each, but for a
    record bigger than that alone: the requests of a batch."""
    start, size = 0, 0
    for index, record in enumerate(records):
        if size + len(record) > most and index > start:
            yield start, index
            start, size = index, 0
        size += len(record)
    yield start, len(records)


def _line_end(data: bytes, lines: int) -> int:
    """The offset just past the first ``lines`` lines of ``data``."""
    end = 0
    for _ in range(lines):
        end = data.index(b"\n", end) + 1
    return end


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (seconds, or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), LONGEST_PAUSE)
    with contextlib.suppress(TypeError, ValueError, IndexError):
        moment = email.utils.parsedate_to_datetime(value)
        return max(0.0, min(moment.timestamp() - time.time(), LONGEST_PAUSE))
    return None


class _Settings(NamedTuple):
    endpoint: str
    protocol: str
    headers: dict[str, str]
    timeout: float  # seconds
    cafile: str | None
    compression: str
    #: The variable the CA file came from, for a message about it.
    cafile_variable: str
    #: The client certificate's and key's variables and files (mTLS), "" for none.
    client_certificate: tuple[str, str]
    client_key: tuple[str, str]
    #: What to say once on stderr when the sink is made (a value that is allowed but
    #: most likely meant otherwise).
    notes: tuple[str, ...]


#: An HTTP field name (RFC 9110's token).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: The longest OTEL_EXPORTER_OTLP_TIMEOUT taken, in milliseconds: a day (a socket's
#: timeout cannot be much longer, and longer is no timeout anyone means).
LONGEST_TIMEOUT_MS = 86_400_000


def _settings(url: str, env: Mapping[str, str]) -> _Settings:
    """What a sink URL and the variables say."""

    def variable(name: str) -> tuple[str, str]:
        """The variable that says ``name`` (the ``_LOGS_`` one first), and its value."""
        for full in (f"OTEL_EXPORTER_OTLP_LOGS_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
            if env.get(full):
                return full, env[full]
        return f"OTEL_EXPORTER_OTLP_{name}", ""

    if url == "otlp":
        endpoint = env.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "")
        _refuse_credentials("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", endpoint)
        refuse_blanks(endpoint, "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
        if not endpoint:
            base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
            _refuse_credentials("OTEL_EXPORTER_OTLP_ENDPOINT", base)
            refuse_blanks(base, "OTEL_EXPORTER_OTLP_ENDPOINT")
            endpoint = base.rstrip("/") + "/v1/logs" if base else DEFAULT_ENDPOINT
    else:
        scheme, separator, rest = url.partition("://")
        if not separator or scheme.lower() not in OTLP_SCHEMES:
            raise ConfigurationError(
                f"{url!r} is not an OTLP sink: use otlp+http://HOST:PORT, "
                "otlp+https://HOST:PORT, or otlp (the OTEL_EXPORTER_OTLP_* variables)"
            )
        _refuse_credentials("the sink URL", url)
        refuse_blanks(url)
        endpoint = scheme.lower()[5:] + "://" + rest.rstrip("/") + "/v1/logs"
    parts = urlsplit(endpoint)
    try:
        parts.port  # noqa: B018  (a malformed port raises)
    except ValueError as error:
        raise ConfigurationError(f"OTLP endpoint {endpoint!r}: {error}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"OTLP endpoint {endpoint!r}: expected http://HOST:PORT/... or https://..."
        )
    protocol_variable, protocol = variable("PROTOCOL")
    protocol = protocol.strip().lower() or "http/protobuf"
    if protocol not in PROTOCOLS:
        raise ConfigurationError(
            f"{protocol_variable}={protocol!r}: boundlog's OTLP sink speaks http/protobuf "
            "(the default every collector takes) or http/json"
            + (", not gRPC" if protocol == "grpc" else ": give one of them")
        )
    headers = _headers(*variable("HEADERS"))
    timeout, notes = _timeout(*variable("TIMEOUT"))
    compression_variable, compression = variable("COMPRESSION")
    compression = compression.strip().lower() or "none"
    if compression not in COMPRESSIONS:
        raise ConfigurationError(f"{compression_variable}={compression!r}: give gzip or none")
    cafile_variable, cafile = variable("CERTIFICATE")
    return _Settings(
        endpoint,
        protocol,
        headers,
        timeout,
        cafile or None,
        compression,
        cafile_variable,
        variable("CLIENT_CERTIFICATE"),
        variable("CLIENT_KEY"),
        notes,
    )


def _refuse_credentials(source: str, url: str) -> None:
    """A URL with ``user:password@``: http.client sends no credentials from it, and the
    password would be in the sink's name, so in every report.  Never said back."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return
    without = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    raise ConfigurationError(
        f"{source} holds credentials (user:password@ before the host), which boundlog "
        f"does not send: give {without} and pass them as a header, "
        "OTEL_EXPORTER_OTLP_HEADERS='Authorization=Basic <base64 of user:password>' "
        "(or the header your collector asks for)"
    )


def _headers(name: str, text: str) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS``: ``name=value,...``, each part percent-decoded;
    what http.client would refuse at each request (or send broken) is refused now.
    A value is never said back: it is most often a secret."""
    headers = {}
    for number, item in enumerate(text.split(","), 1):
        if not item.strip():
            continue
        field, equals, value = item.partition("=")
        if not equals:
            raise ConfigurationError(
                f"{name}: item {number} has no '=' (it would be left out): give "
                "name=value items separated by commas, e.g. api-key=secret,x-tenant=shop "
                "(a ',' in a value as %2C)"
            )
        field, value = unquote(field.strip()), unquote(value.strip())
        if not _TOKEN.fullmatch(field):
            # Said up to its first wrong character: what follows may be a secret.
            valid = _TOKEN.match(field)
            start = field[: valid.end()] if valid else ""
            where = (
                "is empty"
                if not field
                else f"has {field[len(start)]!r}" + (f" after {start!r}" if start else " first")
            )
            raise ConfigurationError(
                f"{name}: the name of item {number} {where}, which is not an HTTP field "
                "name: give letters, digits and !#$%&'*+-.^_`|~ only"
            )
        if any(character in value for character in "\r\n\0"):
            raise ConfigurationError(
                f"{name}: the value of {field} holds a CR, LF or NUL once percent-decoded, "
                "which would end the header line: remove it"
            )
        try:
            value.encode("latin-1")
        except UnicodeEncodeError as error:
            raise ConfigurationError(
                f"{name}: the value of {field} holds U+{ord(value[error.start]):04X} once "
                "percent-decoded, which an HTTP header cannot carry (ISO-8859-1 only): "
                "give the value your collector expects in ASCII"
            ) from None
        headers[field] = value
    return headers


def _timeout(name: str, text: str) -> tuple[float, tuple[str, ...]]:
    """``OTEL_EXPORTER_OTLP_TIMEOUT`` (milliseconds) in seconds, and what to say of it."""
    if not text:
        return DEFAULT_TIMEOUT, ()
    try:
        milliseconds = float(text)
    except ValueError:
        raise ConfigurationError(f"{name}={text!r}: give milliseconds, e.g. 10000") from None
    if not 0 < milliseconds <= LONGEST_TIMEOUT_MS:
        raise ConfigurationError(
            f"{name}={text!r}: give milliseconds above 0 and at most {LONGEST_TIMEOUT_MS} "
            "(a day), e.g. 10000"
        )
    notes: tuple[str, ...] = ()
    if milliseconds < 1000:
        # The OpenTelemetry Python SDK reads the same variable in seconds: a service
        # that sets 10 for its SDK gives boundlog 10 ms.
        fix = (
            f"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT={milliseconds * 1000:g} is read by boundlog first"
            if name == "OTEL_EXPORTER_OTLP_TIMEOUT"
            else f"give {name}={milliseconds * 1000:g}"
        )
        notes = (
            f"{name}={text} is {milliseconds:g} ms to boundlog (the OTLP specification's "
            f"unit); the Python SDK reads it as seconds: for {milliseconds:g} s, {fix}",
        )
    return milliseconds / 1000, notes
