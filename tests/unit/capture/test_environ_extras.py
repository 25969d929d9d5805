"""The server variables a format names (``%{NAME}e``) in a record's extras
(``Extras.environ``): what each integration reads, once the application has run.

In process, both request paths of the WSGI and ASGI middlewares; then real servers:
gunicorn with the WSGI middleware and with the logger class, Starlette under uvicorn.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from _servers import (
    CLIENT_TIMEOUT,
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
from boundlog import AccessLog, Extras, Record
from boundlog._options import MIN_RECORD_BYTES
from boundlog.aiohttp import access_logger
from test_extras import MIDDLEWARES, WSGI_MIDDLEWARES, http_scope, receive, send
from test_websockets import run_session, websocket_scope


class Capture:
    """A format keeping its records, naming the variables it is given."""

    def __init__(self, names: frozenset[str], reads: frozenset[str] = frozenset({"environ"})):
        self.reads_extras = reads
        self.environ_names = names
        self.records: list[Record] = []

    def format_batch(self, records: Sequence[Record]) -> bytes:
        self.records += records
        return b"x\n" * len(records)


def captured(fmt: Capture, serve: Callable[[AccessLog], None]) -> list[Record]:
    log = AccessLog(
        sink="/dev/null", format=fmt, report_loss=False, max_record_bytes=MIN_RECORD_BYTES
    )  # type: ignore[arg-type]
    try:
        serve(log)
    finally:
        log.close()
    return fmt.records


def wsgi_served(middleware: Any, fmt: Capture, environ: dict[str, Any]) -> list[Record]:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        # Set while the request runs: the record reads what the application left.
        environ["user"] = "ada"
        environ["uid"] = 7
        start_response("200 OK", [])
        return [b"done"]

    def serve(log: AccessLog) -> None:
        body = middleware(app, log=log)(environ, lambda status, headers, exc_info=None: None)
        list(body)
        body.close()

    return captured(fmt, serve)


def wsgi_environ(**variables: Any) -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "GET", "PATH_INFO": "/items/7", "SERVER_PROTOCOL": "HTTP/1.1",
        **variables,
    }  # fmt: skip


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
def test_the_wsgi_middleware_copies_the_variables_the_application_left(middleware: Any) -> None:
    fmt = Capture(frozenset({"user", "uid", "HTTP_USER_AGENT", "absent"}))
    [record] = wsgi_served(middleware, fmt, wsgi_environ(HTTP_USER_AGENT="curl/8"))
    assert record.extras == Extras(environ={"user": "ada", "uid": 7, "HTTP_USER_AGENT": "curl/8"})


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
def test_a_long_wsgi_variable_is_cut_to_the_budget(middleware: Any) -> None:
    agent = "a" * (MIN_RECORD_BYTES + 10)
    fmt = Capture(frozenset({"HTTP_USER_AGENT"}))
    [record] = wsgi_served(middleware, fmt, wsgi_environ(HTTP_USER_AGENT=agent))
    assert record.extras is not None
    assert record.extras.environ is not None
    assert record.extras.environ["HTTP_USER_AGENT"] == (
        "a" * MIN_RECORD_BYTES + "[...10 characters cut]"
    )


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
@pytest.mark.parametrize(
    ("names", "reads"),
    [(frozenset(), frozenset({"environ"})), (frozenset({"user"}), frozenset({"close_code"}))],
    ids=["no-names", "not-read"],
)
def test_a_wsgi_log_naming_no_variables_keeps_none(
    middleware: Any, names: frozenset[str], reads: frozenset[str]
) -> None:
    [record] = wsgi_served(middleware, Capture(names, reads), wsgi_environ())
    assert record.extras is None


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
def test_the_route_and_the_variables_are_learnt_together(middleware: Any) -> None:
    fmt = Capture(frozenset({"user"}), frozenset({"route", "environ"}))
    environ = wsgi_environ(**{"boundlog.route": "/items/{item_id}"})
    [record] = wsgi_served(middleware, fmt, environ)
    assert record.extras == Extras(route="/items/{item_id}", environ={"user": "ada"})


def asgi_served(middleware: Any, fmt: Capture, scope: dict[str, Any]) -> list[Record]:
    tenant = object()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        scope["boundlog.tenant"] = tenant
        scope.setdefault("state", {})["user"] = "ada"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})

    def serve(log: AccessLog) -> None:
        asyncio.run(middleware(app, log=log)(scope, receive, send))

    records = captured(fmt, serve)
    for record in records:
        if record.extras is not None and record.extras.environ is not None:
            # The application's own object, kept as it is: the writer converts it.
            assert record.extras.environ.get("boundlog.tenant", tenant) is tenant
    return records


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_the_asgi_middleware_reads_scope_keys_then_the_state(middleware: Any) -> None:
    fmt = Capture(frozenset({"boundlog.tenant", "user", "path", "absent"}))
    [record] = asgi_served(middleware, fmt, http_scope())
    assert record.extras is not None
    assert record.extras.environ is not None
    assert record.extras.environ.keys() == {"boundlog.tenant", "user", "path"}
    assert (record.extras.environ["user"], record.extras.environ["path"]) == ("ada", "/items/7")


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_a_scope_key_comes_before_the_state(middleware: Any) -> None:
    scope = {**http_scope(), "user": "from-the-scope"}
    [record] = asgi_served(middleware, Capture(frozenset({"user"})), scope)
    assert record.extras == Extras(environ={"user": "from-the-scope"})


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_a_state_that_is_no_mapping_is_not_read(middleware: Any) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        scope["state"] = ["user"]
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    fmt = Capture(frozenset({"user"}))
    [record] = captured(
        fmt, lambda log: asyncio.run(middleware(app, log=log)(http_scope(), receive, send))
    )
    assert record.extras == Extras(environ={})


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_a_long_scope_value_is_cut_to_the_budget(middleware: Any) -> None:
    scope = {**http_scope(), "raw_path": b"/" + b"p" * MIN_RECORD_BYTES}
    [record] = asgi_served(middleware, Capture(frozenset({"raw_path"})), scope)
    assert record.extras == Extras(
        environ={"raw_path": b"/" + b"p" * (MIN_RECORD_BYTES - 1) + b"[...1 bytes cut]"}
    )


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize(
    ("names", "reads"),
    [(frozenset(), frozenset({"environ"})), (frozenset({"user"}), frozenset({"close_code"}))],
    ids=["no-names", "not-read"],
)
def test_an_asgi_log_naming_no_variables_keeps_none(
    middleware: Any, names: frozenset[str], reads: frozenset[str]
) -> None:
    [record] = asgi_served(middleware, Capture(names, reads), http_scope())
    assert record.extras is None


# Real servers.  Each line is [method, path, environ] (tests/apps/environ_lines.py).


def environ_lines(
    tmp_path: Path,
    command: Callable[[int], list[str]],
    clean_exits: Sequence[int] = (0,),
    core: str = "c",
) -> list[Any]:
    log_path = tmp_path / "access.log"
    environment = {SINK_VARIABLE: str(log_path)}
    if core == "python":
        environment["BOUNDLOG_NO_EXTENSIONS"] = "1"
    with running_server(command, environment, tmp_path / "server.out") as server:
        with http_client(server.port) as client:
            response = client.get("/whoami", headers={"user-agent": "environ-test"})
        assert (response.status_code, response.text) == (200, "ok")
        stop_gracefully(server, clean_exits)
    return [json.loads(line) for line in read_log_lines(log_path)]


def gunicorn(app: str, *options: str) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "-w", "1", "-b", f"{LOOPBACK}:{port}",
            "--graceful-timeout", "10", "--log-level", "warning", *options, app,
        ]  # fmt: skip

    return command


@pytest.mark.parametrize("core", ["c", "python"])
@pytest.mark.parametrize("integration", ["wsgi-middleware", "logger-class"])
def test_gunicorn_logs_what_the_application_put_in_the_environ(
    tmp_path: Path, integration: str, core: str
) -> None:
    if integration == "wsgi-middleware":
        command = gunicorn("tests.apps.environ_apps:wsgi")
    else:
        command = gunicorn(
            "tests.apps.environ_apps:plain_wsgi",
            "--logger-class", "tests.apps.environ_gunicorn_logger.EnvironLinesLogger",
            "--access-logfile", str(tmp_path / "access.log"),
        )  # fmt: skip
    assert environ_lines(tmp_path, command, core=core) == [
        ["GET", "/whoami", {"user": "ada", "HTTP_USER_AGENT": "environ-test"}]
    ]


@pytest.mark.parametrize("core", ["c", "python"])
def test_starlette_under_uvicorn_logs_the_request_state_and_scope_keys(
    tmp_path: Path, core: str
) -> None:
    def command(port: int) -> list[str]:
        return uvicorn_app_command(port, "tests.apps.environ_apps:starlette")

    assert environ_lines(tmp_path, command, UVICORN_CLEAN_EXITS, core) == [
        ["GET", "/whoami", {"user": "ada", "boundlog.tenant": "acme"}]
    ]


def aiohttp_served(handler: Callable[[web.Request], Any], fmt: Capture) -> list[Record]:
    """The records of one request to ``/whoami`` through a real aiohttp server."""

    async def serve(log: AccessLog) -> None:
        app = web.Application()
        app.router.add_get("/whoami", handler)
        runner = web.AppRunner(app, access_log_class=access_logger(log=log))
        await runner.setup()
        await web.TCPSite(runner, LOOPBACK, 0).start()
        try:
            async with httpx.AsyncClient(timeout=CLIENT_TIMEOUT) as client:
                response = await client.get(f"http://{LOOPBACK}:{runner.addresses[0][1]}/whoami")
            assert (response.status_code, response.text) == (200, "ok")
        finally:
            await runner.cleanup()

    return captured(fmt, lambda log: asyncio.run(serve(log)))


async def whoami(request: web.Request) -> web.Response:
    # aiohttp asks for RequestKey objects; a format names str keys.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", web.NotAppKeyWarning)
        request["user"] = "ada"
    return web.Response(text="ok")


def test_aiohttp_logs_the_items_a_handler_left_on_its_request() -> None:
    """aiohttp's request is a mapping for a handler's data: the logger reads its items."""
    [record] = aiohttp_served(whoami, Capture(frozenset({"user", "absent"})))
    assert record.extras == Extras(environ={"user": "ada"})


def test_an_aiohttp_log_naming_no_variables_keeps_none() -> None:
    [record] = aiohttp_served(whoami, Capture(frozenset()))
    assert record.extras is None


def test_a_websocket_session_record_carries_the_variables_too() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        scope.setdefault("state", {})["user"] = "ada"
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 1000})

    fmt = Capture(frozenset({"user", "path"}), frozenset({"environ", "close_code"}))
    record = run_session(app, [], fmt, websocket_scope())
    assert record.extras == Extras(close_code=1000, environ={"path": "/chat", "user": "ada"})
