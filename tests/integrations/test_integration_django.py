"""Django, served by real servers: the quick starts of docs/django.md.

The project is tests/apps/django_site, laid out as ``django-admin startproject`` makes
one; its wsgi.py and asgi.py are the documented ones, with the log's sink a relative
``access.log``, so each server runs in the test's own directory.  Each test sends
requests to Django views (a 404 and a query string among them), stops the server with
SIGTERM and checks one line per request, as the client saw it.

* gunicorn with ``--logger-class boundlog.gunicorn.Logger``: Django's own wsgi.py
  untouched (plain_wsgi.py);
* gunicorn serving wsgi.py, boundlog's WSGI middleware around ``get_wsgi_application()``;
* uvicorn serving asgi.py, boundlog's ASGI middleware around ``get_asgi_application()``,
  with ``--lifespan auto`` (the default) and ``--lifespan on``.  Django's handler refuses
  the lifespan scope; the middleware answers it, so the log is drained at the lifespan
  shutdown: uvicorn ends by re-raising SIGTERM, which runs no exit handler.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from _servers import (
    CLIENT_TIMEOUT,
    HOLD_UNTIL_CLOSE,
    LOOPBACK,
    PYTHON,
    REPO_ROOT,
    UVICORN_CLEAN_EXITS,
    read_log_lines,
    running_server,
    stop_gracefully,
)

PROJECT = "tests.apps.django_site"
# Each path several times over two keep-alive connections: a view, a view with a
# query, a sized body, a page Django does not have (its 404), a redirect (APPEND_SLASH),
# a view that raises (the 500 page Django makes of it).
PATHS = ["/hello/", "/hello/?q=django&page=2", "/bytes/1000/", "/missing/", "/hello", "/boom/"]
ROUNDS = 20
_LINE = re.compile(
    rb'(?P<client>\S+) - - \[[^\]]+\] "(?P<method>[A-Z]+) (?P<target>\S+) HTTP/1\.1" '
    rb'(?P<status>\d{3}) (?P<bytes>\d+|-) "[^"]*" "[^"]*"'
)

Request = tuple[str, str, int, int]


def send_requests(port: int) -> Counter[Request]:
    """Send every path ROUNDS times; what each line must show: method, target, status,
    body bytes (as the client received them)."""
    expected: Counter[Request] = Counter()
    for _ in range(2):
        with httpx.Client(
            base_url=f"http://{LOOPBACK}:{port}", timeout=CLIENT_TIMEOUT, follow_redirects=False
        ) as client:
            for _ in range(ROUNDS // 2):
                for target in PATHS:
                    response = client.get(target)
                    expected[("GET", target, response.status_code, len(response.content))] += 1
    statuses = {status for _, _, status, _ in expected}
    assert statuses == {200, 301, 404, 500}, expected
    return expected


def logged(path: Path) -> Counter[Request]:
    requests: Counter[Request] = Counter()
    for line in read_log_lines(path):
        match = _LINE.fullmatch(line)
        assert match, f"not a combined line: {line!r}"
        assert match["client"] == LOOPBACK.encode(), line
        size = 0 if match["bytes"] == b"-" else int(match["bytes"])
        requests[
            (match["method"].decode(), match["target"].decode(), int(match["status"]), size)
        ] += 1
    return requests


def check_served_and_drained(
    tmp_path: Path,
    command: Callable[[int], list[str]],
    environment: dict[str, str],
    clean_exits: tuple[int, ...] = (0,),
    held: bool = False,
) -> None:
    log_path = tmp_path / "access.log"
    environment = {"PYTHONPATH": str(REPO_ROOT), **environment}
    with running_server(command, environment, tmp_path / "server.out") as server:
        expected = send_requests(server.port)
        if held:
            assert log_path.read_bytes() == b"", "the writer should hold the lines until close"
        stop_gracefully(server, clean_exits)
    assert logged(log_path) == expected


def gunicorn(tmp_path: Path, *options: str) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "--chdir", str(tmp_path), "-b", f"{LOOPBACK}:{port}",
            "-w", "2", "--graceful-timeout", "10", "--log-level", "warning", *options,
        ]  # fmt: skip

    return command


def test_gunicorn_logger_class_with_djangos_own_wsgi_py(tmp_path: Path) -> None:
    """``gunicorn --logger-class boundlog.gunicorn.Logger --access-logfile access.log
    mysite.wsgi:application``, the writer holding every line until the workers' exit."""
    command = gunicorn(
        tmp_path,
        "--logger-class", "boundlog.gunicorn.Logger", "--access-logfile", "access.log",
        f"{PROJECT}.plain_wsgi:application",
    )  # fmt: skip
    environment = {"BOUNDLOG_FLUSH_INTERVAL": HOLD_UNTIL_CLOSE}
    check_served_and_drained(tmp_path, command, environment, held=True)


def test_gunicorn_serving_wsgi_py_with_the_wsgi_middleware(tmp_path: Path) -> None:
    """``gunicorn mysite.wsgi:application`` where wsgi.py wraps ``get_wsgi_application()``."""
    command = gunicorn(tmp_path, f"{PROJECT}.wsgi:application")
    check_served_and_drained(tmp_path, command, {})


def uvicorn(tmp_path: Path, module: str, *options: str) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        # env -C: uvicorn has no option to change directory, and the sink is relative.
        return [
            "env", "-C", str(tmp_path), PYTHON, "-m", "uvicorn", f"{PROJECT}.{module}:application",
            "--no-access-log", "--host", LOOPBACK, "--port", str(port),
            "--log-level", "warning", *options,
        ]  # fmt: skip

    return command


@pytest.mark.parametrize("lifespan", ["auto", "on"])
def test_uvicorn_serving_asgi_py_with_the_asgi_middleware(tmp_path: Path, lifespan: str) -> None:
    """``uvicorn mysite.asgi:application --no-access-log``, either lifespan setting: with
    ``on`` uvicorn would refuse to start if the middleware left Django's refusal to it."""
    command = uvicorn(tmp_path, "asgi", "--lifespan", lifespan)
    check_served_and_drained(tmp_path, command, {}, UVICORN_CLEAN_EXITS)


@pytest.mark.parametrize("lifespan", ["auto", "on"])
def test_uvicorn_sigterm_drains_every_held_line_of_django(tmp_path: Path, lifespan: str) -> None:
    """SIGTERM to uvicorn serving Django: every completed response is in the log, though
    the writer held them all until close, and uvicorn's re-raised SIGTERM skips atexit."""
    command = uvicorn(tmp_path, "held_asgi", "--lifespan", lifespan)
    check_served_and_drained(tmp_path, command, {}, UVICORN_CLEAN_EXITS, held=True)
