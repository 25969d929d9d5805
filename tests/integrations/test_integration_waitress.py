"""waitress serving an application wrapped in boundlog's WSGI middleware (tests/apps/wsgi_app.py).

waitress has no logging hook of its own to replace: the middleware logs, and the exit
handlers drain its log once waitress stops gracefully, on KeyboardInterrupt.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from _servers import (
    LOOPBACK,
    PYTHON,
    Server,
    build_exchanges,
    check_drained_on_stop,
)

REQUESTS = 150


def waitress_serve(port: int) -> list[str]:
    # waitress removes forwarding headers from proxies it was not told to trust; here
    # boundlog's trusted_proxies decides instead.
    return [
        PYTHON, "-m", "waitress", f"--listen={LOOPBACK}:{port}",
        "--no-clear-untrusted-proxy-headers", "tests.apps.wsgi_app:app",
    ]  # fmt: skip


def waitress_from_python(port: int) -> list[str]:
    return [PYTHON, "-m", "tests.apps.waitress_main", str(port)]


@pytest.mark.parametrize(
    ("command", "stop_signal", "log_format"),
    [
        (waitress_serve, signal.SIGINT, "combined"),
        (waitress_from_python, signal.SIGTERM, "json"),
    ],
    ids=["waitress-serve-SIGINT", "serve-SIGTERM-as-KeyboardInterrupt"],
)
def test_every_request_is_logged_once_with_exact_fields(
    tmp_path: Path,
    command: Callable[[int], list[str]],
    stop_signal: signal.Signals,
    log_format: str,
) -> None:
    """N mixed requests leave exactly N correct lines, all written by the exit drain."""

    def stop(server: Server) -> None:
        assert server.stop(stop_signal=stop_signal) == 0, server.output()
        assert "boundlog:" not in server.output(), server.output()

    check_drained_on_stop(tmp_path, command, build_exchanges(REQUESTS), log_format, stop)
