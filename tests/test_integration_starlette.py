"""uvicorn serving a Starlette application with ``app.add_middleware(AccessLogMiddleware, ...)``.

The application is tests/apps/starlette_app.py; FastAPI adds middleware the same way.
uvicorn's own access log is off (``--no-access-log``) and the lifespan on, because the
lifespan shutdown is where the middleware drains its log: uvicorn ends a graceful
shutdown by re-raising SIGTERM on itself, which skips the exit handlers.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from _servers import (
    LOOPBACK,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    build_exchanges,
    check_drained_on_stop,
    stop_gracefully,
)

REQUESTS = 150


def uvicorn_command(port: int) -> list[str]:
    return [
        PYTHON, "-m", "uvicorn", "tests.apps.starlette_app:app", "--no-access-log",
        "--lifespan", "on", "--host", LOOPBACK, "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip


@pytest.mark.parametrize("log_format", ["combined", "json"])
def test_every_request_is_logged_once_with_exact_fields(tmp_path: Path, log_format: str) -> None:
    """N mixed requests leave exactly N correct lines, written at the lifespan shutdown."""
    # Starlette re-raises an application's exception after sending its 500 page, and
    # uvicorn then closes the connection: /raise goes over a connection of its own, so
    # that no keep-alive request races that close.
    exchanges = [
        exchange._replace(protocol="HTTP/1.0") if exchange.path == b"/raise" else exchange
        for exchange in build_exchanges(REQUESTS)
    ]
    check_drained_on_stop(
        tmp_path,
        uvicorn_command,
        exchanges,
        log_format,
        stop=partial(stop_gracefully, clean_exits=UVICORN_CLEAN_EXITS),
    )
