"""granian serving an application wrapped in boundlog's middleware: ASGI, ASGI without
the lifespan (``asginl``), and WSGI.

granian writes its own access log only with ``--access-log``; it stays off here.  The
application (tests/apps/asgi_app.py, tests/apps/wsgi_app.py) runs in granian's worker
process.  Under ``asgi``, its lifespan shutdown, on SIGTERM to the main process, closes
the middleware's log.  Under ``asginl`` and ``wsgi`` there is no lifespan, and the
worker, a multiprocessing child, ends with ``os._exit``, which skips the exit handlers:
multiprocessing's finalizers drain the log there (engine/_log.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    PYTHON,
    SINK_VARIABLE,
    Exchange,
    build_exchanges,
    check_drained_on_stop,
    read_log_lines,
    running_server,
)

pytestmark = pytest.mark.needs("granian")

REQUESTS = 150


def granian_command(port: int, interface: str = "asgi", app: str | None = None) -> list[str]:
    if app is None:
        app = "tests.apps.wsgi_app:app" if interface == "wsgi" else "tests.apps.asgi_app:app"
    return [
        PYTHON, "-m", "granian", "--interface", interface, "--host", LOOPBACK,
        "--port", str(port), "--workers", "1", "--no-access-log", "--log-level", "warning",
        app,
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


@pytest.mark.parametrize("interface", ["asginl", "wsgi"])
def test_without_a_lifespan_the_workers_exit_drains_the_log(tmp_path: Path, interface: str) -> None:
    """No lifespan, and no exit handlers in granian's worker: every line was lost on
    SIGTERM, without a word, until multiprocessing's finalizers drained the log."""
    exchanges = [
        exchange
        for exchange in build_exchanges(40)
        if exchange.protocol == "HTTP/1.1" and (interface != "wsgi" or _wsgi_usable(exchange))
    ]
    assert len(exchanges) > 10
    check_drained_on_stop(
        tmp_path, lambda port: granian_command(port, interface), exchanges, "combined"
    )


def _wsgi_usable(exchange: Exchange) -> bool:
    """Whether granian's WSGI interface serves ``exchange`` as the routes expect: it
    answers 500 to an application using PEP 3333's write() callable (the streamed
    routes of tests/apps/wsgi_app.py), and gives a header field whose value is not
    ASCII as an empty str in the environ."""
    fields = (exchange.referer, exchange.user_agent)
    return not exchange.path.startswith(b"/stream/") and all(
        field is None or field.isascii() for field in fields
    )


@pytest.mark.needs("starlette")
def test_a_background_task_running_at_shutdown_still_gets_its_line(tmp_path: Path) -> None:
    """granian stops its worker right after the lifespan shutdown, without waiting for
    what an application does after its response.  A json log holds the record until
    the application returns (for the fields such work adds): the line was lost, not
    even counted.  The shutdown now waits for held records (at most close_timeout)."""
    log_path = tmp_path / "access.log"
    command = lambda port: granian_command(port, app="tests.apps.background_task_app:app")  # noqa: E731
    with running_server(
        command, {SINK_VARIABLE: str(log_path)}, tmp_path / "granian.out"
    ) as server:
        answered = httpx.get(f"{server.base_url}/report", timeout=CLIENT_TIMEOUT)
        assert answered.status_code == 200
        server.stop()
        output = server.output()
    assert "boundlog:" not in output, output
    (line,) = read_log_lines(log_path)
    record = json.loads(line)
    assert (record["path"], record["status"], record["finished"]) == ("/report", 200, "at shutdown")
