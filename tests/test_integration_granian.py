"""granian (ASGI interface) serving an application wrapped in boundlog's ASGI middleware.

granian writes its own access log only with ``--access-log``; it stays off here.  The
application (tests/apps/asgi_app.py) runs in granian's worker process, whose lifespan
shutdown, on SIGTERM to the main process, closes the middleware's log.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from _servers import (
    HOLD_UNTIL_CLOSE,
    LOOPBACK,
    PYTHON,
    Exchange,
    build_exchanges,
    check_log,
    read_log_lines,
    running_server,
    send_exchanges,
    server_environment,
)

REQUESTS = 150
# granian (2.8) gives HTTP/1.0 requests the ASGI http_version "1", which the spec does
# not allow ("1.0", "1.1" or "2"), and the middleware logs it as it comes.


def granian_command(port: int) -> list[str]:
    return [
        PYTHON, "-m", "granian", "--interface", "asgi", "--host", LOOPBACK,
        "--port", str(port), "--workers", "1", "--no-access-log", "--log-level", "warning",
        "tests.apps.asgi_app:app",
    ]  # fmt: skip


def log_exchanges(tmp_path: Path, exchanges: list[Exchange], log_format: str) -> None:
    """Send the exchanges to granian, stop it, and check the log has one exact line each."""
    log_path = tmp_path / "access.log"
    environment = server_environment(log_path, log_format, HOLD_UNTIL_CLOSE)
    with running_server(granian_command, environment, tmp_path / "granian.out") as server:
        started = time.time()
        send_exchanges(server.port, exchanges)
        finished = time.time()
        assert log_path.read_bytes() == b"", "the writer should hold the lines until close"
        assert server.stop() == 0, server.output()
        assert "boundlog:" not in server.output(), server.output()
    check_log(read_log_lines(log_path), exchanges, log_format, started, finished)


@pytest.mark.parametrize("log_format", ["combined", "json"])
def test_every_request_is_logged_once_with_exact_fields(tmp_path: Path, log_format: str) -> None:
    """N mixed HTTP/1.1 requests leave exactly N correct lines, written at the lifespan shutdown."""
    exchanges = [
        exchange for exchange in build_exchanges(REQUESTS) if exchange.protocol == "HTTP/1.1"
    ]
    log_exchanges(tmp_path, exchanges, log_format)


def test_http10_requests_are_logged_as_http10(tmp_path: Path) -> None:
    """HTTP/1.0 requests are logged as HTTP/1.0, though granian reports the version as "1"."""
    exchanges = [exchange for exchange in build_exchanges(40) if exchange.protocol == "HTTP/1.0"]
    assert exchanges
    log_exchanges(tmp_path, exchanges, "combined")
