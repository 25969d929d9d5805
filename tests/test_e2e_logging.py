"""End to end: LoggingSink under real uvicorn and gunicorn, with their own formatters.

Each server runs twice with the same logging configuration (a file handler, the
server's own access formatter): once writing its own access log, for reference, and
once with boundlog writing through a LoggingSink instead.  The same requests must give
the same lines, but for what a record cannot know (uvicorn's client port) and the
time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    Server,
    running_server,
    stop_gracefully,
)

# (method, target): statuses 200, 404, 204 and 500, a query, an escaped path, HEAD.
REQUESTS = [
    ("GET", "/bytes/10"),
    ("GET", "/bytes/3?page=2&sort=name"),
    ("GET", "/no%20such/page"),
    ("POST", "/status/204"),
    ("HEAD", "/bytes/5"),
    ("GET", "/status/500"),
]
UVICORN_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
# The test applications read TESTAPP_SINK when imported; the bare app logs nothing to it.
UNUSED_SINK = {"TESTAPP_SINK": "stderr"}


def dict_config(path: Path, formatter: dict[str, Any], loggers: list[str]) -> dict[str, Any]:
    """A dictConfig writing ``loggers`` to the file ``path`` through ``formatter``."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"access": formatter},
        "handlers": {
            "access": {"class": "logging.FileHandler", "filename": str(path), "formatter": "access"}
        },
        "loggers": {
            name: {"handlers": ["access"], "level": "INFO", "propagate": False} for name in loggers
        },
    }


def send_requests(server: Server) -> None:
    with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
        for method, target in REQUESTS:
            client.request(method, target, headers={"user-agent": "e2e/1", "referer": "/from"})


def served_lines(
    tmp_path: Path,
    name: str,
    command: Callable[[int], list[str]],
    environment: dict[str, str],
    clean_exits: tuple[int, ...],
) -> list[str]:
    with running_server(command, environment, tmp_path / f"{name}.out") as server:
        send_requests(server)
        stop_gracefully(server, clean_exits)
    return (tmp_path / f"{name}.log").read_text().splitlines()


def uvicorn_command(app: str, log_config: Path, *own_log: str) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "uvicorn", app, "--host", LOOPBACK, "--port", str(port),
            "--lifespan", "on", "--log-config", str(log_config), *own_log,
        ]  # fmt: skip

    return command


def test_uvicorn_access_formatter_writes_the_lines_uvicorn_writes(tmp_path: Path) -> None:
    """uvicorn's AccessFormatter, from a --log-config file, on LoggingSink(message="uvicorn")."""
    formatter = {
        "()": "uvicorn.logging.AccessFormatter",
        "fmt": UVICORN_FORMAT,
        "use_colors": False,
    }
    lines = {}
    for name, app, logger, own_log in [
        ("uvicorn", "tests.apps.asgi_app:application", "uvicorn.access", ()),
        ("boundlog", "tests.apps.logging_app:app", "app.access", ("--no-access-log",)),
    ]:
        # YAML, as docs/integrations.md shows it.
        config = tmp_path / f"{name}.yaml"
        config.write_text(
            yaml.safe_dump(dict_config(tmp_path / f"{name}.log", formatter, [logger]))
        )
        environment = {**UNUSED_SINK, "TESTAPP_LOGGER": logger, "TESTAPP_MESSAGE": "uvicorn"}
        command = uvicorn_command(app, config, *own_log)
        lines[name] = served_lines(tmp_path, name, command, environment, UVICORN_CLEAN_EXITS)
    # A record holds the client's host: uvicorn's line has its port too.
    reference = [re.sub(r"^(INFO: +127\.0\.0\.1):\d+ ", r"\1 ", line) for line in lines["uvicorn"]]
    assert len(reference) == len(REQUESTS)
    assert lines["boundlog"] == reference
    assert reference[1] == 'INFO:     127.0.0.1 - "GET /bytes/3?page=2&sort=name HTTP/1.1" 200 OK'


def gunicorn_command(config: Path, *logger: str) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "-k", "gthread", "--threads", "2", "-w", "1",
            "-b", f"{LOOPBACK}:{port}", "-c", str(config), *logger, "tests.apps.bare_wsgi:app",
        ]  # fmt: skip

    return command


def test_gunicorn_logconfig_dict_writes_the_lines_gunicorn_writes(tmp_path: Path) -> None:
    """gunicorn's logconfig_dict on gunicorn.access, fed by boundlog's logger class."""
    formatter = {"format": "%(levelname)s %(name)s %(message)s"}
    lines = {}
    for name, logger in [
        ("gunicorn", ()),
        (
            "boundlog",
            ("--logger-class", "boundlog.gunicorn.Logger",
             "--access-logfile", "logging:gunicorn.access"),
        ),
    ]:  # fmt: skip
        config = tmp_path / f"{name}.conf.py"
        logconfig = dict_config(tmp_path / f"{name}.log", formatter, ["gunicorn.access"])
        # gunicorn's defaults give the root logger a handler this dict replaces.
        logconfig["root"] = {"level": "WARNING", "handlers": []}
        config.write_text(f"logconfig_dict = {logconfig!r}\n")
        command = gunicorn_command(config, *logger)
        lines[name] = served_lines(tmp_path, name, command, {}, (0,))
    # Every field but the time, which differs between the two runs.
    reference = [re.sub(r"\[[^]]+\]", "[time]", line) for line in lines["gunicorn"]]
    assert len(reference) == len(REQUESTS)
    assert [re.sub(r"\[[^]]+\]", "[time]", line) for line in lines["boundlog"]] == reference
    assert reference[1] == (
        'INFO gunicorn.access 127.0.0.1 - - [time] "GET /bytes/3?page=2&sort=name HTTP/1.1" '
        '200 3 "/from" "e2e/1"'
    )
