"""aiohttp with ``boundlog.aiohttp``: its access logger class, under run_app and AppRunner.

Each server is tests/apps/aiohttp_app.py run as a real process; SIGTERM is aiohttp's
graceful stop, after which every request must have exactly one line.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from _servers import (
    CLIENT_TIMEOUT,
    HOLD_UNTIL_CLOSE,
    NAMED_FIELDS,
    PYTHON,
    REPO_ROOT,
    Exchange,
    PipeReader,
    Server,
    build_exchanges,
    check_log,
    read_log_lines,
    running_server,
    running_server_with_stdout,
    send_exchanges,
    send_http10,
    server_environment,
    stop_gracefully,
)
from boundlog import AccessLog, ConfigurationError
from boundlog.aiohttp import AccessLogger, access_logger

REQUESTS = 150
# A request for the page aiohttp writes itself when the handler raises.
RAISE = Exchange("GET", b"/raise", b"", "HTTP/1.0", None, None, b"", 500, 0)
# Requests for the file the application sends (its own source) with sendfile().
FILE_SIZE = (REPO_ROOT / "tests" / "apps" / "aiohttp_app.py").stat().st_size
FILES = [
    Exchange(
        "GET",
        b"/file",
        b"",
        "HTTP/1.1",
        b"http://example.test/",
        b"curl/8.5.0",
        b"",
        200,
        FILE_SIZE,
    ),
    Exchange("GET", b"/file", b"v=2", "HTTP/1.0", None, None, b"", 200, FILE_SIZE),
    Exchange("HEAD", b"/file", b"", "HTTP/1.1", None, None, b"", 200, 0),
]


def aiohttp_command(mode: str) -> list[str]:
    return [PYTHON, "-m", "tests.apps.aiohttp_app", mode]


def send_traffic(port: int, exchanges: Sequence[Exchange]) -> list[Exchange]:
    """Send the exchanges, files and one request to /raise; return what the log must show."""
    exchanges = [*exchanges, *FILES]
    send_exchanges(port, exchanges)
    status, error_page = send_http10(port, RAISE)
    assert status == 500
    return [on_the_wire(exchange, len(error_page)) for exchange in [*exchanges, RAISE]]


def on_the_wire(exchange: Exchange, error_page: int) -> Exchange:
    """The exchange with the bytes aiohttp writes after the headers for it."""
    if exchange.path == b"/raise":
        return exchange._replace(bytes_sent=error_page)
    if exchange.path.startswith(b"/stream/") and exchange.protocol == "HTTP/1.1":
        # An HTTP/1.1 stream without a length is chunked: each write is framed as
        # "<hex size>\r\n...\r\n", and "0\r\n\r\n" ends the body.
        chunks, size = map(int, exchange.path.split(b"/")[2:])
        framing = chunks * (len(b"%x" % size) + 4) + 5 if exchange.method == "GET" else 0
        return exchange._replace(bytes_sent=exchange.bytes_sent + framing)
    return exchange


@pytest.mark.parametrize(
    ("log_format", "make_exchanges"),
    [
        ("combined", build_exchanges),
        ("json", build_exchanges),
        (NAMED_FIELDS, build_exchanges),
    ],
    ids=["combined", "json", "custom-format-by-name"],
)
def test_run_app_with_access_logger_logs_every_request_once(
    tmp_path: Path, log_format: str, make_exchanges: Callable[[int], list[Exchange]]
) -> None:
    """Under run_app, N requests leave N exact lines, written when cleanup closes the log;
    a format of the user's own reading the records' fields by name gets Records."""
    log_path = tmp_path / "access.log"
    environment = server_environment(log_path, log_format, HOLD_UNTIL_CLOSE)
    with running_server(
        lambda port: [*aiohttp_command("run_app"), str(port)],
        environment,
        tmp_path / "aiohttp.out",
    ) as server:
        started = time.time()
        expected = send_traffic(server.port, make_exchanges(REQUESTS))
        finished = time.time()
        assert log_path.read_bytes() == b"", "the writer should hold the lines until close"
        stop_gracefully(server)
    check_log(read_log_lines(log_path), expected, log_format, started, finished)


def plain_server_lines(
    tmp_path: Path, log_format: str, send: Callable[[Server], None]
) -> tuple[list[bytes], Server]:
    """Run the plain AccessLogger with ``log_format``, ``send`` to it, stop it: its lines."""
    environment = server_environment(tmp_path / "unused", log_format, "0.01")
    with PipeReader() as pipe:
        with running_server_with_stdout(
            lambda port: [*aiohttp_command("plain"), str(port)],
            environment,
            tmp_path / "aiohttp.err",
            pipe.write_fd,
        ) as server:
            pipe.close_write_end()
            send(server)
            stop_gracefully(server)
        pipe.wait_closed()
        return pipe.lines(), server


def test_plain_access_logger_writes_the_named_format_to_stdout(tmp_path: Path) -> None:
    """AccessLogger used as it is logs to stdout, in the format access_log_format names.

    Its log has boundlog's default policy: health checks logged, no proxy trusted.
    """
    expected: list[Exchange] = []

    def send(server: Server) -> None:
        expected.extend(send_traffic(server.port, build_exchanges(60, seed=3)))

    started = time.time()
    lines, _ = plain_server_lines(tmp_path, "json", send)
    check_log(lines, expected, "json", started, time.time(), app_policy=False)


def test_app_runner_with_a_borrowed_log_flushes_it_at_cleanup(tmp_path: Path) -> None:
    """With AppRunner, cleanup flushes a borrowed log: every line is written before exit."""
    log_path = tmp_path / "access.log"
    environment = server_environment(log_path, "combined", HOLD_UNTIL_CLOSE)
    with running_server(
        lambda port: [*aiohttp_command("runner"), str(port)],
        environment,
        tmp_path / "aiohttp.out",
    ) as server:
        started = time.time()
        expected = send_traffic(server.port, build_exchanges(60, seed=4))
        finished = time.time()
        stop_gracefully(server)
        logged = sum(exchange.logged for exchange in expected)
        assert f"written={logged}" in server.output().split()
    check_log(read_log_lines(log_path), expected, "combined", started, finished)


def test_plain_access_logger_writes_a_custom_template(tmp_path: Path) -> None:
    """An aiohttp access_log_format template writes its directives, header fields escaped."""
    template = '%a "%r" %s %b "%{X-Request-ID}i" "%{Content-Length}o" %P %Tf'
    requests = [
        ("GET", "/bytes/5?n=1", {"X-Request-ID": "id-1"}),
        ("GET", "/no/such/page", {"X-Request-ID": 'q"uote\\'}),
        ("HEAD", "/bytes/7", {}),
    ]

    def send(server: Server) -> None:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            for method, target, headers in requests:
                client.request(method, target, headers=headers)

    lines, server = plain_server_lines(tmp_path, template, send)
    pid = str(server.process.pid).encode()
    assert all(re.fullmatch(rb".* " + pid + rb" \d+\.\d{6}", line) for line in lines), lines
    assert sorted(line.rsplit(b" ", 2)[0] for line in lines) == sorted(
        [
            b'127.0.0.1 "GET /bytes/5?n=1 HTTP/1.1" 200 5 "id-1" "5"',
            b'127.0.0.1 "GET /no/such/page HTTP/1.1" 404 10 "q\\x22uote\\x5c" "10"',
            b'127.0.0.1 "HEAD /bytes/7 HTTP/1.1" 200 - "-" "7"',
        ]
    )


def test_unknown_directive_drops_connections_and_says_why(tmp_path: Path) -> None:
    """An aiohttp template boundlog cannot write refuses each connection with an error."""
    environment = server_environment(tmp_path / "unused", "%a %t %{HOME}Q", "0.01")
    with running_server(
        lambda port: [*aiohttp_command("plain"), str(port)],
        environment,
        tmp_path / "aiohttp.out",
    ) as server:
        with pytest.raises(httpx.TransportError):
            httpx.get(server.base_url + "/bytes/5", timeout=CLIENT_TIMEOUT)
        assert server.stop() == 0, server.output()
        output = server.output()
    assert "boundlog: unknown directive %{HOME}Q at position 6" in output, output


@pytest.mark.parametrize(
    ("log_format", "message"),
    [
        ('%a "%r" %s %O', "unknown directive %O at position 11"),
        ("%a %{User-Agent", "an unterminated %{ at position 3"),
        ("apache", "is not supported: give a template such as"),
    ],
)
def test_plain_access_logger_refuses_templates_it_cannot_write(
    log_format: str, message: str
) -> None:
    """AccessLogger names the directive it cannot write, or asks for a template or a name."""
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        AccessLogger(logging.getLogger("aiohttp.access"), log_format)


def test_bound_access_logger_refuses_a_format_it_would_ignore(tmp_path: Path) -> None:
    """A class made by access_logger() refuses an access_log_format it would not use."""
    log = AccessLog(str(tmp_path / "access.log"))
    try:
        bound = access_logger(log=log)
        bound(logging.getLogger("aiohttp.access"), web.AccessLogger.LOG_FORMAT)
        with pytest.raises(ConfigurationError, match="pass format= to it instead"):
            bound(logging.getLogger("aiohttp.access"), "json")
    finally:
        log.close()


def test_access_logger_takes_a_log_or_its_options_not_both(tmp_path: Path) -> None:
    """access_logger() refuses a log together with options, which it could not apply."""
    with (
        AccessLog(str(tmp_path / "access.log")) as log,
        pytest.raises(ConfigurationError, match="not both"),
    ):
        access_logger(log=log, format="json")
