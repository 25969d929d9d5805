"""Websocket sessions: one record each, made when the session ends.

End to end, uvicorn (with each of its websocket implementations) and hypercorn serve
tests/apps/websocket_app.py and the ``websockets`` client talks to it; in process, the
middleware is called with receive and send coroutines of the test's own, for the cases
no server lets a client bring about.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from _records import CapturingFormat
from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    OPTIONS_VARIABLE,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    Server,
    read_log_lines,
    running_server,
    server_environment,
    stop_gracefully,
)
from boundlog import AccessLog, Extras, Record, Template
from boundlog.asgi import AccessLogMiddleware

Message = dict[str, Any]
USER_AGENT = "boundlog-test/1"
SESSION_FIELDS = "session-fields"


# The servers, by the name a test gives: the command that starts each on a port, and the
# exit statuses of its graceful stop.
SERVERS: dict[str, tuple[Callable[[int], list[str]], Sequence[int]]] = {
    **{
        f"uvicorn-{implementation}": (
            lambda port, implementation=implementation: [
                PYTHON, "-m", "uvicorn", "tests.apps.websocket_app:app", "--no-access-log",
                "--host", LOOPBACK, "--port", str(port), "--lifespan", "on", "--loop",
                "uvloop", "--http", "httptools", "--ws", implementation, "--log-level",
                "critical",
            ],
            UVICORN_CLEAN_EXITS,
        )
        for implementation in ("websockets-sansio", "wsproto")
    },
    "hypercorn": (
        lambda port: [
            PYTHON, "-m", "hypercorn", "--bind", f"{LOOPBACK}:{port}", "--workers", "1",
            "--log-level", "critical", "tests.apps.websocket_app:app",
        ],
        (0,),
    ),
}  # fmt: skip


@contextmanager
def serving(
    tmp_path: Path, name: str, log_format: str = SESSION_FIELDS, **options: Any
) -> Iterator[Server]:
    """Server ``name`` running the websocket app until the block ends, then stopped
    gracefully (its log drained)."""
    command, clean_exits = SERVERS[name]
    environment = server_environment(tmp_path / "access.log", log_format, "0.01")
    environment[OPTIONS_VARIABLE] = json.dumps(options)
    with running_server(command, environment, tmp_path / "server.out") as server:
        yield server
        stop_gracefully(server, clean_exits)


def session(server: Server, target: str) -> ClientConnection:
    return connect(
        f"ws://{LOOPBACK}:{server.port}{target}",
        user_agent_header=USER_AGENT,
        proxy=None,
        open_timeout=CLIENT_TIMEOUT,
        close_timeout=CLIENT_TIMEOUT,
    )


def refused_status(server: Server, target: str) -> tuple[int, bytes]:
    """The status and body the server answered a handshake it did not accept with."""
    with pytest.raises(InvalidStatus) as refusal:
        session(server, target)
    return refusal.value.response.status_code, refusal.value.response.body or b""


def logged_by_path(path: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in read_log_lines(path)]
    by_path = {line.pop("path"): line for line in lines}
    assert len(by_path) == len(lines), lines
    return by_path


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_each_session_is_logged_once_when_it_ends(tmp_path: Path, name: str) -> None:
    """Closed by the server, closed by the client, refused, denied, failing before and
    after the accept: one record each, with the status the client saw, the bytes of the
    frames, the duration of the whole session and the close code."""
    with serving(tmp_path, name) as server:
        with session(server, "/server-closes/4000?q=1") as client:
            began = time.monotonic()
            for text in ("one", "two"):
                client.send(text)
                assert client.recv(CLIENT_TIMEOUT) == text
            ended = time.monotonic()
            client.send("bye")
            assert client.recv(CLIENT_TIMEOUT) == "é"
            with pytest.raises(ConnectionClosed):
                client.recv(CLIENT_TIMEOUT)
            assert client.close_code == 4000
        with session(server, "/client-closes") as client:
            assert client.recv(CLIENT_TIMEOUT) == b"hello"
            client.close(code=4001, reason="done")
        assert refused_status(server, "/refuse")[0] == 403
        assert refused_status(server, "/deny") == (401, b"denied")
        assert refused_status(server, "/raise-before-accept")[0] == 500
        with session(server, "/raise-after-accept") as client:
            assert client.recv(CLIENT_TIMEOUT) == "x"
            client.send("boom")
            with pytest.raises(ConnectionClosed):
                client.recv(CLIENT_TIMEOUT)
    logged = logged_by_path(tmp_path / "access.log")
    durations = {path: fields.pop("duration") for path, fields in logged.items()}
    handshake = {"method": "GET", "protocol": "HTTP/1.1", "user_agent": USER_AGENT}
    # The client's close code as the application was told it: hypercorn (0.18) tells it
    # 1006, abnormal closure, whatever the client's close frame said.
    client_close = 1006 if name == "hypercorn" else 4001
    assert logged == {
        "/server-closes/4000": {
            **handshake, "query": "q=1", "status": 101, "bytes_sent": 3 + 3 + 2, "close_code": 4000,
        },
        "/client-closes": {
            **handshake, "query": "", "status": 101, "bytes_sent": 5, "close_code": client_close,
        },
        "/refuse": {**handshake, "query": "", "status": 403, "bytes_sent": 0, "close_code": None},
        "/deny": {**handshake, "query": "", "status": 401, "bytes_sent": 6, "close_code": None},
        "/raise-before-accept": {
            **handshake, "query": "", "status": 500, "bytes_sent": 0, "close_code": None,
        },
        "/raise-after-accept": {
            **handshake, "query": "", "status": 101, "bytes_sent": 1, "close_code": None,
        },
    }  # fmt: skip
    # The server's session began before the client's connect returned and ended after
    # the client's "bye" was sent: it spans the client's exchanges in between.
    assert durations["/server-closes/4000"] >= ended - began


def test_websockets_false_logs_no_session(tmp_path: Path) -> None:
    """``websockets=False``: the session goes through unrecorded, requests are logged."""
    with serving(tmp_path, "uvicorn-websockets-sansio", "combined", websockets=False) as server:
        with session(server, "/client-closes") as client:
            assert client.recv(CLIENT_TIMEOUT) == b"hello"
        with session(server, "/raise-after-accept"):
            pass
        assert refused_status(server, "/refuse")[0] == 403
        # The HTTP request after the sessions: its line is the only one.
        assert httpx.get(server.base_url + "/after", timeout=CLIENT_TIMEOUT).status_code == 200
    [line] = read_log_lines(tmp_path / "access.log")
    assert b'"GET /after HTTP/1.1" 200 2' in line


# -- in process ---------------------------------------------------------------------------


def websocket_scope(**overrides: Any) -> dict[str, Any]:
    """A websocket scope with what the middleware reads (no ``http_version``: optional)."""
    return (
        dict(
            type="websocket",
            path="/chat",
            raw_path=b"/chat",
            query_string=b"room=1",
            headers=[(b"host", b"example"), (b"user-agent", b"probe/1")],
            client=("10.1.2.3", 5000),
            subprotocols=[],
        )
        | overrides
    )


class ReadsExtras(CapturingFormat):
    """A format that reads the record's extras ``names``, and every header field."""

    def __init__(self, names: frozenset[str] = frozenset({"close_code"})) -> None:
        super().__init__(None, None)
        self.reads_extras = names


def run_session(
    app: Any,
    incoming: list[Message],
    fmt: Any = None,
    scope: dict[str, Any] | None = None,
) -> Record:
    """The one record of a session of ``app`` whose client sends ``incoming``; the
    record is in ``fmt.records`` also when the app raises."""
    fmt = ReadsExtras() if fmt is None else fmt
    messages = iter([{"type": "websocket.connect"}, *incoming])

    async def receive() -> Message:
        return next(messages)

    async def send(message: Message) -> None:
        pass

    with AccessLog("/dev/null", format=fmt, report_loss=False) as log:
        middleware = AccessLogMiddleware(app, log=log)
        try:
            asyncio.run(middleware(scope or websocket_scope(), receive, send))
        finally:
            log.flush()
    [record] = fmt.records
    assert type(record) is Record
    return record


def accepting(*then: Message) -> Any:
    """An app that accepts, receives one message, then sends ``then``."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept", "headers": [(b"x-room", b"1")]})
        await receive()
        for message in then:
            await send(message)

    return app


def test_a_session_record_holds_the_handshake_and_the_session() -> None:
    record = run_session(
        accepting(
            {"type": "websocket.send", "bytes": b"abc"},
            {"type": "websocket.send", "text": "日本"},
            {"type": "websocket.send", "bytes": None, "text": "x"},
            {"type": "websocket.close", "code": 4002},
        ),
        [{"type": "websocket.receive", "text": "hi"}],
        CapturingFormat(None, None),
    )
    assert record[2:9] == ("10.1.2.3", "GET", b"/chat", b"room=1", "HTTP/1.1", 101, 3 + 6 + 1)
    assert record.request_headers == websocket_scope()["headers"]
    # The accept's headers are the 101 response's.
    assert record.response_headers == [(b"x-room", b"1")]
    # A format that does not say what it reads reads every extra but bytes_received:
    # the session ended as the application returned.
    assert record.extras == Extras(completed=True, close_code=4002)


@pytest.mark.parametrize(
    ("then", "incoming", "close_code"),
    [
        # The app's close without a code is a normal closure.
        ([{"type": "websocket.close"}], [{"type": "websocket.receive", "text": "a"}], 1000),
        # The client closed first: its code, not the one the app closes with after.
        (
            [{"type": "websocket.close", "code": 1011}],
            [{"type": "websocket.disconnect", "code": 4003}],
            4003,
        ),
        # A close frame without a code, as the ASGI spec reports it.
        ([], [{"type": "websocket.disconnect"}], 1005),
        # Nothing seen: the app returned with the session open.
        ([], [{"type": "websocket.receive", "bytes": b"a"}], None),
    ],
)
def test_the_close_code_is_that_of_the_side_that_closed_first(
    then: list[Message], incoming: list[Message], close_code: int | None
) -> None:
    record = run_session(accepting(*then), incoming)
    assert (record.status, record.extras) == (101, Extras(close_code=close_code))


def test_a_log_that_reads_no_close_code_gets_no_extras_and_its_receive_is_the_servers() -> None:
    received: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        received.append(receive)
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 4000})

    async def receive() -> Message:
        raise AssertionError("never called")

    async def send(message: Message) -> None:
        pass

    fmt = ReadsExtras(frozenset())
    with AccessLog("/dev/null", format=fmt, report_loss=False) as log:
        asyncio.run(AccessLogMiddleware(app, log=log)(websocket_scope(), receive, send))
        log.flush()
    assert received == [receive]
    [record] = fmt.records
    assert (record.status, record.extras) == (101, None)


async def refusing(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "websocket.close", "code": 4000})
    # What uvicorn hands an app that reads on after refusing.
    assert (await receive())["code"] == 1006


def test_a_refused_handshake_is_a_403_without_a_close_code() -> None:
    record = run_session(refusing, [{"type": "websocket.disconnect", "code": 1006}])
    assert (record.status, record.bytes_sent, record.extras) == (403, 0, Extras())


def test_a_denial_response_logs_its_status_headers_and_body_bytes() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"www-authenticate", b"Bearer")]
        await send({"type": "websocket.http.response.start", "status": 401, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": b"no", "more_body": True})
        await send({"type": "websocket.http.response.body", "body": b"pe"})

    record = run_session(app, [], CapturingFormat(None, None))
    assert (record.status, record.bytes_sent) == (401, 4)
    assert record.response_headers == [(b"www-authenticate", b"Bearer")]
    # No websocket was opened: no close code, and no frame received.
    assert record.extras == Extras(completed=True)


@pytest.mark.parametrize("accepted", [False, True])
def test_an_app_that_raises_is_logged_and_its_exception_propagates(accepted: bool) -> None:
    class Boom(Exception):
        pass

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if accepted:
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.send", "text": "ab"})
        raise Boom

    fmt = ReadsExtras()
    with pytest.raises(Boom):
        run_session(app, [], fmt)
    [record] = fmt.records
    assert (record.status, record.bytes_sent) == ((101, 2) if accepted else (500, 0))


def test_an_app_that_returns_without_answering_the_handshake_is_a_500() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()

    assert run_session(app, []).status == 500


def test_the_duration_covers_the_session_not_just_the_handshake() -> None:
    spans: list[float] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.accept"})
        began = time.perf_counter()
        while (await receive())["type"] != "websocket.disconnect":
            pass
        spans.append(time.perf_counter() - began)

    frames = [{"type": "websocket.receive", "bytes": b"x" * 1000}] * 100
    record = run_session(app, [*frames, {"type": "websocket.disconnect", "code": 1000}])
    assert record.duration >= spans[0]


def test_a_template_shows_a_session_as_its_handshake_request(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    app = accepting({"type": "websocket.send", "bytes": b"12345"}, {"type": "websocket.close"})
    messages = iter([{"type": "websocket.connect"}, {"type": "websocket.receive", "text": "a"}])

    async def receive() -> Message:
        return next(messages)

    async def send(message: Message) -> None:
        pass

    scope = websocket_scope(http_version="2")
    with AccessLog(str(path), format=Template('%h "%r" %s %b %{x-room}o')) as log:
        asyncio.run(AccessLogMiddleware(app, log=log)(scope, receive, send))
    assert path.read_text() == '10.1.2.3 "GET /chat?room=1 HTTP/2" 101 5 1\n'


def test_websockets_false_makes_no_record_and_touches_nothing() -> None:
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((receive, send))

    async def receive() -> Message:
        return {}

    async def send(message: Message) -> None:
        pass

    with AccessLog("/dev/null", websockets=False, report_loss=False) as log:
        asyncio.run(AccessLogMiddleware(app, log=log)(websocket_scope(), receive, send))
        assert log.stats().submitted == 0
    assert seen == [(receive, send)]


def test_notes_added_during_a_session_are_in_its_record() -> None:
    from boundlog import add_fields

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "websocket.accept"})
        add_fields(room="lobby")
        await send({"type": "websocket.close"})

    assert run_session(app, [], CapturingFormat(None, None)).notes == {"room": "lobby"}


def test_a_session_over_the_record_budget_is_cut_down() -> None:
    scope = websocket_scope(headers=[(b"user-agent", b"u" * 20000), (b"cookie", b"c" * 100)])
    record = run_session(
        accepting(),
        [{"type": "websocket.disconnect", "code": 1000}],
        CapturingFormat(frozenset({b"user-agent"})),
        scope,
    )
    [(name, value)] = record.request_headers
    assert name == b"user-agent"
    assert value.endswith(b" bytes cut]")
    assert len(value) < 20000
