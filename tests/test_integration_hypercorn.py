"""hypercorn serving an application wrapped in boundlog's ASGI middleware (tests/apps/asgi_app.py).

hypercorn writes no access log unless ``--access-logfile`` is given, so the middleware's
lines are the only ones.  On SIGTERM hypercorn finishes its requests and runs the
lifespan shutdown, where the middleware closes the log it owns.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from _servers import (
    HOLD_UNTIL_CLOSE,
    LOOPBACK,
    PYTHON,
    build_exchanges,
    check_log,
    read_log_lines,
    running_server,
    send_exchanges,
    server_environment,
)

REQUESTS = 150


def hypercorn_command(port: int) -> list[str]:
    return [
        PYTHON, "-m", "hypercorn", "--bind", f"{LOOPBACK}:{port}", "--workers", "1",
        "--log-level", "warning", "tests.apps.asgi_app:app",
    ]  # fmt: skip


@pytest.mark.parametrize("log_format", ["combined", "json"])
def test_every_request_is_logged_once_with_exact_fields(tmp_path: Path, log_format: str) -> None:
    """N mixed requests leave exactly N correct lines, written at the lifespan shutdown."""
    exchanges = build_exchanges(REQUESTS)
    log_path = tmp_path / "access.log"
    environment = server_environment(log_path, log_format, HOLD_UNTIL_CLOSE)
    with running_server(hypercorn_command, environment, tmp_path / "hypercorn.out") as server:
        started = time.time()
        send_exchanges(server.port, exchanges)
        finished = time.time()
        assert log_path.read_bytes() == b"", "the writer should hold the lines until close"
        assert server.stop() == 0, server.output()
        assert "boundlog:" not in server.output(), server.output()
    check_log(read_log_lines(log_path), exchanges, log_format, started, finished)
