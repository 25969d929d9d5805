"""End to end: gunicorn's gthread worker serving an app wrapped in boundlog's WSGI middleware.

gunicorn runs as a real master with one worker of four threads, without --preload, so
the worker imports tests/apps/wsgi_app.py and creates the middleware's log after the
fork.  Nothing closes that log explicitly: after SIGTERM to the master, the worker
finishes its requests, returns from its run loop and leaves through ``sys.exit(0)``
(gunicorn/arbiter.py, ``spawn_worker``), so the interpreter's normal exit runs the
atexit backstop that must drain the log.
"""

from __future__ import annotations

import socket
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    NAMED_FIELDS,
    Server,
    build_exchanges,
    check_drained_on_stop,
    gunicorn_app_command,
    parse_combined_line,
    read_log_lines,
    running_server,
    server_environment,
    stop_gracefully,
)

REQUESTS = 200


def gunicorn_command(port: int) -> list[str]:
    return gunicorn_app_command(port, "tests.apps.wsgi_app:app")


def gunicorn(
    tmp_path: Path, log_format: str = "combined", flush_interval: str = "0.01"
) -> AbstractContextManager[Server]:
    environment = server_environment(tmp_path / "access.log", log_format, flush_interval)
    return running_server(gunicorn_command, environment, tmp_path / "gunicorn.out")


@pytest.mark.parametrize("log_format", ["combined", "json"])
def test_every_request_is_logged_once_with_exact_fields(tmp_path: Path, log_format: str) -> None:
    """N mixed requests leave exactly N correct lines, all written by the worker's exit drain."""
    check_drained_on_stop(tmp_path, gunicorn_command, build_exchanges(REQUESTS), log_format)


def test_a_custom_format_reads_every_record_by_name(tmp_path: Path) -> None:
    """A format of the user's own, reading ``record.status``, ``record.path`` and the
    other fields by name, gets a Record for every request."""
    exchanges = build_exchanges(REQUESTS)
    check_drained_on_stop(tmp_path, gunicorn_command, exchanges, NAMED_FIELDS)


def test_exception_before_response_is_logged_as_500_and_server_keeps_serving(
    tmp_path: Path,
) -> None:
    """An app raising before responding leaves a 500 line, and the next request still works."""
    with gunicorn(tmp_path) as server:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            assert client.get("/raise").status_code == 500
            served = client.get("/bytes/5")
        assert (served.status_code, served.content) == (200, b"xxxxx")
        stop_gracefully(server)
    logged = [parse_combined_line(line)[0] for line in read_log_lines(tmp_path / "access.log")]
    assert [(fields.target, fields.status, fields.bytes_sent) for fields in logged] == [
        (b"/raise", 500, 0),
        (b"/bytes/5", 200, 5),
    ]


def test_client_gone_mid_stream_is_logged_with_the_bytes_handed_over(tmp_path: Path) -> None:
    """A client closing its socket mid-stream leaves one line counting the chunks taken so far."""
    # 64 MiB: far more than loopback socket buffers hold, so the server's writes fail
    # once the client is gone and it stops taking chunks.
    chunks, size = 1024, 65536
    stream_path = b"/stream/%d/%d" % (chunks, size)
    with gunicorn(tmp_path) as server:
        with socket.create_connection((LOOPBACK, server.port), timeout=CLIENT_TIMEOUT) as sock:
            sock.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (stream_path, LOOPBACK.encode()))
            received = b""
            while len(received) < 2 * size:
                part = sock.recv(65536)
                assert part, f"connection closed after {len(received)} bytes"
                received += part
        served = httpx.get(server.base_url + "/bytes/5", timeout=CLIENT_TIMEOUT)
        assert served.status_code == 200
        stop_gracefully(server)
    logged = {
        fields.target: fields
        for fields, _ in map(parse_combined_line, read_log_lines(tmp_path / "access.log"))
    }
    assert sorted(logged) == [b"/bytes/5", stream_path]
    streamed = logged[stream_path]
    assert streamed.status == 200
    assert streamed.bytes_sent % size == 0
    assert size <= streamed.bytes_sent < chunks * size
