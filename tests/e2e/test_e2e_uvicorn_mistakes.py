"""End to end: the usual mistakes with uvicorn's own logging and lifespan are said on
stderr, once.

* Forgetting ``--no-access-log``: uvicorn logs every request too (twice the lines, its
  cost, and its lines show the query values boundlog redacts).  The ASGI middleware
  says so when it starts, from uvicorn's own state; not with ``--no-access-log``, nor
  under hypercorn in a process where uvicorn configured logging.
* ``LoggingSink("uvicorn.access")`` under ``--no-access-log``, which empties that
  logger's handlers: every line would be lost without a word.  Said when the log opens,
  and the lines are counted as failed.
* ``--lifespan off`` with a middleware a framework builds in uvicorn's first call
  (FastAPI's ``add_middleware``): nothing would drain its log.  Said at the first
  request.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    read_log_lines,
    running_server,
)

APP = "tests.apps.environment_app:app"
OWN_ACCESS_LOG = "boundlog: uvicorn's own access log is on too"
UNREACHED = "boundlog: no handler reaches logger 'uvicorn.access'"


def uvicorn(port: int, *options: str) -> list[str]:
    return [
        PYTHON, "-m", "uvicorn", APP, "--host", LOOPBACK, "--port", str(port),
        "--lifespan", "on", *options,
    ]  # fmt: skip


def serve_two_requests(
    tmp_path: Path, command: list[str] | None, environment: dict[str, str], *, script: str = ""
) -> tuple[str, str]:
    """Run the server, read its output before any request and after two and a stop."""
    if script:
        (tmp_path / "run.py").write_text(script)

    def argv(port: int) -> list[str]:
        if command is None:
            return [PYTHON, str(tmp_path / "run.py"), str(port)]
        return uvicorn(port, *command)

    with running_server(argv, environment, tmp_path / "server.out") as server:
        before = server.output()
        for _ in range(2):
            response = httpx.get(f"{server.base_url}/?password=secret", timeout=CLIENT_TIMEOUT)
            assert response.status_code == 200
        assert server.stop() in UVICORN_CLEAN_EXITS, server.output()
        return before, server.output()


def test_uvicorns_own_access_log_on_is_said_once_at_startup(tmp_path: Path) -> None:
    log_path = tmp_path / "access.log"
    before, output = serve_two_requests(
        tmp_path, ["--log-level", "info"], {"BOUNDLOG_SINK": str(log_path)}
    )
    assert OWN_ACCESS_LOG in before
    assert output.count("boundlog:") == 1, output
    assert "--no-access-log" in output
    # What the message is about: uvicorn's line shows the secret; boundlog's does not.
    assert "GET /?password=secret HTTP/1.1" in output
    lines = read_log_lines(log_path)
    assert len(lines) == 2
    assert b"secret" not in b"".join(lines)


def test_no_word_with_no_access_log(tmp_path: Path) -> None:
    log_path = tmp_path / "access.log"
    _, output = serve_two_requests(
        tmp_path, ["--no-access-log", "--log-level", "info"], {"BOUNDLOG_SINK": str(log_path)}
    )
    assert "boundlog:" not in output, output
    assert len(read_log_lines(log_path)) == 2


def test_an_app_built_before_uvicorn_run_is_checked_at_the_lifespan_startup(
    tmp_path: Path,
) -> None:
    script = (
        "import sys\nimport uvicorn\n"
        f"from {APP.replace(':app', '')} import app\n"
        f"uvicorn.run(app, host={LOOPBACK!r}, port=int(sys.argv[1]), lifespan='on')\n"
    )
    environment = {"BOUNDLOG_SINK": str(tmp_path / "access.log"), "PYTHONPATH": "."}
    before, output = serve_two_requests(tmp_path, None, environment, script=script)
    assert OWN_ACCESS_LOG in before
    assert output.count("boundlog:") == 1, output


def test_hypercorn_in_a_process_where_uvicorn_configured_logging_hears_nothing(
    tmp_path: Path,
) -> None:
    script = (
        "import logging.config, sys\nimport uvicorn.config\n"
        "logging.config.dictConfig(uvicorn.config.LOGGING_CONFIG)\n"
        "from hypercorn.__main__ import main\n"
        # hypercorn's workers are spawned: they import this file again.
        "if __name__ == '__main__':\n"
        f"    main([{APP!r}, '--bind', f'{LOOPBACK}:{{sys.argv[1]}}'])\n"
    )
    environment = {"BOUNDLOG_SINK": str(tmp_path / "access.log"), "PYTHONPATH": "."}
    _, output = serve_two_requests(tmp_path, None, environment, script=script)
    assert "boundlog:" not in output, output
    assert len(read_log_lines(tmp_path / "access.log")) == 2


def test_logging_sink_uvicorn_access_under_no_access_log_is_said_and_counted(
    tmp_path: Path,
) -> None:
    before, output = serve_two_requests(
        tmp_path,
        ["--no-access-log", "--log-level", "info"],
        {"BOUNDLOG_SINK": "logging:uvicorn.access"},
    )
    # At startup, before any request: uvicorn cut the logger off before importing the app.
    assert UNREACHED in before
    assert "logging:app.access?message=uvicorn" in before
    assert output.count(UNREACHED) == 1, output
    # The lines are counted lost, not written (the log's report when it closes).
    assert "2 of 2 records not written (0 dropped, 2 failed)" in output, output


LIFESPAN_OFF = "boundlog: the lifespan is off"
FASTAPI_APP = "tests.apps.fastapi_app:app"


def serve_fastapi(tmp_path: Path, lifespan: str) -> tuple[str, str, Path]:
    """The README's FastAPI quick start (``add_middleware``, a log built in uvicorn's
    first call) under ``--lifespan LIFESPAN``: its output after the first request and
    after a second and a stop, and the log's path."""
    log_path = tmp_path / "access.log"

    def argv(port: int) -> list[str]:
        return [
            PYTHON, "-m", "uvicorn", FASTAPI_APP, "--host", LOOPBACK, "--port", str(port),
            "--no-access-log", "--lifespan", lifespan,
        ]  # fmt: skip

    with running_server(argv, {"TESTAPP_SINK": str(log_path)}, tmp_path / "out") as server:
        first = ""
        for _ in range(2):
            response = httpx.get(f"{server.base_url}/", timeout=CLIENT_TIMEOUT)
            assert response.status_code == 200
            first = first or server.output()
        server.stop()
        return first, server.output(), log_path


@pytest.mark.needs("fastapi")
def test_a_log_built_by_add_middleware_under_lifespan_off_says_nothing_drains_it(
    tmp_path: Path,
) -> None:
    """uvicorn ends by re-raising SIGTERM on itself, which skips the exit handlers, and
    the log, built inside uvicorn's first call, has no SIGTERM drain of its own: with
    the lifespan off, its last lines would go without a word.  It is said once, with
    the fix, as the first request is served."""
    first, output, _ = serve_fastapi(tmp_path, "off")
    assert LIFESPAN_OFF in first, first
    assert output.count("boundlog:") == 1, output
    assert "--lifespan auto" in output
    assert "app = AccessLogMiddleware(app" in output


@pytest.mark.needs("fastapi")
def test_the_same_app_under_the_default_lifespan_hears_nothing_and_drains(
    tmp_path: Path,
) -> None:
    _, output, log_path = serve_fastapi(tmp_path, "auto")
    assert "boundlog:" not in output, output
    assert len(read_log_lines(log_path)) == 2
