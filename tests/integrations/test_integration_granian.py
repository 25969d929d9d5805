"""granian (ASGI interface) serving an application wrapped in boundlog's ASGI middleware.

granian writes its own access log only with ``--access-log``; it stays off here.  The
application (tests/apps/asgi_app.py) runs in granian's worker process, whose lifespan
shutdown, on SIGTERM to the main process, closes the middleware's log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _servers import LOOPBACK, PYTHON, build_exchanges, check_drained_on_stop

pytestmark = pytest.mark.needs("granian")

REQUESTS = 150


def granian_command(port: int) -> list[str]:
    return [
        PYTHON, "-m", "granian", "--interface", "asgi", "--host", LOOPBACK,
        "--port", str(port), "--workers", "1", "--no-access-log", "--log-level", "warning",
        "tests.apps.asgi_app:app",
    ]  # fmt: skip


@pytest.mark.parametrize("log_format", ["combined", "json"])
def test_every_request_is_logged_once_with_exact_fields(tmp_path: Path, log_format: str) -> None:
    """N mixed HTTP/1.1 requests leave exactly N correct lines, written at the lifespan shutdown."""
    exchanges = [
        exchange for exchange in build_exchanges(REQUESTS) if exchange.protocol == "HTTP/1.1"
    ]
    check_drained_on_stop(tmp_path, granian_command, exchanges, log_format)


def test_http10_requests_are_logged_as_http10(tmp_path: Path) -> None:
    """HTTP/1.0 requests are logged as HTTP/1.0, though granian reports the version as "1"."""
    exchanges = [exchange for exchange in build_exchanges(40) if exchange.protocol == "HTTP/1.0"]
    assert exchanges
    check_drained_on_stop(tmp_path, granian_command, exchanges, "combined")
