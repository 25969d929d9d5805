"""End to end: uvicorn (httptools, uvloop) serving an app wrapped in boundlog's ASGI middleware.

Each test runs uvicorn as a real process on a loopback port, talks to it over real
sockets, stops it with SIGTERM and then reads the log file the middleware's own log
wrote (see tests/apps/asgi_app.py and tests/_servers.py).
"""

from __future__ import annotations

import json
import socket
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    NAMED_FIELDS,
    OPTIONS_VARIABLE,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    Server,
    build_exchanges,
    check_drained_on_stop,
    parse_combined_line,
    read_log_lines,
    running_server,
    server_environment,
)
from _servers import stop_gracefully as stop_server_gracefully

REQUESTS = 200


def uvicorn_command(port: int) -> list[str]:
    return [
        PYTHON, "-m", "uvicorn", "tests.apps.asgi_app:app",
        "--no-access-log", "--host", LOOPBACK, "--port", str(port), "--lifespan", "on",
        "--loop", "uvloop", "--http", "httptools", "--log-level", "warning",
    ]  # fmt: skip


def uvicorn(
    tmp_path: Path,
    log_format: str = "combined",
    flush_interval: str = "0.01",
    options: dict[str, Any] | None = None,
) -> AbstractContextManager[Server]:
    environment = server_environment(tmp_path / "access.log", log_format, flush_interval)
    if options is not None:
        environment[OPTIONS_VARIABLE] = json.dumps(options)
    return running_server(uvicorn_command, environment, tmp_path / "uvicorn.out")


def stop_gracefully(server: Server) -> None:
    stop_server_gracefully(server, UVICORN_CLEAN_EXITS)


@pytest.mark.parametrize("log_format", ["combined", "json", "logfmt"])
def test_every_request_is_logged_once_with_exact_fields(tmp_path: Path, log_format: str) -> None:
    """N mixed requests leave exactly N correct lines, all written by the SIGTERM drain."""
    exchanges = build_exchanges(REQUESTS)
    check_drained_on_stop(tmp_path, uvicorn_command, exchanges, log_format, stop_gracefully)


def test_a_custom_format_reads_every_record_by_name(tmp_path: Path) -> None:
    """A format of the user's own, reading ``record.status``, ``record.path`` and the
    other fields by name, gets a Record for every request."""
    exchanges = build_exchanges(REQUESTS)
    check_drained_on_stop(tmp_path, uvicorn_command, exchanges, NAMED_FIELDS, stop_gracefully)


def test_exception_before_response_is_logged_as_500_and_server_keeps_serving(
    tmp_path: Path,
) -> None:
    """An app raising before responding leaves a 500 line, and the next request still works."""
    with uvicorn(tmp_path) as server:
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
    """A client closing its socket mid-stream leaves one line counting the bytes sent so far."""
    chunks, size = 500, 1000
    stream_path = b"/stream-until-disconnect/%d/%d" % (chunks, size)
    with uvicorn(tmp_path) as server:
        with socket.create_connection((LOOPBACK, server.port), timeout=CLIENT_TIMEOUT) as sock:
            sock.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (stream_path, LOOPBACK.encode()))
            received = b""
            while b"d" * size not in received:
                part = sock.recv(65536)
                assert part, f"connection closed before the first chunk: {received!r}"
                received += part
        # Closing the socket is the disconnect; the server must go on serving.
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
    # Whole chunks, at least the one the client read, far fewer than the full stream.
    assert streamed.bytes_sent % size == 0
    assert size <= streamed.bytes_sent < chunks * size


def test_policy_skips_redacts_and_logs_the_forwarded_client(tmp_path: Path) -> None:
    """Through uvicorn from trusted 127.0.0.1: /healthz and /status/* skipped but for
    their errors, token redacted, client forwarded."""
    options = {"skip_paths": ["/healthz", "/status/*"], "trusted_proxies": ["127.0.0.1"]}
    forwarded = {"X-Forwarded-For": "6.6.6.6, 203.0.113.5"}
    with uvicorn(tmp_path, options=options) as server:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            assert client.get("/healthz", headers=forwarded).status_code == 200
            assert client.get("/status/204").status_code == 204
            assert client.get("/status/503").status_code == 503
            assert client.get("/bytes/5?page=2&token=s3cret", headers=forwarded).status_code == 200
            assert client.get("/status/399").status_code == 399
            assert client.get("/status/400").status_code == 400
            assert client.get("/bytes/3").status_code == 200
        stop_gracefully(server)
    lines = read_log_lines(tmp_path / "access.log")
    assert b"s3cret" not in b"".join(lines)
    logged = [(line.split(b" ")[0], line.split(b'"')[1]) for line in lines]
    assert logged == [
        (LOOPBACK.encode(), b"GET /status/503 HTTP/1.1"),
        (b"203.0.113.5", b"GET /bytes/5?page=2&token=[redacted] HTTP/1.1"),
        (LOOPBACK.encode(), b"GET /status/400 HTTP/1.1"),
        (LOOPBACK.encode(), b"GET /bytes/3 HTTP/1.1"),
    ]
