"""End to end: the route template each record carries (``Extras.route``).

Real servers run applications of each framework (tests/apps/routes_*.py and
tests/apps/django_site) whose log's format reads the route (tests/apps/route_lines.py:
``[method, path, status, route]`` a line).  Each test sends requests that match a
route, one under a prefix or a mount, one that matches a route partly (405) or fails
in it (422, 500), and 404s, stops the server gracefully and checks every line: the
template the framework matched, null where it matched none.

* FastAPI under uvicorn, the middleware added with ``add_middleware``; Starlette and
  Litestar under uvicorn, wrapped from outside;
* Django with ``boundlog.django.RouteMiddleware``: under gunicorn with the WSGI
  middleware and with the logger class, and under uvicorn with the ASGI middleware;
* Flask under gunicorn with the documented ``before_request`` hook.

The Django and Flask tests run both cores: the route goes through the C request paths
too (the WSGI one hands it on from C).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from _servers import (
    LOOPBACK,
    PYTHON,
    SINK_VARIABLE,
    UVICORN_CLEAN_EXITS,
    http_client,
    read_log_lines,
    running_server,
    stop_gracefully,
    uvicorn_app_command,
)

#: ``(method, target, status, route)``: a request, the status it must get and the
#: route its line must show.
Expected = tuple[str, str, int, str | None]

CORES = pytest.mark.parametrize("core", ["c", "python"])


def check_routes(
    tmp_path: Path,
    command: Callable[[int], list[str]],
    expected: Sequence[Expected],
    clean_exits: Sequence[int] = (0,),
    core: str = "c",
    root_path: str = "",
) -> None:
    """Send each request of ``expected`` twice, stop the server, and check that each got
    its status and left a line with its route.  A connection each: uvicorn closes the
    one an application raised on, even once its 500 was sent."""
    log_path = tmp_path / "access.log"
    environment = {SINK_VARIABLE: str(log_path)}
    if core == "python":
        environment["BOUNDLOG_NO_EXTENSIONS"] = "1"
    with running_server(command, environment, tmp_path / "server.out") as server:
        for method, target, status, _ in [*expected, *expected]:
            with http_client(server.port) as client:
                response = client.request(method, target)
            assert response.status_code == status, (method, target, response.text)
        stop_gracefully(server, clean_exits)
    lines = Counter(tuple(json.loads(line)) for line in read_log_lines(log_path))
    # A line's path is the target without its query, after the server's root path: the
    # server puts it in front of the path it hands the application (raw_path too).
    paths = [
        (method, root_path + target.partition("?")[0], *rest) for method, target, *rest in expected
    ]
    assert lines == Counter(2 * paths)


def uvicorn(app: str, *options: str) -> Callable[[int], list[str]]:
    return lambda port: [*uvicorn_app_command(port, app), *options]


def gunicorn(app: str, *options: str) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "-w", "1", "-b", f"{LOOPBACK}:{port}",
            "--graceful-timeout", "10", "--log-level", "warning", *options, app,
        ]  # fmt: skip

    return command


FASTAPI: list[Expected] = [
    ("GET", "/items/7", 200, "/items/{item_id}"),
    ("GET", "/items/7?verbose=1", 200, "/items/{item_id}"),
    # Matched, then refused: the route is known.
    ("GET", "/items/seven", 422, "/items/{item_id}"),
    ("POST", "/items/7", 405, "/items/{item_id}"),
    ("GET", "/boom", 500, "/boom"),
    ("GET", "/api/users/3", 200, "/api/users/{user_id}"),
    ("GET", "/sub/things/blue", 200, "/sub/things/{name}"),
    ("GET", "/legacy/pages/2", 200, "/legacy/pages/{number}"),
    ("GET", "/missing", 404, None),
    ("GET", "/sub/missing", 404, None),
    ("GET", "/legacy/missing", 404, None),
]
STARLETTE: list[Expected] = [
    ("GET", "/users/5", 200, "/users/{user_id}"),
    ("GET", "/v1/orders/a-1", 200, "/v1/orders/{order_id}"),
    # A Mount's parameters show as sent: Starlette keeps no trace of the mounts a
    # request went through, only the path they matched (root_path).
    ("GET", "/tenants/acme/reports/2024", 200, "/tenants/acme/reports/{year}"),
    ("GET", "/files/a/b.txt", 200, "/files/{path}"),
    ("GET", "/users/five", 404, None),
    ("GET", "/v1/missing", 404, None),
]
LITESTAR: list[Expected] = [
    ("GET", "/items/3", 200, "/items/{item_id}"),
    ("GET", "/api/users/bob", 200, "/api/users/{name}"),
    ("GET", "/missing", 404, None),
]


@pytest.mark.parametrize(
    ("app", "expected", "root_path"),
    [
        pytest.param(
            "tests.apps.routes_fastapi:app",
            FASTAPI,
            "",
            id="fastapi",
            marks=pytest.mark.needs("fastapi"),
        ),
        pytest.param("tests.apps.routes_starlette:app", STARLETTE, "", id="starlette"),
        # The server's root path is no part of the template.
        pytest.param(
            "tests.apps.routes_starlette:app", STARLETTE, "/prefix", id="starlette-root-path"
        ),
        pytest.param(
            "tests.apps.routes_litestar:app",
            LITESTAR,
            "",
            id="litestar",
            marks=pytest.mark.needs("litestar"),
        ),
    ],
)
def test_asgi_framework_routes_under_uvicorn(
    tmp_path: Path, app: str, expected: list[Expected], root_path: str
) -> None:
    options = ("--root-path", root_path) if root_path else ()
    command = uvicorn(app, *options)
    check_routes(tmp_path, command, expected, UVICORN_CLEAN_EXITS, root_path=root_path)


#: Django's patterns, as Django writes them (tests/apps/django_site/urls.py).  A page
#: Django does not have is its 404, and ``/hello`` its redirect (APPEND_SLASH): neither
#: matched a pattern.
DJANGO: list[Expected] = [
    ("GET", "/hello/", 200, "hello/"),
    ("GET", "/bytes/10/", 200, "bytes/<int:size>/"),
    ("GET", "/api/things/blue/", 200, "api/things/<slug:slug>/"),
    ("GET", "/boom/", 500, "boom/"),
    ("GET", "/missing/", 404, None),
    ("GET", "/hello", 301, None),
]
FLASK: list[Expected] = [
    ("GET", "/items/3", 200, "/items/<int:item_id>"),
    ("GET", "/boom", 500, "/boom"),
    # Flask matched no rule: a 404, and a 405 (url_rule is None for both).
    ("GET", "/items/three", 404, None),
    ("POST", "/items/3", 405, None),
]


def django_logger_class(log_path: Path) -> Callable[[int], list[str]]:
    return gunicorn(
        "tests.apps.django_site.plain_wsgi:application",
        "--logger-class", "tests.apps.route_lines_gunicorn_logger.RouteLinesLogger",
        "--access-logfile", str(log_path),
    )  # fmt: skip


#: Each server and integration: its command, given the log's path (which only the
#: logger class is told: the applications read it from the environment), its clean
#: exit statuses, and what it must log.
SERVED: dict[
    str, tuple[Callable[[Path], Callable[[int], list[str]]], tuple[int, ...], list[Expected]]
] = {
    "django-gunicorn-wsgi-middleware": (
        lambda _: gunicorn("tests.apps.django_site.route_wsgi:application"),
        (0,),
        DJANGO,
    ),
    "django-gunicorn-logger-class": (django_logger_class, (0,), DJANGO),
    "django-uvicorn-asgi-middleware": (
        lambda _: uvicorn("tests.apps.django_site.route_asgi:application"),
        UVICORN_CLEAN_EXITS,
        DJANGO,
    ),
    "flask-gunicorn-wsgi-middleware": (
        lambda _: gunicorn("tests.apps.routes_flask:app"),
        (0,),
        FLASK,
    ),
}


@CORES
@pytest.mark.parametrize("served", SERVED)
def test_django_and_flask_routes(tmp_path: Path, served: str, core: str) -> None:
    command, clean_exits, expected = SERVED[served]
    check_routes(tmp_path, command(tmp_path / "access.log"), expected, clean_exits, core)
