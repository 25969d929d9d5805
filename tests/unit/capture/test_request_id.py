"""Request ids (src/boundlog/capture/_request_id.py): the middlewares' ``request_id`` option.

Under real servers (uvicorn for ASGI, gunicorn for WSGI, on both cores), a request
without a usable id gets a new one that the application sees, the response carries and
the line shows; a usable one is kept and echoed; the header may be another; off, nothing
is added.  The option's checks and its variable, BOUNDLOG_REQUEST_ID, in process.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

import _servers
from apps.request_id_app import OWN_ID
from boundlog import AccessLog, ConfigurationError
from boundlog.aiohttp import access_logger
from boundlog.asgi import AccessLogMiddleware
from boundlog.engine._environment import options_from_environment
from boundlog.wsgi import AccessLogMiddleware as WSGIMiddleware

NEW_ID = re.compile(r"[0-9a-f]{32}")
CLIENT_ID = "req-7f3a:client/42"


@pytest.fixture(autouse=True)
def _no_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("BOUNDLOG_")]:
        if name != "BOUNDLOG_NO_EXTENSIONS":
            monkeypatch.delenv(name)


def _gunicorn_command(port: int) -> list[str]:
    return _servers.gunicorn_app_command(port, "tests.apps.request_id_app:wsgi")


def _uvicorn_command(port: int) -> list[str]:
    return _servers.uvicorn_app_command(port, "tests.apps.request_id_app:asgi")


def _exchanges(
    tmp_path: Path, server: str, core: str, setting: str | None, requests: list[tuple[str, Any]]
) -> tuple[list[httpx.Response], list[dict[str, Any]]]:
    """The responses to ``requests`` (path, headers) and the lines they logged."""
    log_path = tmp_path / "access.log"
    environment = _servers.server_environment(log_path, "json", "0.01")
    if setting is not None:
        environment["BOUNDLOG_REQUEST_ID"] = setting
    if core == "python":
        environment["BOUNDLOG_NO_EXTENSIONS"] = "1"
    command = _uvicorn_command if server == "uvicorn" else _gunicorn_command
    with _servers.running_server(command, environment, tmp_path / f"{server}.out") as running:
        with _servers.http_client(running.port) as client:
            responses = [client.get(path, headers=headers) for path, headers in requests]
        clean_exits = _servers.UVICORN_CLEAN_EXITS if server == "uvicorn" else (0,)
        _servers.stop_gracefully(running, clean_exits)
    return responses, [json.loads(line) for line in _servers.read_log_lines(log_path)]


SERVERS = [
    pytest.param(server, core, id=f"{server}-{core}")
    for server in ("uvicorn", "gunicorn")
    for core in ("c", "python")
]


@pytest.mark.parametrize(("server", "core"), SERVERS)
@pytest.mark.parametrize(
    ("setting", "header"), [("1", "X-Request-ID"), ("X-Correlation-ID", "X-Correlation-ID")]
)
def test_each_request_has_the_id_the_response_and_the_line_show(
    tmp_path: Path, server: str, core: str, setting: str, header: str
) -> None:
    """Requests without an id, with a usable one, with each unusable one (a space, two
    fields, which a WSGI server joins with a comma, one character too many), and one
    whose application sets X-Request-ID in its response itself."""
    unusable = [[(header, "has space")], [(header, "one"), (header, "two")], [(header, "x" * 201)]]
    requests: list[tuple[str, Any]] = [
        ("/", None),
        ("/", [(header, CLIENT_ID)]),
        *(("/", sent) for sent in unusable),
        ("/own", None),
    ]
    responses, lines = _exchanges(tmp_path, server, core, setting, requests)
    request_key = "request_id" if header == "X-Request-ID" else "x_correlation_id"
    ids = [line[request_key] for line in lines]
    assert ids[1] == CLIENT_ID
    assert all(NEW_ID.fullmatch(new) for new in ids[:1] + ids[2:]), ids
    assert len(set(ids)) == len(ids), "every new id is a new one"
    # The application saw the id the line shows, and the response carries it, except
    # where the application set the header itself.
    assert [response.json()[header] for response in responses] == ids
    sent = [response.headers.get(header) for response in responses]
    assert sent == [*ids[:-1], OWN_ID if header == "X-Request-ID" else ids[-1]]
    # The record's response headers are those the server sent.
    response_key = "response_" + header.lower().replace("-", "_")
    assert [line[response_key] for line in lines] == sent
    if header != "X-Request-ID":
        assert [line["request_id"] for line in lines] == [None] * len(lines)
        assert [line["response_x_request_id"] for line in lines] == [None] * 5 + [OWN_ID]


@pytest.mark.parametrize("server", ["uvicorn", "gunicorn"])
@pytest.mark.parametrize("setting", [None, "0"])
def test_off_the_middleware_adds_no_id(tmp_path: Path, server: str, setting: str | None) -> None:
    responses, lines = _exchanges(
        tmp_path, server, "c", setting, [("/", None), ("/", {"X-Request-ID": CLIENT_ID})]
    )
    assert [response.headers.get("X-Request-ID") for response in responses] == [None, None]
    assert [response.json()["X-Request-ID"] for response in responses] == [None, CLIENT_ID]
    assert [line["request_id"] for line in lines] == [None, CLIENT_ID]


@pytest.mark.parametrize("middleware", [AccessLogMiddleware, WSGIMiddleware])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1, "request_id must be True, False or a header name, not 1"),
        (b"X-Request-ID", "request_id must be True, False or a header name"),
        ("X Request ID", "request_id='X Request ID': 'X Request ID' is not a header field"),
        ("", "is not a header field name"),
    ],
)
def test_a_bad_request_id_option_is_refused_before_a_log_is_built(
    tmp_path: Path, middleware: Any, value: object, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        middleware(_app, sink=str(tmp_path / "access.log"), request_id=value)
    assert not (tmp_path / "access.log").exists()


def test_a_bad_option_in_a_lazily_built_middleware_fails_the_startup() -> None:
    """Starlette builds the middleware inside the server's lifespan startup: the error
    stops the server there, as a log that cannot be built does."""

    async def start_up() -> list[dict[str, Any]]:
        middleware = AccessLogMiddleware(_app, request_id="X Request ID")
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "lifespan.startup"}

        async def send(message: Any) -> None:
            sent.append(message)

        await middleware({"type": "lifespan"}, receive, send)
        return sent

    [message] = asyncio.run(start_up())
    assert message["type"] == "lifespan.startup.failed"
    assert message["message"].startswith("boundlog: request_id='X Request ID': ")


@pytest.mark.parametrize(
    ("text", "header"),
    [("1", "X-Request-ID"), ("on", "X-Request-ID"), ("0", None), (" X-Trace ", "X-Trace")],
)
def test_the_variable_turns_ids_on_or_names_their_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, header: str | None
) -> None:
    monkeypatch.setenv("BOUNDLOG_REQUEST_ID", text)
    for middleware in (AccessLogMiddleware, WSGIMiddleware):
        built = middleware(_app, sink=str(tmp_path / "access.log"))
        built.log.close()
        assert (None if built._request_ids is None else built._request_ids.name) == header
        # The code wins; and a log the code gives comes with no variables.
        for passed in (middleware(_app, request_id=False), middleware(_app, log=_log(tmp_path))):
            assert passed._request_ids is None
            passed.log.close()


def test_a_bad_variable_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOUNDLOG_REQUEST_ID", "maybe so")
    with pytest.raises(ConfigurationError, match="BOUNDLOG_REQUEST_ID='maybe so' is neither"):
        AccessLogMiddleware(_app)
    monkeypatch.delenv("BOUNDLOG_REQUEST_ID")
    monkeypatch.setenv("BOUNDLOG_REQUEST_IDS", "1")
    with pytest.raises(ConfigurationError, match="did you mean BOUNDLOG_REQUEST_ID"):
        WSGIMiddleware(_app)


def test_integrations_that_cannot_change_responses_refuse_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    variables = {"BOUNDLOG_REQUEST_ID": "1"}
    with pytest.raises(ConfigurationError, match="not read under gunicorn's logger class"):
        options_from_environment(variables, gunicorn=True)
    monkeypatch.setenv("BOUNDLOG_REQUEST_ID", "1")
    with pytest.raises(ConfigurationError, match="not read by this integration"):
        access_logger()


def test_the_servers_scope_and_the_applications_message_are_left_as_they_were(
    tmp_path: Path,
) -> None:
    """A new id goes into a copy of the scope, and into a new start message: the server's
    scope and header list, and the application's tuple of headers, are unchanged."""
    start = {"type": "http.response.start", "status": 200, "headers": ((b"a", b"1"),)}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start)
        await send({"type": "http.response.body", "body": b"ok"})

    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    headers = [(b"host", b"example.org")]
    scope = {
        "type": "http", "method": "GET", "path": "/", "raw_path": b"/", "query_string": b"",
        "headers": headers, "http_version": "1.1", "client": ("127.0.0.1", 1),
    }  # fmt: skip
    middleware = AccessLogMiddleware(app, log=_log(tmp_path), request_id=True)
    asyncio.run(middleware(scope, receive, send))
    middleware.log.close()
    assert scope["headers"] is headers
    assert headers == [(b"host", b"example.org")]
    assert start["headers"] == ((b"a", b"1"),)
    [(name, value)] = sent[0]["headers"][1:]
    assert name == b"x-request-id"
    assert NEW_ID.fullmatch(value.decode())


def _log(tmp_path: Path) -> AccessLog:
    return AccessLog(str(tmp_path / "given.log"), format="json")


def _app(*args: Any) -> Any:
    raise AssertionError("never called")
