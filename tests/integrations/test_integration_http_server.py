"""http.server with ``boundlog.http_server.AccessLogMixin`` on SimpleHTTPRequestHandler.

The server (tests/apps/http_server_app.py) runs as a real process serving a directory
of real files.  The expected byte counts are the body lengths the client received,
because the error pages and the directory listing are http.server's own.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from _helpers import wait_until
from _records import CapturingFormat
from _servers import (
    CLIENT_TIMEOUT,
    HOLD_UNTIL_CLOSE,
    LOOPBACK,
    NAMED_FIELDS,
    PYTHON,
    Exchange,
    Server,
    check_log,
    http_client,
    read_log_lines,
    read_until_closed,
    running_server,
    send_exchange,
    server_environment,
    stop_gracefully,
)
from boundlog import AccessLog
from boundlog.http_server import AccessLogMixin

HELLO = b"hello, world\n" * 300
AGENT = 'agent "quoted" \\ ✓'.encode()
# (method, target, protocol, referer, user agent, status): 200s, a query string, a HEAD,
# a 404 and a 501 error page, a directory listing, and HTTP/1.0.
REQUESTS = [
    ("GET", b"/hello.txt", "HTTP/1.1", None, None, 200),
    ("GET", b"/hello.txt?x=1&y=%22q%22", "HTTP/1.1", b"http://example.test/a?b=c", AGENT, 200),
    ("HEAD", b"/hello.txt", "HTTP/1.1", None, b"curl/8.5.0", 200),
    ("GET", b"/missing.txt", "HTTP/1.1", b"http://example.test/", None, 404),
    ("PUT", b"/hello.txt", "HTTP/1.1", None, None, 501),
    ("GET", b"/", "HTTP/1.1", None, b"browser/1.0", 200),
    ("GET", b"/hello.txt?q=10", "HTTP/1.0", b"http://example.test/", b"old/1.0", 200),
    ("GET", b"/missing.txt", "HTTP/1.0", None, None, 404),
]
# The policy of every test application's log (tests/apps/__init__.py): the health check
# is skipped unless it fails, the credential in the query redacted, and the client the
# trusted proxy on 127.0.0.1 forwarded for is logged.
POLICY_EXCHANGES = [
    Exchange("GET", b"/healthz", b"", "HTTP/1.1", None, None, b"", 200, 0),
    Exchange("PUT", b"/healthz", b"", "HTTP/1.1", None, None, b"", 501, 0),
    Exchange("GET", b"/hello.txt", b"token=s3cret&page=2", "HTTP/1.1", None, None, b"", 200, 0),
    Exchange(
        "GET", b"/hello.txt", b"", "HTTP/1.0", None, None, b"", 200, 0,
        forwarded=b"203.0.113.9, 127.0.0.1", client="203.0.113.9",
    ),
]  # fmt: skip


def serve(tmp_path: Path, log_format: str, log_as: str) -> AbstractContextManager[Server]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "hello.txt").write_bytes(HELLO)
    (site / "healthz").write_bytes(b"ok\n")
    environment = {
        **server_environment(tmp_path / "access.log", log_format, HOLD_UNTIL_CLOSE),
        "TESTAPP_DIRECTORY": str(site),
        "TESTAPP_LOG_AS": log_as,
    }
    return running_server(
        lambda port: [PYTHON, "-m", "tests.apps.http_server_app", str(port)],
        environment,
        tmp_path / "server.out",
    )


def send_requests(port: int, *, policy: bool = True) -> list[Exchange]:
    """Send REQUESTS, then POLICY_EXCHANGES unless ``policy`` is false, in order,
    checking each status; return what the log must show."""
    exchanges = [
        Exchange(method, *target.partition(b"?")[::2], protocol, referer, agent, b"", status, 0)
        for method, target, protocol, referer, agent, status in REQUESTS
    ] + (POLICY_EXCHANGES if policy else [])
    sent = []
    with http_client(port) as client:
        for exchange in exchanges:
            status, body = send_exchange(client, port, exchange)
            assert status == exchange.status, (exchange, status, body[:200])
            sent.append(exchange._replace(bytes_sent=len(body)))
    return sent


def raise_before_responding(port: int) -> Exchange:
    """Send GET /raise: the server closes the connection without a response."""
    with socket.create_connection((LOOPBACK, port), timeout=CLIENT_TIMEOUT) as sock:
        sock.sendall(b"GET /raise HTTP/1.1\r\nHost: %s\r\n\r\n" % LOOPBACK.encode())
        assert read_until_closed(sock) == b""
    return Exchange("GET", b"/raise", b"", "HTTP/1.1", None, None, b"", 500, 0)


@pytest.mark.parametrize(("log_format", "log_as"), [("combined", "options"), ("json", "attribute")])
def test_every_request_is_logged_once_with_exact_fields(
    tmp_path: Path, log_format: str, log_as: str
) -> None:
    """Each answered request, error pages included, leaves one exact line, drained at exit."""
    log_path = tmp_path / "access.log"
    with serve(tmp_path, log_format, log_as) as server:
        started = time.time()
        expected = send_requests(server.port)
        expected.append(raise_before_responding(server.port))
        finished = time.time()
        assert log_path.read_bytes() == b"", "the writer should hold the lines until close"
        output = stop_gracefully(server)
    check_log(read_log_lines(log_path), expected, log_format, started, finished)
    # log_error keeps writing error messages to stderr; log_request no longer does.
    assert output.count("code 404, message File not found") == 2, output
    assert "code 501, message Unsupported method ('PUT')" in output, output
    assert "RuntimeError: the test handler raises" in output, output
    assert output.count("Traceback") == 1, output
    assert '"GET /hello.txt HTTP/1.1" 200' not in output, output


def test_a_custom_format_reads_every_record_by_name(tmp_path: Path) -> None:
    """A format of the user's own, reading ``record.status``, ``record.path`` and the
    other fields by name, gets a Record for every request."""
    log_path = tmp_path / "access.log"
    with serve(tmp_path, NAMED_FIELDS, "options") as server:
        started = time.time()
        # The policy's exchanges are left out: the rewrites build records of their own.
        expected = send_requests(server.port, policy=False)
        expected.append(raise_before_responding(server.port))
        finished = time.time()
        stop_gracefully(server)
    check_log(read_log_lines(log_path), expected, NAMED_FIELDS, started, finished)


def test_a_clock_step_back_during_a_request_logs_no_negative_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mixin measures the duration by the monotonic clock: a wall clock stepped back
    an hour while the handler runs changes neither its size nor its sign."""
    import boundlog.http_server

    readings = iter([1_700_003_600.0, 1_700_000_000.0])
    monkeypatch.setattr(boundlog.http_server, "time", lambda: next(readings, 1_700_000_000.0))
    capture = CapturingFormat(frozenset())

    class Handler(AccessLogMixin, BaseHTTPRequestHandler):
        access_log = AccessLog(str(tmp_path / "access.log"), format=capture)

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    with ThreadingHTTPServer((LOOPBACK, 0), Handler) as server:
        serving = threading.Thread(target=server.serve_forever)
        serving.start()
        try:
            connection = http.client.HTTPConnection(LOOPBACK, server.server_port)
            connection.request("GET", "/")
            assert connection.getresponse().read() == b"ok"
            connection.close()
            # The handler's thread submits once the response has gone out: wait for it.
            wait_until(lambda: Handler.access_log.stats().submitted == 1)
        finally:
            server.shutdown()
            serving.join()
    Handler.access_log.close()
    [record] = capture.records
    assert 0 <= record.duration < 60
    assert record.bytes_sent == 2
