"""``completed`` and ``bytes_received`` in a record's extras, under real servers: a
response the client abandons mid-stream is told apart from a finished one, and the
request body's bytes the application read are counted (tests/apps/exchange_*.py)."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    http_client,
    read_log_lines,
    running_server,
    server_environment,
    stop_gracefully,
    uvicorn_app_command,
)
from apps.exchange_fields import CHUNK, COMPLETED_ONLY, STREAM_CHUNKS

# The C request paths (the default) and the pure-Python ones.
CORES = pytest.mark.parametrize("core", ["c", "python"])
UPLOAD = b"u" * 70_000
# The body sent in chunks of these sizes (Transfer-Encoding: chunked).
UPLOAD_CHUNKS = (1, 4096, 30_000)


def core_environment(core: str) -> dict[str, str]:
    return {"BOUNDLOG_NO_EXTENSIONS": "1"} if core == "python" else {}


Records = dict[str, list[dict[str, Any]]]


def logged(log_path: Path) -> Records:
    """The log's records, by path, in the order they were logged."""
    by_path: Records = {}
    for line in read_log_lines(log_path):
        record = json.loads(line)
        by_path.setdefault(record["path"], []).append(record)
    return by_path


def chunked_upload() -> Iterator[bytes]:
    for size in UPLOAD_CHUNKS:
        yield b"c" * size


def send_requests(port: int) -> None:
    """A finished stream, two uploads (one chunked) and a stream the client abandons."""
    with http_client(port) as client:
        streamed = client.get("/stream")
        assert streamed.content == CHUNK * STREAM_CHUNKS
        assert client.post("/upload", content=UPLOAD).text == str(len(UPLOAD))
        chunked = client.post("/upload", content=chunked_upload())
        assert chunked.text == str(sum(UPLOAD_CHUNKS))
    abandon(port)


def abandon(port: int) -> None:
    """Ask for /abandoned, read its first chunk, and reset the connection."""
    with socket.create_connection((LOOPBACK, port), timeout=CLIENT_TIMEOUT) as connection:
        connection.sendall(b"GET /abandoned HTTP/1.1\r\nHost: test\r\n\r\n")
        received = b""
        while CHUNK not in received:
            data = connection.recv(65536)
            assert data, received
            received += data
        # A reset rather than an orderly close: the server's next write fails at once.
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def check_records(by_path: Records, bytes_received: bool) -> None:
    """What the middleware or gunicorn's logger learnt of each exchange; with
    ``bytes_received`` false, a log that counts no request body (gunicorn's logger, a
    log reading ``completed`` only)."""
    [streamed] = by_path["/stream"]
    assert streamed["completed"] is True, streamed
    assert streamed["bytes_sent"] == len(CHUNK) * STREAM_CHUNKS
    uploads = by_path["/upload"]
    assert [upload["completed"] for upload in uploads] == [True, True]
    assert [upload["bytes_received"] for upload in uploads] == (
        [len(UPLOAD), sum(UPLOAD_CHUNKS)] if bytes_received else [None, None]
    )
    [abandoned] = by_path["/abandoned"]
    assert abandoned["status"] == 200
    assert abandoned["completed"] is False, abandoned
    assert abandoned["bytes_sent"] >= len(CHUNK)
    if bytes_received:
        assert streamed["bytes_received"] == abandoned["bytes_received"] == 0


@CORES
@pytest.mark.parametrize("log_format", ["both", COMPLETED_ONLY])
def test_uvicorn_tells_an_abandoned_response_from_a_finished_one(
    tmp_path: Path, core: str, log_format: str
) -> None:
    """A log reading ``completed`` only keeps the C request path."""
    log_path = tmp_path / "access.log"
    environment = {**server_environment(log_path, log_format, "0.01"), **core_environment(core)}
    command = lambda port: uvicorn_app_command(port, "tests.apps.exchange_asgi:app")  # noqa: E731
    with running_server(command, environment, tmp_path / "uvicorn.out") as server:
        send_requests(server.port)
        stop_gracefully(server, UVICORN_CLEAN_EXITS)
    by_path = logged(log_path)
    check_records(by_path, bytes_received=log_format != COMPLETED_ONLY)
    # The application noticed the client leaving after its first chunk, and sent no more.
    assert by_path["/abandoned"][0]["bytes_sent"] == len(CHUNK)


@CORES
@pytest.mark.parametrize("log_format", ["both", COMPLETED_ONLY])
def test_gunicorn_tells_an_abandoned_response_from_a_finished_one(
    tmp_path: Path, core: str, log_format: str
) -> None:
    """Under gunicorn's sync worker, through the WSGI middleware and gunicorn's logger;
    a log reading ``completed`` only keeps the C request path."""
    log_path = tmp_path / "access.log"
    gunicorn_log = tmp_path / "gunicorn.log"
    environment = {**server_environment(log_path, log_format, "0.01"), **core_environment(core)}

    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "-k", "sync", "-w", "1", "-b", f"{LOOPBACK}:{port}",
            "--graceful-timeout", "10", "--log-level", "warning",
            "--logger-class", "tests.apps.exchange_wsgi.ExchangeFieldsLogger",
            "--access-logfile", str(gunicorn_log), "tests.apps.exchange_wsgi:app",
        ]  # fmt: skip

    with running_server(command, environment, tmp_path / "gunicorn.out") as server:
        send_requests(server.port)
        stop_gracefully(server)
    check_records(logged(log_path), bytes_received=log_format != COMPLETED_ONLY)
    check_records(logged(gunicorn_log), bytes_received=False)
