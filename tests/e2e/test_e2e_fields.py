"""End to end: fields the application adds with ``boundlog.add_fields``.

A FastAPI application under a real uvicorn (tests/apps/fields_app.py) adds fields from
an async endpoint, a sync endpoint run in Starlette's thread pool, a
``BaseHTTPMiddleware`` and a background task; a WSGI application under gunicorn's
threaded workers (tests/apps/fields_wsgi.py) adds them from its view and its body's
generator.  Many requests run at once over several connections, and each line must carry
its own request's fields and no other's: the id in the path is the id in the fields.
Both cores: the C request paths and the pure-Python ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from _servers import (
    LOOPBACK,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    http_client,
    read_log_lines,
    running_server,
    server_environment,
    stop_gracefully,
    uvicorn_app_command,
)
from boundlog.formats._json import JSON_FIELDS

REQUESTS = 240
CONNECTIONS = 8
# The C request paths (the default) and the pure-Python ones.
CORES = pytest.mark.parametrize("core", ["c", "python"])


def core_environment(core: str) -> dict[str, str]:
    return {"BOUNDLOG_NO_EXTENSIONS": "1"} if core == "python" else {}


def paths(kinds: Sequence[str]) -> list[str]:
    """``REQUESTS`` paths, the kinds in turn, each with the request's own id."""
    return [
        f"/{kind}/{number}" if kind != "plain" else "/plain"
        for number, kind in ((number, kinds[number % len(kinds)]) for number in range(REQUESTS))
    ]


def send_all(port: int, targets: Sequence[str], headers: Callable[[str], dict[str, str]]) -> None:
    """Send every target over ``CONNECTIONS`` connections at once; each must answer 200."""

    def send_share(share: Sequence[str]) -> None:
        with http_client(port) as client:
            for target in share:
                response = client.get(target, headers=headers(target))
                assert response.status_code == 200, (target, response.text)

    shares = [targets[start::CONNECTIONS] for start in range(CONNECTIONS)]
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        for sent in [pool.submit(send_share, share) for share in shares]:
            sent.result()


def logged(log_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read_log_lines(log_path)]


def tenant_of(target: str) -> dict[str, str]:
    return {} if target == "/plain" else {"X-Tenant": "t" + target.rsplit("/", 1)[1]}


@CORES
@pytest.mark.needs("fastapi")
def test_fastapi_fields_from_every_part_of_a_request_never_leak(tmp_path: Path, core: str) -> None:
    log_path = tmp_path / "access.log"
    environment = {**server_environment(log_path, "json", "0.01"), **core_environment(core)}
    targets = paths(["async", "sync", "plain"])
    command = lambda port: uvicorn_app_command(port, "tests.apps.fields_app:app")  # noqa: E731
    with running_server(command, environment, tmp_path / "uvicorn.out") as server:
        send_all(server.port, targets, tenant_of)
        stop_gracefully(server, UVICORN_CLEAN_EXITS)
    lines = logged(log_path)
    assert sorted(line["path"] for line in lines) == sorted(targets)
    for line in lines:
        built_in = {key: line.pop(key) for key in list(line)[: len(JSON_FIELDS)]}
        assert list(built_in) == list(JSON_FIELDS)
        path = built_in["path"]
        if path == "/plain":
            # The middleware's field only (no header: null); nothing from other requests.
            assert line == {"tenant": None}, line
            continue
        _, kind, rid = path.split("/")
        expected: dict[str, Any] = {"tenant": "t" + rid, "rid": rid, "kind": kind}
        if kind == "async":
            # A built-in key is prefixed.
            expected["app.status"] = "from the app"
        # The background task's, added after the response ended.
        expected["late"] = rid
        assert line == expected, (path, line)


@CORES
@pytest.mark.needs("fastapi")
def test_a_template_shows_fields_and_the_combined_log_ignores_them(
    tmp_path: Path, core: str
) -> None:
    """``%{name}n`` shows a field, ``-`` where there is none; a log that reads no notes
    writes its usual lines while the application adds fields."""
    targets = paths(["async", "sync", "plain"])
    for log_format in ("%U %{rid}n %{kind}n %{tenant}n %{late}n", "combined"):
        log_path = tmp_path / "access.log"
        log_path.unlink(missing_ok=True)
        environment = {
            **server_environment(log_path, log_format, "0.01"),
            **core_environment(core),
        }
        command = lambda port: uvicorn_app_command(port, "tests.apps.fields_app:app")  # noqa: E731
        with running_server(command, environment, tmp_path / "uvicorn.out") as server:
            send_all(server.port, targets, tenant_of)
            stop_gracefully(server, UVICORN_CLEAN_EXITS)
        lines = read_log_lines(log_path)
        assert len(lines) == len(targets)
        if log_format == "combined":
            assert all(line.startswith(b"127.0.0.1 - - [") for line in lines)
            assert sorted(line.split(b'"')[1].split()[1].decode() for line in lines) == sorted(
                targets
            )
            continue
        expected = [
            "/plain - - - -"
            if target == "/plain"
            else f"{target} {target.split('/')[2]} {target.split('/')[1]} t{target.split('/')[2]}"
            f" {target.split('/')[2]}"
            for target in targets
        ]
        assert sorted(line.decode() for line in lines) == sorted(expected)


def gunicorn_command(port: int) -> list[str]:
    return [
        PYTHON, "-m", "gunicorn", "-k", "gthread", "--threads", "4", "-w", "2",
        "-b", f"{LOOPBACK}:{port}", "--graceful-timeout", "10", "--log-level", "warning",
        "tests.apps.fields_wsgi:app",
    ]  # fmt: skip


@CORES
def test_gunicorn_view_fields_never_leak_between_requests_of_a_thread(
    tmp_path: Path, core: str
) -> None:
    """gunicorn's threads serve request after request in one context: each request starts
    with fields of its own, so a ``/plain`` after a ``/view`` shows none."""
    log_path = tmp_path / "access.log"
    environment = {**server_environment(log_path, "json", "0.01"), **core_environment(core)}
    targets = paths(["view", "plain"])
    with running_server(gunicorn_command, environment, tmp_path / "gunicorn.out") as server:
        send_all(server.port, targets, lambda target: {})
        stop_gracefully(server)
    lines = logged(log_path)
    assert sorted(line["path"] for line in lines) == sorted(targets)
    for line in lines:
        fields = dict(list(line.items())[len(JSON_FIELDS) :])
        if line["path"] == "/plain":
            assert fields == {}, line
        else:
            rid = line["path"].split("/")[2]
            assert fields == {"rid": rid, "worker_pid": None, "chunks": 2}, line
