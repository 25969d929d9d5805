"""Real servers for the end-to-end tests, the traffic sent to them and the checks on their logs.

A server runs as its own process group on a free loopback port.  ``running_server``
starts it, waits until the port accepts connections (polling with a deadline), and
always cleans it up; ``Server.stop`` sends SIGTERM and waits for the exit, which is the
graceful shutdown whose log drain the tests check.

The traffic is a deterministic mix of ``Exchange`` values, each knowing the log fields it
must produce, sent over several keep-alive connections at once.  The log checks parse
every line strictly (the Apache combined definition, or JSON) and compare the lines with
the exchanges as multisets, because concurrent connections finish in any order.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import logfmtkv

from _ports import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
PYTHON = sys.executable

# A zone west of UTC with a half-hour offset, in POSIX TZ syntax so that it needs no tz
# database: every timestamp the server writes must carry exactly this offset.
SERVER_TZ = "<-0330>3:30"
CLF_OFFSET = "-0330"
RFC3339_OFFSET = "-03:30"

# Environment variables read by tests/apps (kept in step with tests/apps/__init__.py,
# which the test process does not import).
SINK_VARIABLE = "TESTAPP_SINK"
FORMAT_VARIABLE = "TESTAPP_FORMAT"
FLUSH_INTERVAL_VARIABLE = "TESTAPP_FLUSH_INTERVAL"
OPTIONS_VARIABLE = "TESTAPP_OPTIONS"
# With a batch window this long and fewer records than a batch, the writer writes
# nothing until the log is closed: every line found after exit proves the shutdown drain.
HOLD_UNTIL_CLOSE = "3600"

START_TIMEOUT = 20.0
STOP_TIMEOUT = 20.0
# How long a hung server has to print its stacks after SIGABRT.
ABORT_TIMEOUT = 5.0
CLIENT_TIMEOUT = 15.0
POLL_INTERVAL = 0.02
PORT_ATTEMPTS = 3


# -- server processes -------------------------------------------------------------------


class Server:
    """A server process started by ``running_server``."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        port: int,
        output_path: Path,
        unix_socket: Path | None = None,
    ) -> None:
        self.process = process
        self.port = port
        self.output_path = output_path
        self.unix_socket = unix_socket

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def output(self) -> str:
        """Everything the server wrote on stdout and stderr so far."""
        return self.output_path.read_text(errors="replace")

    def stop(
        self, timeout: float = STOP_TIMEOUT, stop_signal: signal.Signals = signal.SIGTERM
    ) -> int:
        """Send ``stop_signal``, wait for the process to exit, and return its exit status.

        A server still running after ``timeout`` gets SIGABRT before it is killed: test
        servers run with faulthandler on, so the output in the failure then shows where
        each of its threads was stuck.
        """
        self.process.send_signal(stop_signal)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(ABORT_TIMEOUT)
            self.kill()
            raise AssertionError(
                f"server did not exit within {timeout} s of {stop_signal.name}; "
                f"output (with faulthandler's stacks on SIGABRT):\n{self.output()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL the server's whole process group (a master and its workers)."""
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def _wait_until_accepting(self, deadline: float) -> bool:
        """Poll the port (or Unix socket) until it accepts a connection; False if the
        process exited."""
        while time.monotonic() < deadline:
            try:
                if self.unix_socket is None:
                    with socket.create_connection((LOOPBACK, self.port), timeout=1.0):
                        return self.process.poll() is None
                # Closed whether or not the connect succeeds: a refused probe left its
                # socket to the garbage collector (a ResourceWarning).
                with socket.socket(socket.AF_UNIX) as probe:
                    probe.settimeout(1.0)
                    probe.connect(str(self.unix_socket))
                    return self.process.poll() is None
            except OSError:
                pass
            try:
                self.process.wait(POLL_INTERVAL)
                return False
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        raise AssertionError(
            f"server did not accept connections within {START_TIMEOUT} s; output:\n{self.output()}"
        )


@contextmanager
def running_server(
    command: Callable[[int], list[str]],
    environment: dict[str, str],
    output_path: Path,
    *,
    stdout: int | None = None,
    unix_socket: Path | None = None,
    pass_fds: tuple[int, ...] = (),
) -> Iterator[Server]:
    """Run ``command(port)`` from the repository root until the block ends.

    A server told to listen on ``unix_socket`` is waited for there instead of the port.
    ``pass_fds``: descriptors the server inherits.

    The server's stdout and stderr go to ``output_path``, or its stdout to the
    descriptor ``stdout`` when one is given.  Another process may take the free port
    between the probe and the server's bind, so a server that exits with "Address
    already in use" is retried on a new port.
    """
    # faulthandler prints every thread's stack on SIGABRT: see Server.stop.
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", **environment}
    for _ in range(PORT_ATTEMPTS):
        port = free_port()
        with output_path.open("wb") as output:
            process = subprocess.Popen(
                command(port),
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output if stdout is None else stdout,
                stderr=subprocess.STDOUT if stdout is None else output,
                start_new_session=True,
                pass_fds=pass_fds,
            )
        server = Server(process, port, output_path, unix_socket)
        if server._wait_until_accepting(time.monotonic() + START_TIMEOUT):
            break
        server.kill()
        if "Address already in use" not in server.output():
            raise AssertionError(
                f"server exited with status {process.returncode} before accepting "
                f"connections; output:\n{server.output()}"
            )
    else:
        raise AssertionError(f"no free port after {PORT_ATTEMPTS} attempts")
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.kill()


def run_until_exit(
    command: Callable[[int], list[str]], environment: dict[str, str], output_path: Path
) -> tuple[int, str]:
    """Run ``command(port)`` from the repository root, for a server that must stop by
    itself at startup; return its exit status and output (stdout and stderr)."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", **environment}
    with output_path.open("wb") as output:
        process = subprocess.Popen(
            command(free_port()),
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(process, 0, output_path)
    try:
        status = process.wait(START_TIMEOUT)
    except subprocess.TimeoutExpired:
        server.kill()
        raise AssertionError(
            f"server still running {START_TIMEOUT} s after starting; output:\n{server.output()}"
        ) from None
    finally:
        # A master that exited may leave workers behind.
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return status, server.output()


# uvicorn ends a graceful shutdown by re-raising the SIGTERM it caught, so a clean exit
# is a death by SIGTERM (older versions exited with 0).
UVICORN_CLEAN_EXITS = (0, -signal.SIGTERM)


def stop_gracefully(server: Server, clean_exits: Sequence[int] = (0,)) -> str:
    """SIGTERM the server; it must exit cleanly without a boundlog warning.  Its output."""
    status = server.stop()
    output = server.output()
    assert status in clean_exits, output
    assert "boundlog:" not in output, output
    return output


def check_drained_on_stop(
    tmp_path: Path,
    command: Callable[[int], list[str]],
    exchanges: Sequence[Exchange],
    log_format: str,
    stop: Callable[[Server], object] = stop_gracefully,
    environment: dict[str, str] | None = None,
) -> None:
    """Serve the exchanges, stop the server, and check the log has one exact line each.

    The log's writer holds every line until the log is closed (HOLD_UNTIL_CLOSE), so the
    lines found after the stop are all the shutdown drain's work.
    """
    log_path = tmp_path / "access.log"
    environment = {
        **server_environment(log_path, log_format, HOLD_UNTIL_CLOSE),
        **(environment or {}),
    }
    with running_server(command, environment, tmp_path / "server.out") as server:
        started = time.time()
        send_exchanges(server.port, exchanges)
        finished = time.time()
        assert log_path.read_bytes() == b"", "the writer should hold the lines until close"
        stop(server)
    check_log(read_log_lines(log_path), exchanges, log_format, started, finished)


def server_environment(sink: Path, log_format: str, flush_interval: str) -> dict[str, str]:
    """What the test applications read to build their log, and the zone they log in."""
    return {
        SINK_VARIABLE: str(sink),
        FORMAT_VARIABLE: log_format,
        FLUSH_INTERVAL_VARIABLE: flush_interval,
        "TZ": SERVER_TZ,
    }


# -- traffic ------------------------------------------------------------------------------


class Exchange(NamedTuple):
    """One request to send, and the response and log fields it must produce."""

    method: str
    path: bytes
    query: bytes
    protocol: str
    referer: bytes | None
    user_agent: bytes | None
    request_body: bytes
    status: int
    bytes_sent: int
    #: Sent as X-Forwarded-For, or as Forwarded when it starts with ``for=``.
    forwarded: bytes | None = None
    #: The client the line must show: the peer, or the one a trusted proxy forwarded for.
    client: str = LOOPBACK

    @property
    def target(self) -> bytes:
        return self.path + b"?" + self.query if self.query else self.path

    @property
    def logged(self) -> bool:
        """Whether the test applications' log keeps the line (it skips health checks,
        unless they fail)."""
        return self.path != HEALTH_CHECK or self.status >= 400

    @property
    def logged_target(self) -> bytes:
        """The target as the line shows it: credentials in the query redacted."""
        query = _REDACTED_QUERIES.get(self.query, self.query)
        return self.path + b"?" + query if query else self.path

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The request's header fields besides Host and those of the body."""
        headers = []
        if self.referer is not None:
            headers.append((b"Referer", self.referer))
        if self.user_agent is not None:
            headers.append((b"User-Agent", self.user_agent))
        if self.forwarded is not None:
            name = b"Forwarded" if self.forwarded.startswith(b"for=") else b"X-Forwarded-For"
            headers.append((name, self.forwarded))
        return headers


# (method, path, request body, status, body bytes the application hands to the server).
# A HEAD, 204 or 304 response has no body; neither does the 500 of an application that
# raised, because the server writes that error page itself.
_ROUTES: tuple[tuple[str, bytes, bytes, int, int], ...] = (
    ("GET", b"/bytes/0", b"", 200, 0),
    ("GET", b"/bytes/1", b"", 200, 1),
    ("GET", b"/bytes/4096", b"", 200, 4096),
    ("GET", b"/bytes/70000", b"", 200, 70000),
    ("HEAD", b"/bytes/4096", b"", 200, 0),
    ("HEAD", b"/stream/3/100", b"", 200, 0),
    ("POST", b"/echo", b"", 200, 0),
    ("POST", b"/echo", b"e" * 3000, 200, 3000),
    ("GET", b"/stream/3/100", b"", 200, 300),
    ("GET", b"/stream/5/8192", b"", 200, 5 * 8192),
    ("GET", b"/status/204", b"", 204, 0),
    ("GET", b"/status/304", b"", 304, 0),
    ("POST", b"/status/201", b"created", 201, len(b"status 201\n")),
    ("GET", b"/no/such/page", b"", 404, len(b"not found\n")),
    ("GET", b"/raise", b"", 500, 0),
    ("GET", b"/healthz", b"", 200, 3),
)
# The health check the test applications' log skips (skip_paths) while it succeeds, and
# the proxy it trusts (trusted_proxies): the tests' own loopback address.
HEALTH_CHECK = b"/healthz"
TRUSTED_PROXY = LOOPBACK
_QUERIES = (
    b"", b"a=1", b"q=hello%20world&lang=en", b"empty=&flag", b"x=%22quoted%22&y=%5C",
    b"token=s3cret&page=2", b"user=ann&Password=hunter2",
)  # fmt: skip
# Queries that hold a credential, as the default redaction logs them.
_REDACTED_QUERIES = {
    b"token=s3cret&page=2": b"token=[redacted]&page=2",
    b"user=ann&Password=hunter2": b"user=ann&Password=[redacted]",
}
# (forwarded header value, the client the log must show).  The test applications' log
# reads X-Forwarded-For, the default proxy_header: there the client is the right-most
# address the trusted proxy did not add itself.  A Forwarded header is what a client
# behind nginx and the like can send itself, so it must change nothing: the peer.
_FORWARDED = (
    (b"198.51.100.7", "198.51.100.7"),
    (b"203.0.113.9, 127.0.0.1", "203.0.113.9"),
    (b'for="[2001:db8::7]:4711"', LOOPBACK),
    (b"for=192.0.2.60;proto=http, for=127.0.0.1", LOOPBACK),
)
# Values a client controls, including the bytes the log must escape: quote, backslash and
# non-ASCII UTF-8.
_REFERERS = (
    None,
    b"http://example.test/",
    b"https://example.test/search?q=a%20b&page=2",
    b'http://example.test/"quoted"/back\\slash',
    "https://example.test/café".encode(),
)
_USER_AGENTS = (
    None,
    b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    b"curl/8.5.0",
    b'agent "with quotes" and a \\ backslash',
    "agent ✓".encode(),
)


def build_exchanges(count: int, seed: int = 20240601) -> list[Exchange]:
    """``count`` exchanges cycling through every route, with seeded headers and queries."""
    rng = random.Random(seed)
    exchanges = []
    for index in range(count):
        method, path, body, status, bytes_sent = _ROUTES[index % len(_ROUTES)]
        referer = rng.choice(_REFERERS)
        user_agent = rng.choice(_USER_AGENTS)
        if index % 10 == 0:
            referer = user_agent = None
        protocol = "HTTP/1.0" if rng.random() < 0.15 else "HTTP/1.1"
        query = rng.choice(_QUERIES)
        forwarded, client = rng.choice(_FORWARDED) if index % 5 == 2 else (None, LOOPBACK)
        exchanges.append(
            Exchange(
                method=method,
                path=path,
                query=query,
                protocol=protocol,
                referer=referer,
                user_agent=user_agent,
                request_body=body,
                status=status,
                bytes_sent=bytes_sent,
                forwarded=forwarded,
                client=client,
            )
        )
    return exchanges


def send_exchanges(port: int, exchanges: Sequence[Exchange], connections: int = 4) -> None:
    """Send the exchanges over ``connections`` clients at once, checking each response."""
    shares = [exchanges[start::connections] for start in range(connections)]
    with ThreadPoolExecutor(connections) as pool:
        for sent in [pool.submit(_send_in_order, port, share) for share in shares]:
            sent.result()


def http_client(port: int) -> httpx.Client:
    """A client of the server on ``port`` that sends only the headers an exchange names."""
    client = httpx.Client(base_url=f"http://{LOOPBACK}:{port}", timeout=CLIENT_TIMEOUT)
    # Requests without a User-Agent must go out without one.
    del client.headers["User-Agent"]
    return client


def send_exchange(client: httpx.Client, port: int, exchange: Exchange) -> tuple[int, bytes]:
    """Send one exchange, HTTP/1.0 on a socket of its own; return the status and body."""
    if exchange.protocol == "HTTP/1.0":
        return send_http10(port, exchange)
    return _send_http11(client, exchange)


def _send_in_order(port: int, exchanges: Sequence[Exchange]) -> None:
    with http_client(port) as client:
        for exchange in exchanges:
            status, body = send_exchange(client, port, exchange)
            assert status == exchange.status, (exchange, status, body[:200])
            if exchange.status != 500:
                assert len(body) == exchange.bytes_sent, (exchange, len(body))


def _send_http11(client: httpx.Client, exchange: Exchange) -> tuple[int, bytes]:
    response = client.request(
        exchange.method,
        exchange.target.decode("ascii"),
        headers=exchange.headers(),
        content=exchange.request_body if exchange.method == "POST" else None,
    )
    # The log must show the target as sent on the wire, so it must be what we meant.
    assert response.request.url.raw_path == exchange.target
    return response.status_code, response.content


def send_http10(port: int, exchange: Exchange) -> tuple[int, bytes]:
    """Send one HTTP/1.0 request on a fresh socket; return the status and the body."""
    lines = [
        b"%s %s HTTP/1.0" % (exchange.method.encode("ascii"), exchange.target),
        b"Host: %s:%d" % (LOOPBACK.encode("ascii"), port),
    ]
    lines += [name + b": " + value for name, value in exchange.headers()]
    if exchange.method == "POST":
        lines.append(b"Content-Length: %d" % len(exchange.request_body))
    request = b"\r\n".join(lines) + b"\r\n\r\n" + exchange.request_body
    with socket.create_connection((LOOPBACK, port), timeout=CLIENT_TIMEOUT) as sock:
        sock.sendall(request)
        response = read_until_closed(sock)
    head, _, body = response.partition(b"\r\n\r\n")
    # uvicorn answers an HTTP/1.0 request with a chunked body all the same.
    if b"\r\ntransfer-encoding: chunked" in head.lower():
        body = _dechunk(body)
    return int(head.split(b" ", 2)[1]), body


def _dechunk(data: bytes) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return b"".join(parts)
        parts.append(data[:size])
        assert data[size : size + 2] == b"\r\n", "malformed chunked body"
        data = data[size + 2 :]


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the peer sends until it closes the connection."""
    parts = []
    while part := sock.recv(65536):
        parts.append(part)
    return b"".join(parts)


# -- log lines ------------------------------------------------------------------------------

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# A quoted field holds no quote: every escape is \xhh.
_QUOTED = rb'"((?:[^"\\]|\\x[0-9a-f]{2})*)"'
# Apache's combined format, %h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i", with
# every field as narrow as its definition allows.
_COMBINED_LINE = re.compile(
    rb"(?P<host>[^ ]+) (?P<ident>[^ ]+) (?P<user>[^ ]+) "
    rb"\[(?P<day>\d{2})/(?P<month>" + "|".join(_MONTHS).encode() + rb")/(?P<year>\d{4})"
    rb":(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2}) (?P<offset>[+-]\d{4})\] "
    + _QUOTED.replace(b"(", b"(?P<request>", 1)
    + rb" (?P<status>[1-5]\d{2}) (?P<bytes>-|[1-9]\d*) "
    + _QUOTED.replace(b"(", b"(?P<referer>", 1)
    + b" "
    + _QUOTED.replace(b"(", b"(?P<agent>", 1)
)
_REQUEST_LINE = re.compile(rb"(?P<method>[A-Z]+) (?P<target>[^ ]+) (?P<protocol>HTTP/\d\.\d)")
_PRINTABLE_ASCII = re.compile(rb"[\x20-\x7e]*")
JSON_KEYS = [
    "time", "client", "method", "path", "query", "protocol", "status", "bytes_sent",
    "duration_ms", "referer", "user_agent", "request_id", "route", "trace_id", "span_id",
    "completed",
]  # fmt: skip


class LoggedExchange(NamedTuple):
    """The fields of one log line that an Exchange determines, as the line spells them."""

    method: str
    target: bytes
    protocol: str
    status: int
    bytes_sent: int
    referer: bytes | None
    user_agent: bytes | None
    client: str


def read_log_lines(path: Path) -> list[bytes]:
    """The log's lines without their newlines; the log must end with a whole line."""
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), f"the log ends in a partial line: {data[-200:]!r}"
    return data.split(b"\n")[:-1]


def escaped_field(value: bytes) -> bytes:
    """The documented escaping rule, written out independently of boundlog's code."""
    escaped = bytearray()
    for byte in value:
        if 0x20 <= byte <= 0x7E and byte not in b'"\\':
            escaped.append(byte)
        else:
            escaped += b"\\x%02x" % byte
    return bytes(escaped)


def parse_combined_line(line: bytes) -> tuple[LoggedExchange, float]:
    """Check one combined line strictly; return its fields and its time (epoch seconds)."""
    assert _PRINTABLE_ASCII.fullmatch(line), f"not printable ASCII: {line!r}"
    match = _COMBINED_LINE.fullmatch(line)
    assert match, f"not an Apache combined line: {line!r}"
    assert (match["ident"], match["user"]) == (b"-", b"-"), line
    request = _REQUEST_LINE.fullmatch(match["request"])
    assert request, f"not a request line: {match['request']!r}"
    assert match["offset"] == CLF_OFFSET.encode(), line
    parts = {name: value.decode() for name, value in match.groupdict().items()}
    month = _MONTHS.index(parts["month"]) + 1
    when = datetime.strptime(
        f"{parts['year']}-{month:02d}-{parts['day']} "
        f"{parts['hour']}:{parts['minute']}:{parts['second']} {parts['offset']}",
        "%Y-%m-%d %H:%M:%S %z",
    ).timestamp()
    fields = LoggedExchange(
        request["method"].decode(),
        request["target"],
        request["protocol"].decode(),
        int(match["status"]),
        0 if match["bytes"] == b"-" else int(match["bytes"]),
        match["referer"],
        match["agent"],
        match["host"].decode(),
    )
    return fields, when


def expected_combined(exchange: Exchange) -> LoggedExchange:
    """The fields a combined line must show for ``exchange``."""
    return LoggedExchange(
        exchange.method,
        escaped_field(exchange.logged_target),
        exchange.protocol,
        exchange.status,
        exchange.bytes_sent,
        b"-" if exchange.referer is None else escaped_field(exchange.referer),
        b"-" if exchange.user_agent is None else escaped_field(exchange.user_agent),
        exchange.client,
    )


_HEX_ESCAPE = re.compile(rb"\\x([0-9a-f]{2})")


def json_value_bytes(value: str) -> bytes:
    """The bytes a JSON line's string stands for: its UTF-8, each \\xhh the byte hh
    (the documented rule, written out independently of boundlog's code)."""
    return _HEX_ESCAPE.sub(lambda match: bytes((int(match[1], 16),)), value.encode())


def parse_json_line(line: bytes) -> tuple[LoggedExchange, float]:
    """Check one JSON line strictly; return its fields and its time (epoch seconds)."""
    assert _PRINTABLE_ASCII.fullmatch(line), f"not printable ASCII: {line!r}"
    entry: dict[str, Any] = json.loads(line)
    assert list(entry) == JSON_KEYS, line
    assert entry["route"] is None or type(entry["route"]) is str, line
    assert entry["completed"] in (None, True, False), line
    assert type(entry["status"]) is int, line
    assert type(entry["bytes_sent"]) is int, line
    assert type(entry["duration_ms"]) is float, line
    assert entry["duration_ms"] >= 0, line
    target = _time_and_target(entry, line)
    fields = LoggedExchange(
        entry["method"],
        target,
        entry["protocol"],
        entry["status"],
        entry["bytes_sent"],
        None if entry["referer"] is None else json_value_bytes(entry["referer"]),
        None if entry["user_agent"] is None else json_value_bytes(entry["user_agent"]),
        entry["client"],
    )
    return fields, datetime.fromisoformat(entry["time"]).timestamp()


def _time_and_target(entry: dict[str, Any], line: bytes) -> bytes:
    """Check a JSON or logfmt line's time (RFC 3339, the server's offset); return its
    request target (path, then ``?`` and the query if any) as the client's bytes."""
    assert re.fullmatch(
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}" + re.escape(RFC3339_OFFSET),
        entry["time"],
    ), line
    target = json_value_bytes(entry["path"])
    if entry["query"]:
        target += b"?" + json_value_bytes(entry["query"])
    return target


def parse_logfmt_line(line: bytes) -> tuple[LoggedExchange, float]:
    """Check one logfmt line as go-logfmt reads it (logfmtkv, strict); return its fields
    and its time.  Its pairs are a JSON line's, in order, nulls left out, its values
    the JSON line's strings, numbers and booleans as text."""
    assert _PRINTABLE_ASCII.fullmatch(line), f"not printable ASCII: {line!r}"
    pairs = logfmtkv.parse_pairs(line.decode("ascii"), strict=True)
    entry: dict[str, Any] = dict(pairs)
    assert len(entry) == len(pairs), line
    assert [key for key in JSON_KEYS if key in entry] == list(entry), line
    assert {"time", "method", "path", "query", "protocol", "status", "bytes_sent",
            "duration_ms"} <= set(entry), line  # fmt: skip
    assert entry.get("completed") in (None, "true", "false"), line
    assert re.fullmatch(r"\d+\.\d{3}", entry["duration_ms"]), line
    target = _time_and_target(entry, line)
    referer, user_agent = entry.get("referer"), entry.get("user_agent")
    fields = LoggedExchange(
        entry["method"],
        target,
        entry["protocol"],
        int(entry["status"]),
        int(entry["bytes_sent"]),
        None if referer is None else json_value_bytes(referer),
        None if user_agent is None else json_value_bytes(user_agent),
        entry.get("client"),
    )
    return fields, datetime.fromisoformat(entry["time"]).timestamp()


def expected_json(exchange: Exchange) -> LoggedExchange:
    """The fields a JSON line must show for ``exchange`` (every value here is UTF-8)."""
    return LoggedExchange(
        exchange.method,
        exchange.logged_target,
        exchange.protocol,
        exchange.status,
        exchange.bytes_sent,
        exchange.referer,
        exchange.user_agent,
        exchange.client,
    )


# The format of tests/apps/named_fields.py, which reads records only by name.
NAMED_FIELDS = "named-fields"
_NAMED_FIELDS_KEYS = [
    "time", "duration", "client", "method", "path", "query", "protocol", "status", "bytes_sent",
]  # fmt: skip


def parse_named_fields_line(line: bytes) -> tuple[LoggedExchange, float]:
    """Check one line of the named-fields format; return its fields and its time."""
    entry: dict[str, Any] = json.loads(line)
    assert list(entry) == _NAMED_FIELDS_KEYS, line
    assert type(entry["time"]) is float, line
    assert type(entry["duration"]) is float, line
    assert entry["duration"] >= 0, line
    target = entry["path"].encode("latin-1")
    if entry["query"]:
        target += b"?" + entry["query"].encode("latin-1")
    fields = LoggedExchange(
        entry["method"], target, entry["protocol"], entry["status"], entry["bytes_sent"],
        None, None, entry["client"],
    )  # fmt: skip
    return fields, entry["time"]


def expected_named_fields(exchange: Exchange) -> LoggedExchange:
    """The fields a named-fields line must show (it writes no header field)."""
    return expected_json(exchange)._replace(referer=None, user_agent=None)


PARSERS: dict[str, Callable[[bytes], tuple[LoggedExchange, float]]] = {
    "combined": parse_combined_line,
    "json": parse_json_line,
    "logfmt": parse_logfmt_line,
    NAMED_FIELDS: parse_named_fields_line,
}
EXPECTATIONS: dict[str, Callable[[Exchange], LoggedExchange]] = {
    "combined": expected_combined,
    "json": expected_json,
    "logfmt": expected_json,
    NAMED_FIELDS: expected_named_fields,
}


def check_log(
    lines: Sequence[bytes],
    exchanges: Sequence[Exchange],
    log_format: str,
    started: float,
    finished: float,
    *,
    app_policy: bool = True,
) -> None:
    """Assert one correct line per logged exchange, none missing, none extra, none duplicated.

    ``started`` and ``finished`` bracket the wall-clock time of the traffic; every
    line's time (when its request was received) must fall inside.  Queries show their
    credentials redacted.  Under the test applications' policy (``app_policy``), health
    checks have no line and proxied requests show the client forwarded for; a log with
    the default policy logs both, with the peer as the client.
    """
    if app_policy:
        exchanges = [exchange for exchange in exchanges if exchange.logged]
    else:
        exchanges = [exchange._replace(client=LOOPBACK) for exchange in exchanges]
    assert len(lines) == len(exchanges), f"{len(lines)} lines for {len(exchanges)} requests"
    parse = PARSERS[log_format]
    expect = EXPECTATIONS[log_format]
    logged: Counter[LoggedExchange] = Counter()
    for line in lines:
        fields, when = parse(line)
        # Both formats truncate the time, to whole seconds or whole milliseconds.
        assert int(started) <= when <= finished, (line, started, finished)
        logged[fields] += 1
    expected = Counter(expect(exchange) for exchange in exchanges)
    missing = list((expected - logged).elements())
    unexpected = list((logged - expected).elements())
    assert (missing, unexpected) == ([], []), (
        f"{len(missing)} expected lines missing, e.g. {missing[:3]}; "
        f"{len(unexpected)} unexpected, e.g. {unexpected[:3]}"
    )


# -- fault injection (tests/e2e/test_faults_*.py) ------------------------------------------------

# Read by tests/apps/faults.py (which the test process does not import).
FAULT_CONFIG_VARIABLE = "TESTAPP_FAULT_CONFIG"
FAULT_STATS_PATH = "/_stats"
#: The stats query that starts tracemalloc's peak anew (tests/apps/faults.py).
FAULT_RESET_PEAK = "reset-peak"
F_SETPIPE_SZ = 1031
LOAD_PREFIX = b"/load"
_LOAD_TARGET = re.compile(rb"/load/(\d+)/(\d+)")


def fault_environment(
    log_options: dict[str, Any], stats_dir: Path, marker: str | None = None
) -> dict[str, str]:
    """The environment of a server running tests/apps/fault_asgi.py or fault_wsgi.py."""
    config = {"log": log_options, "stats_dir": str(stats_dir), "marker": marker}
    return {FAULT_CONFIG_VARIABLE: json.dumps(config), "TZ": SERVER_TZ}


def uvicorn_app_command(port: int, app: str = "tests.apps.asgi_app:app") -> list[str]:
    """uvicorn (httptools, uvloop) serving ``app``, one process, without its access log."""
    return [
        PYTHON, "-m", "uvicorn", app,
        "--no-access-log", "--host", LOOPBACK, "--port", str(port), "--lifespan", "on",
        "--loop", "uvloop", "--http", "httptools", "--log-level", "warning",
    ]  # fmt: skip


def gunicorn_app_command(port: int, app: str) -> list[str]:
    """gunicorn's gthread worker (one, four threads) serving ``app``, without --preload."""
    return [
        PYTHON, "-m", "gunicorn", "-k", "gthread", "--threads", "4", "-w", "1",
        "-b", f"{LOOPBACK}:{port}", "--graceful-timeout", "10", "--log-level", "warning", app,
    ]  # fmt: skip


def uvicorn_fault_command(port: int) -> list[str]:
    """uvicorn (httptools, uvloop) serving tests/apps/fault_asgi.py, one process."""
    return uvicorn_app_command(port, "tests.apps.fault_asgi:app")


def granian_fault_command(port: int) -> list[str]:
    """granian (ASGI interface, one worker) serving tests/apps/fault_asgi.py."""
    return [
        PYTHON, "-m", "granian", "--interface", "asgi", "--host", LOOPBACK, "--port", str(port),
        "--workers", "1", "--no-access-log", "--log-level", "warning", "tests.apps.fault_asgi:app",
    ]  # fmt: skip


def gunicorn_fault_command(*options: str) -> Callable[[int], list[str]]:
    """gunicorn with ``options`` (worker class, counts, --preload...) serving fault_wsgi.py."""

    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", *options, "-b", f"{LOOPBACK}:{port}",
            "--graceful-timeout", "10", "--log-level", "warning", "tests.apps.fault_wsgi:app",
        ]  # fmt: skip

    return command


def running_server_with_stdout(
    command: Callable[[int], list[str]],
    environment: dict[str, str],
    output_path: Path,
    stdout: int,
) -> AbstractContextManager[Server]:
    """Like ``running_server``, but the server's stdout is the descriptor ``stdout``.

    The server's stderr, where boundlog reports sink errors, still goes to ``output_path``.
    """
    return running_server(command, environment, output_path, stdout=stdout)


def poll_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` every POLL_INTERVAL until it holds; fail saying ``what`` if it does not."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(POLL_INTERVAL)


def fault_stats(port: int, query: str = "") -> dict[str, Any]:
    """The ``/_stats`` document of the server process that answers: pid, ticks, stats
    (tests/apps/faults.py; ``query`` its query string)."""
    url = f"http://{LOOPBACK}:{port}{FAULT_STATS_PATH}" + (f"?{query}" if query else "")
    response = httpx.get(url, timeout=CLIENT_TIMEOUT)
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def settled(stats: dict[str, int]) -> bool:
    """Whether every record submitted so far was written, dropped, filtered or failed."""
    total = stats["written"] + stats["dropped"] + stats["filtered"] + stats["failed"]
    return total == stats["submitted"]


def wait_settled(port: int, submitted: int = 0, timeout: float = 20.0) -> dict[str, int]:
    """Poll ``/_stats`` until ``submitted`` records arrived and all were dealt with.

    A client has its response before the server submits the record (the ASGI middleware
    submits after the last body message, a WSGI server after the response is sent), so
    a test that has just joined its load passes how many records it sent: otherwise the
    last one may arrive after the counters looked settled.
    """
    latest: dict[str, int] = {}

    def check() -> bool:
        latest.update(fault_stats(port)["stats"])
        return latest["submitted"] >= submitted and settled(latest)

    poll_until(check, timeout, f"the writer deals with every record: {latest}")
    return latest


def final_stats(stats_dir: Path) -> dict[int, dict[str, int]]:
    """The counters each server process recorded when it closed its log, by pid."""
    found = {}
    for path in stats_dir.glob("stats-*.json"):
        document = json.loads(path.read_text())
        found[document["pid"]] = document["stats"]
    return found


def boundlog_warnings(output: str) -> list[str]:
    """The lines boundlog wrote on the server's stderr."""
    return [line for line in output.splitlines() if line.startswith("boundlog: ")]


class LossReports(NamedTuple):
    """What boundlog's loss lines on stderr say (see src/boundlog/metrics/_health.py)."""

    #: The periodic lines: (dropped, failed, the failure's cause or "") each.
    periodic: list[tuple[int, int, str]]
    #: The final lines of closed logs: (dropped, failed, the last failure or "") each.
    final: list[tuple[int, int, str]]
    #: The other boundlog lines.
    others: list[str]


_DROPPED = re.compile(r"dropped ([\d,]+) records? in the last \d+ s: ")
_LOST = re.compile(r"lost ([\d,]+) records? in the last \d+ s: (.*)$")
_FINAL = re.compile(
    r"boundlog: .* closed: [\d,]+ of [\d,]+ records? not written "
    r"\(([\d,]+) dropped, ([\d,]+) failed\); .*?(?:; the last failure: (.*))?$"
)


def loss_reports(output: str) -> LossReports:
    """Parse boundlog's lines on stderr into loss reports and the others."""
    reports = LossReports([], [], [])
    for line in boundlog_warnings(output):
        final = _FINAL.fullmatch(line)
        if final is not None:
            dropped, failed, cause = final.groups()
            reports.final.append((_number(dropped), _number(failed), cause or ""))
            continue
        dropped_part = _DROPPED.search(line)
        lost_part = _LOST.search(line)
        if dropped_part is None and lost_part is None:
            reports.others.append(line)
            continue
        reports.periodic.append(
            (
                0 if dropped_part is None else _number(dropped_part[1]),
                0 if lost_part is None else _number(lost_part[1]),
                "" if lost_part is None else lost_part[2],
            )
        )
    return reports


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def load_requests(lines: Sequence[bytes]) -> Counter[tuple[int, int]]:
    """How often each load request ``(client, number)`` appears in strict combined lines."""
    logged: Counter[tuple[int, int]] = Counter()
    for line in lines:
        fields, _ = parse_combined_line(line)
        match = _LOAD_TARGET.fullmatch(fields.target)
        assert match, f"not a load request: {line!r}"
        logged[int(match[1]), int(match[2])] += 1
    return logged


class Load:
    """Client threads sending numbered requests over keep-alive connections.

    Client ``c`` (numbered from ``first_client``) sends ``GET /load/c/n`` for n = 0, 1, ...
    until ``stop()`` or until it has sent ``requests`` (when given), with the extra
    header lines ``headers(c)``.  A number is never sent twice, so a log line
    names exactly one attempt.  ``completed`` holds the requests whose 200 response
    arrived whole, and ``pids`` which server process answered each.  A connection the
    server closes is opened again; a refused connection ends the client, because the
    server is gone.  With ``requests`` given, every attempt must succeed.
    """

    def __init__(
        self,
        port: int,
        clients: int = 4,
        requests: int | None = None,
        headers: Callable[[int], bytes] = lambda client: b"",
        first_client: int = 0,
    ) -> None:
        self._port = port
        self._requests = requests
        self._headers = headers
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.completed: set[tuple[int, int]] = set()
        self.pids: dict[tuple[int, int], int] = {}
        self.errors: list[str] = []
        self._threads = [
            threading.Thread(target=self._run, args=(client,), daemon=True)
            for client in range(first_client, first_client + clients)
        ]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def total(self) -> int:
        with self._lock:
            return len(self.completed)

    def serving_pids(self) -> set[int]:
        """The server processes that have answered so far (the clients may be running)."""
        # Under the lock: without the GIL, reading the dict while a client adds to it
        # raises "dictionary changed size during iteration".
        with self._lock:
            return set(self.pids.values())

    def wait_for(self, count: int, timeout: float = 30.0) -> None:
        """Wait until ``count`` responses have completed."""
        poll_until(lambda: self.total >= count, timeout, f"{count} responses ({self.errors[:3]})")

    def stop(self, timeout: float = 30.0) -> None:
        """Stop sending and wait for every client to finish its request in flight."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout)
            assert not thread.is_alive(), "a load client did not finish"

    def join(self, timeout: float = 60.0) -> None:
        """Wait until every client has sent its ``requests``; fail on any error."""
        for thread in self._threads:
            thread.join(timeout)
            assert not thread.is_alive(), "a load client did not finish"
        assert not self.errors, self.errors[:5]

    def _run(self, client: int) -> None:
        connection: _Connection | None = None
        number = 0
        while not self._stopping.is_set() and (self._requests is None or number < self._requests):
            target = b"%s/%d/%d" % (LOAD_PREFIX, client, number)
            number += 1
            try:
                if connection is None:
                    connection = _Connection(self._port)
                status, body, keep_alive = connection.get(target, self._headers(client))
            except ConnectionRefusedError:
                self._record_error(f"{target!r}: connection refused")
                return
            except OSError as error:
                self._record_error(f"{target!r}: {error!r}")
                if connection is not None:
                    connection.close()
                connection = None
                continue
            if status != 200 or not body.startswith(b"ok "):
                self._record_error(f"{target!r}: {status} {body[:100]!r}")
            else:
                with self._lock:
                    self.completed.add((client, number - 1))
                    self.pids[client, number - 1] = int(body.split()[1])
            if not keep_alive:
                connection.close()
                connection = None
        if connection is not None:
            connection.close()

    def _record_error(self, error: str) -> None:
        with self._lock:
            self.errors.append(error)


class _Connection:
    """One keep-alive HTTP/1.1 connection that sends GETs and reads whole responses."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._sock = socket.create_connection((LOOPBACK, port), timeout=CLIENT_TIMEOUT)
        self._buffer = b""

    def get(self, target: bytes, headers: bytes) -> tuple[int, bytes, bool]:
        """Send ``GET target``; return the status, the body and whether the server keeps
        the connection open."""
        self._sock.sendall(
            b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (target, LOOPBACK.encode(), headers)
        )
        while b"\r\n\r\n" not in self._buffer:
            self._receive()
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip().lower()
        if b"content-length" not in fields:
            raise ConnectionError(f"a response without Content-Length: {head!r}")
        length = int(fields[b"content-length"])
        while len(self._buffer) < length:
            self._receive()
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return status, body, fields.get(b"connection") != b"close"

    def _receive(self) -> None:
        part = self._sock.recv(65536)
        if not part:
            raise ConnectionResetError("the server closed the connection")
        self._buffer += part

    def close(self) -> None:
        self._sock.close()


class PipeReader:
    """A pipe for a server's stdout, read by a thread the test can pause, resume or end.

    Pausing it is a reader that sleeps: the pipe fills and the server's writes block.
    ``hang_up()`` is a reader that exits: its end is closed and writes fail with EPIPE.
    """

    def __init__(self, size: int | None = None, *, paused: bool = False) -> None:
        self.read_fd, self.write_fd = os.pipe()
        if size is not None:
            fcntl.fcntl(self.write_fd, F_SETPIPE_SZ, size)
        self._write_end_closed = False
        self._chunks: list[bytes] = []
        self._reading = threading.Event()
        if not paused:
            self._reading.set()
        self._hanging_up = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while not self._hanging_up.is_set():
                if not self._reading.wait(POLL_INTERVAL):
                    continue
                readable, _, _ = select.select([self.read_fd], [], [], POLL_INTERVAL)
                if readable:
                    chunk = os.read(self.read_fd, 65536)
                    if not chunk:
                        return
                    self._chunks.append(chunk)
        finally:
            os.close(self.read_fd)

    def __enter__(self) -> PipeReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close_write_end()
        self.hang_up()

    def close_write_end(self) -> None:
        """Close the test's copy of the write end, once the server has its own."""
        if not self._write_end_closed:
            self._write_end_closed = True
            os.close(self.write_fd)

    def pause(self) -> None:
        self._reading.clear()

    def resume(self) -> None:
        self._reading.set()

    def hang_up(self) -> None:
        """Stop reading and close the read end, as a reader that exits does."""
        self._hanging_up.set()
        self._thread.join(CLIENT_TIMEOUT)

    def wait_closed(self, timeout: float = STOP_TIMEOUT) -> None:
        """Read until every writer has closed its end (the server exited)."""
        self.resume()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the pipe's writers did not close it"

    def data(self) -> bytes:
        return b"".join(self._chunks)

    def lines(self) -> list[bytes]:
        """What was read so far, as lines; it must end with a whole line."""
        data = self.data()
        assert not data or data.endswith(b"\n"), f"the pipe ends in a partial line: {data[-200:]!r}"
        return data.split(b"\n")[:-1]
