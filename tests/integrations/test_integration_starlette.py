"""uvicorn serving a Starlette application with ``app.add_middleware(AccessLogMiddleware, ...)``.

The application is tests/apps/starlette_app.py; FastAPI adds middleware the same way.
uvicorn's own access log is off (``--no-access-log``) and the lifespan on, because the
lifespan shutdown is where the middleware drains its log: uvicorn ends a graceful
shutdown by re-raising SIGTERM on itself, which skips the exit handlers.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import pytest

from _servers import (
    FORMAT_VARIABLE,
    LOOPBACK,
    PYTHON,
    SINK_VARIABLE,
    UVICORN_CLEAN_EXITS,
    build_exchanges,
    check_drained_on_stop,
    run_until_exit,
    server_environment,
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


# An ASGI server started the way its documentation says, with nothing about lifespan.
DEFAULT_SERVERS = {
    "uvicorn": lambda app: lambda port: [
        PYTHON, "-m", "uvicorn", app, "--host", LOOPBACK, "--port", str(port),
    ],
    "hypercorn": lambda app: lambda port: [
        PYTHON, "-m", "hypercorn", app, "--bind", f"{LOOPBACK}:{port}",
    ],
    "granian": lambda app: lambda port: [
        PYTHON, "-m", "granian", "--interface", "asgi", "--host", LOOPBACK,
        "--port", str(port), app,
    ],
}  # fmt: skip
# (options the log cannot be built with, what the reason the server prints must say).
UNUSABLE_LOGS = {
    "missing-directory": (
        {SINK_VARIABLE: "/no/such/directory/access.log"},
        "/no/such/directory/access.log: No such file or directory",
    ),
    "misspelt-format": ({FORMAT_VARIABLE: "combind"}, "unknown format 'combind'"),
}


@pytest.mark.parametrize("unusable", UNUSABLE_LOGS.values(), ids=UNUSABLE_LOGS.keys())
@pytest.mark.parametrize(
    ("server", "app"),
    [
        pytest.param("uvicorn", "tests.apps.starlette_app:app", id="uvicorn-starlette"),
        pytest.param("hypercorn", "tests.apps.starlette_app:app", id="hypercorn-starlette"),
        pytest.param(
            "granian",
            "tests.apps.starlette_app:app",
            id="granian-starlette",
            marks=pytest.mark.needs("granian"),
        ),
        pytest.param(
            "uvicorn",
            "tests.apps.fastapi_app:app",
            id="uvicorn-fastapi",
            marks=pytest.mark.needs("fastapi"),
        ),
    ],
)
def test_a_log_that_cannot_be_built_stops_the_server_at_startup_with_the_reason(
    tmp_path: Path, server: str, app: str, unusable: tuple[dict[str, str], str]
) -> None:
    """add_middleware builds the middleware inside the lifespan startup, where uvicorn's
    default lifespan "auto" took an exception for "lifespan unsupported" and served 500
    to every request; the startup now fails with the reason, and the server stops."""
    variables, reason = unusable
    environment = {**server_environment(tmp_path / "access.log", "combined", "0.01"), **variables}
    status, output = run_until_exit(DEFAULT_SERVERS[server](app), environment, tmp_path / "out")
    assert re.search("boundlog: .*" + re.escape(reason), output), output
    if server == "hypercorn":
        # hypercorn 0.18 loses its worker's exit status and exits 0 whatever it was
        # (pgjones/hypercorn#269): it stops all the same, with the reason in the
        # traceback of the worker's LifespanFailureError.
        return
    # uvicorn's status for a failed startup is 3; granian's for any failure, 1.
    assert status == {"uvicorn": 3, "granian": 1}[server], output
    assert "Traceback" not in output, output
