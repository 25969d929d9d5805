"""The ASGI middleware in process: when a record is completed and what it holds."""

from __future__ import annotations

import asyncio
import json
import re
import traceback
from pathlib import Path
from typing import Any

import pytest

import boundlog
from _helpers import BlockedPipe, wait_until
from _records import CapturingFormat, make_record
from boundlog import AccessLog, ConfigurationError, SinkError
from boundlog.asgi import AccessLogMiddleware

Message = dict[str, Any]


def http_scope(**overrides: Any) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/items",
        "raw_path": b"/items",
        "query_string": b"page=2",
        "root_path": "",
        "headers": [(b"host", b"example"), (b"user-agent", b"probe/1"), (b"referer", b"/r")],
        "client": ("10.1.2.3", 5000),
        "server": ("127.0.0.1", 8000),
    }
    scope.update(overrides)
    return scope


async def call(app: Any, scope: dict[str, Any]) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def start(status: int = 200) -> Message:
    return {"type": "http.response.start", "status": status, "headers": []}


def test_a_complete_response_is_logged_with_its_bytes(tmp_path: Path) -> None:
    """Streaming chunks add up; the record holds every field from the scope."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start(201))
        await send({"type": "http.response.body", "body": b"abc", "more_body": True})
        await send({"type": "http.response.body", "body": b"defg"})

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log:
        messages = asyncio.run(call(AccessLogMiddleware(app, log=log), http_scope()))
    assert [m["type"] for m in messages] == ["http.response.start"] + ["http.response.body"] * 2
    [line] = json_lines(path)
    assert {k: line[k] for k in line if k not in ("time", "duration_ms")} == {
        "client": "10.1.2.3",
        "method": "GET",
        "path": "/items",
        "query": "page=2",
        "protocol": "HTTP/1.1",
        "status": 201,
        "bytes_sent": 7,
        "referer": "/r",
        "user_agent": "probe/1",
        "request_id": None,
        "route": None,
        "trace_id": None,
        "span_id": None,
        "completed": True,
    }


def test_an_exception_before_the_response_is_logged_as_500_and_propagates(
    tmp_path: Path,
) -> None:
    """The application's exception reaches the server unchanged; the log says 500."""

    class Boom(Exception):
        pass

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise Boom("no response")

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log, pytest.raises(Boom, match="no response"):
        asyncio.run(call(AccessLogMiddleware(app, log=log), http_scope()))
    [line] = json_lines(path)
    assert (line["status"], line["bytes_sent"]) == (500, 0)


def test_an_exception_mid_body_keeps_the_status_and_bytes_sent(tmp_path: Path) -> None:
    """Raising after the response started logs the real status and the bytes so far."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start(200))
        await send({"type": "http.response.body", "body": b"12345", "more_body": True})
        raise RuntimeError("broken stream")

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log, pytest.raises(RuntimeError):
        asyncio.run(call(AccessLogMiddleware(app, log=log), http_scope()))
    [line] = json_lines(path)
    assert (line["status"], line["bytes_sent"]) == (200, 5)


def test_a_client_gone_mid_body_is_logged_once_with_the_bytes_sent(tmp_path: Path) -> None:
    """An app that stops streaming (client disconnected) still yields exactly one record."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start(200))
        await send({"type": "http.response.body", "body": b"x" * 100, "more_body": True})

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log:
        asyncio.run(call(AccessLogMiddleware(app, log=log), http_scope()))
    [line] = json_lines(path)
    assert (line["status"], line["bytes_sent"]) == (200, 100)


def test_trailers_finish_the_response_not_the_last_body(tmp_path: Path) -> None:
    """With trailers announced, the record is completed by the last trailers message."""
    order: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({**start(200), "trailers": True})
        await send({"type": "http.response.body", "body": b"ab"})
        order.append(f"body sent, logged={log.stats().submitted}")
        await send({"type": "http.response.trailers", "headers": [], "more_trailers": False})
        order.append(f"trailers sent, logged={log.stats().submitted}")

    path = tmp_path / "access.log"
    # A log that reads no notes: its record goes with the response's last message.
    with AccessLog(str(path), format="common") as log:
        asyncio.run(call(AccessLogMiddleware(app, log=log), http_scope()))
    assert order == ["body sent, logged=0", "trailers sent, logged=1"]
    assert path.read_bytes().split()[-1] == b"2"


class AppError(Exception):
    """What the application raises after its response."""


@pytest.mark.parametrize("core", ["c", "python"])
def test_a_log_reading_notes_holds_the_record_until_the_application_returns(
    tmp_path: Path, core: str
) -> None:
    """Fields added after the response (a background task's) join the record; the
    duration still ends with the response's last message."""
    order: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start(200))
        await send({"type": "http.response.body", "body": b"ab"})
        order.append(f"response sent, logged={log.stats().submitted}")
        boundlog.add_fields(background="done")
        raise AppError("the background task failed")

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log:
        middleware = AccessLogMiddleware(app, log=log)
        with pytest.raises(AppError):
            asyncio.run(call(middleware if core == "c" else middleware.__call__, http_scope()))
        assert order == ["response sent, logged=0"]
        assert log.stats().submitted == 1
    [line] = json_lines(path)
    assert (line["status"], line["bytes_sent"], line["background"]) == (200, 2, "done")


@pytest.mark.parametrize("log_format", ["json", "common"], ids=["holding", "not-holding"])
@pytest.mark.parametrize("core", ["c", "python"])
def test_what_an_application_sends_after_its_response_ended_makes_no_record(
    tmp_path: Path, core: str, log_format: str
) -> None:
    """A server ignores what follows the end of a response (uvicorn raises): another
    body, a new start.  The request has one record, of the response the server sent;
    a log that reads notes gives it the notes the request has when the application
    returns, as always."""
    sent: list[Message] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start(200))
        await send({"type": "http.response.body", "body": b"a"})
        boundlog.add_fields(n=1)
        await send({"type": "http.response.body", "body": b"bc"})
        await send(start(201))
        await send({"type": "http.response.body", "body": b"def"})
        boundlog.add_fields(n=2)

    async def server_send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    path = tmp_path / "access.log"
    with AccessLog(str(path), format=log_format) as log:
        middleware = AccessLogMiddleware(app, log=log)
        call = middleware if core == "c" else middleware.__call__
        asyncio.run(call(http_scope(), receive, server_send))
        assert log.stats().submitted == 1
    # The server had every message: what it does with them is its own business.
    assert len(sent) == 5
    if log_format == "json":
        [line] = json_lines(path)
        assert (line["status"], line["bytes_sent"], line["n"]) == (200, 1, 2)
    else:
        [line] = path.read_bytes().splitlines()
        assert line.endswith(b'" 200 1')


class Refused(Exception):
    """What a server raises for a start message it cannot send (uvicorn: a status that is
    not an int)."""


@pytest.mark.parametrize("refused", [False, True], ids=["server-takes-it", "server-refuses"])
@pytest.mark.parametrize("status", ["200", 200.0, float("nan"), None], ids=repr)
@pytest.mark.parametrize("core", ["c", "python"])
def test_a_status_that_is_no_int_is_logged_as_0_or_as_the_500_of_a_response_never_ended(
    tmp_path: Path, core: str, status: Any, refused: bool
) -> None:
    """A record's status is an int, which every format writes: a status that is none
    (a str, a float) made a record that no format could write, counted as failed."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"ab"})

    async def server_send(message: Message) -> None:
        if refused and message["type"] == "http.response.start":
            raise Refused(message["status"])

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log:
        middleware = AccessLogMiddleware(app, log=log)
        run = middleware if core == "c" else middleware.__call__
        if refused:
            with pytest.raises(Refused):
                asyncio.run(run(http_scope(), receive, server_send))
        else:
            asyncio.run(run(http_scope(), receive, server_send))
    assert log.stats().failed == 0
    [line] = json_lines(path)
    assert (line["status"], line["completed"]) == ((500, False) if refused else (0, True))


def test_scopes_of_other_types_reach_the_app_untouched(tmp_path: Path) -> None:
    """A scope of a type the middleware does not log goes through with the same scope
    and receive, no record (websocket sessions: tests/unit/capture/test_websockets.py)."""
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope, receive))

    scope = {"type": "webtransport"}

    async def receive() -> Message:
        return {}

    async def send(message: Message) -> None:
        pass

    with AccessLog(str(tmp_path / "access.log")) as log:
        asyncio.run(AccessLogMiddleware(app, log=log)(scope, receive, send))
        assert log.stats().submitted == 0
    assert seen == [(scope, receive)]


async def run_lifespan(middleware: Any, path: Path) -> tuple[list[Message], list[int]]:
    """Startup then shutdown, as a server sends them: the messages the middleware sent
    back, and the log's line count when it sent each."""
    events = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[Message] = []
    lines: list[int] = []

    async def receive() -> Message:
        return next(events)

    async def send(message: Message) -> None:
        sent.append(message)
        lines.append(len(path.read_bytes().splitlines()))

    await middleware({"type": "lifespan"}, receive, send)
    return sent, lines


def running_past_its_response(
    responded: asyncio.Event, resume: asyncio.Event, *, resumed_at_shutdown: bool
) -> Any:
    """An application with a lifespan whose request sends a 2-byte response, sets
    ``responded`` and goes on (a background task) until ``resume`` is set, then adds a
    field.  With ``resumed_at_shutdown`` its lifespan shutdown sets it, as an
    application's shutdown handlers would end such work."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            if resumed_at_shutdown:
                resume.set()
            await send({"type": "lifespan.shutdown.complete"})
            return
        await send(start(200))
        await send({"type": "http.response.body", "body": b"ab"})
        responded.set()
        await resume.wait()
        boundlog.add_fields(finished="at shutdown")

    return app


@pytest.mark.parametrize("core", ["c", "python"])
def test_the_lifespan_shutdown_waits_for_records_held_by_running_applications(
    tmp_path: Path, core: str
) -> None:
    """A json log holds a record until its application returns (for the fields a
    background task adds): a server that stops right after the lifespan shutdown
    (granian) lost it.  The shutdown waits for it before the log closes."""
    path = tmp_path / "access.log"

    async def main() -> tuple[list[Message], list[int], int, int]:
        responded, shutting_down = asyncio.Event(), asyncio.Event()
        app = running_past_its_response(responded, shutting_down, resumed_at_shutdown=True)
        middleware = AccessLogMiddleware(app, sink=str(path), format="json")
        request = asyncio.ensure_future(
            call(middleware if core == "c" else middleware.__call__, http_scope())
        )
        await responded.wait()
        held = middleware._records_held_now()
        sent, lines = await run_lifespan(middleware, path)
        await request
        return sent, lines, held, middleware._records_held_now()

    sent, lines, held, held_after = asyncio.run(main())
    assert (held, held_after) == (1, 0)
    assert [message["type"] for message in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert lines == [0, 1]
    [line] = json_lines(path)
    assert (line["status"], line["bytes_sent"], line["finished"]) == (200, 2, "at shutdown")


def test_the_lifespan_shutdown_says_how_many_held_records_it_did_not_get(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """An application that goes on past close_timeout: the shutdown does not wait for
    ever (application code may never end), and says what it leaves."""
    path = tmp_path / "access.log"

    async def main() -> tuple[list[Message], boundlog.Stats]:
        responded, released = asyncio.Event(), asyncio.Event()
        app = running_past_its_response(responded, released, resumed_at_shutdown=False)
        middleware = AccessLogMiddleware(app, sink=str(path), format="json", close_timeout=0.05)
        request = asyncio.ensure_future(call(middleware, http_scope()))
        await responded.wait()
        sent, _ = await run_lifespan(middleware, path)
        released.set()
        await request
        return sent, middleware.log.stats()

    sent, stats = asyncio.run(main())
    assert [message["type"] for message in sent][-1] == "lifespan.shutdown.complete"
    said = capfd.readouterr().err.splitlines()
    assert [line for line in said if "after their responses" in line] == [
        f"boundlog: {path}: 1 request(s) still running after their responses when the "
        "server shut the application down (a background task), 0.05 s later: their lines "
        "are lost"
    ]
    # Its application ended after all, here: the record came after close(), and is
    # counted (and said) as such.
    assert (stats.submitted, stats.written, stats.dropped) == (1, 0, 1)
    assert any("a record that came after close() was dropped" in line for line in said)


@pytest.mark.parametrize("refusal", ["raises", "returns"])
@pytest.mark.parametrize("owned", [True, False])
def test_an_app_refusing_the_lifespan_gets_the_middlewares_answer_which_drains(
    refusal: str, owned: bool, tmp_path: Path
) -> None:
    """An app that raises (Django's ValueError) or returns on the lifespan scope without
    receiving: startup and shutdown still complete, and the log is drained before the
    shutdown completes, as for an app with a lifespan of its own."""
    path = tmp_path / "access.log"
    borrowed = None if owned else AccessLog(str(path), flush_interval=3600)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await send(start(204))
            await send({"type": "http.response.body"})
            return
        if refusal == "raises":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")

    middleware = (
        AccessLogMiddleware(app, sink=str(path), flush_interval=3600)
        if owned
        else AccessLogMiddleware(app, log=borrowed)
    )

    async def serve() -> tuple[list[Message], list[int]]:
        await call(middleware, http_scope())
        return await run_lifespan(middleware, path)

    sent, lines = asyncio.run(serve())
    assert [message["type"] for message in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert lines == [0, 1]
    if borrowed is not None:
        assert borrowed.submit(make_record()), "a borrowed log stays open after shutdown"
        borrowed.close()


def test_a_failed_startup_of_an_app_with_a_lifespan_reaches_the_server(tmp_path: Path) -> None:
    """An app that received the startup and then raised supports the lifespan: its error
    goes to the server unchanged, with no answer of the middleware's."""

    class StartupError(Exception):
        pass

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        raise StartupError

    path = tmp_path / "access.log"
    middleware = AccessLogMiddleware(app, sink=str(path))
    with pytest.raises(StartupError):
        asyncio.run(run_lifespan(middleware, path))
    middleware.log.close()


@pytest.mark.parametrize("owned", [True, False])
def test_lifespan_shutdown_drains_the_log_before_completing(owned: bool, tmp_path: Path) -> None:
    """Before the server hears shutdown.complete, an owned log is closed, a borrowed flushed."""
    path = tmp_path / "access.log"
    borrowed = None if owned else AccessLog(str(path), flush_interval=3600)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await send(start(204))
            await send({"type": "http.response.body"})
            return
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})

    middleware = (
        AccessLogMiddleware(app, sink=str(path), flush_interval=3600)
        if owned
        else AccessLogMiddleware(app, log=borrowed)
    )
    lines_at_completion: list[int] = []

    async def serve() -> None:
        await call(middleware, http_scope())
        events = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

        async def receive() -> Message:
            return next(events)

        async def send(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                lines_at_completion.append(len(path.read_bytes().splitlines()))

        await middleware({"type": "lifespan"}, receive, send)

    asyncio.run(serve())
    assert lines_at_completion == [1]
    assert middleware.log.stats().written == 1
    if borrowed is not None:
        assert borrowed.submit(make_record()), "a borrowed log stays open after shutdown"
        borrowed.close()


def test_log_and_options_together_are_refused() -> None:
    """Passing a log and options for another one is ambiguous and raises."""
    with pytest.raises(ConfigurationError, match="not both: got log and format"):
        AccessLogMiddleware(lambda *a: None, log=object(), format="json")  # type: ignore[arg-type]


def test_wait_policy_applies_backpressure_to_the_last_message(tmp_path: Path) -> None:
    """Under wait, a full queue delays the final body message until the record is admitted."""
    pipe = BlockedPipe()
    log = AccessLog(pipe.write_fd, policy="wait", max_queue=1, flush_interval=0)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start(200))
        await send({"type": "http.response.body", "body": b"ok"})

    middleware = AccessLogMiddleware(app, log=log)

    async def scenario() -> None:
        await call(middleware, http_scope())  # taken by the writer, which then blocks
        wait_until(lambda: log.stats().queued == 0)
        await call(middleware, http_scope())  # fills the queue
        third = asyncio.ensure_future(call(middleware, http_scope()))
        for _ in range(100):
            await asyncio.sleep(0)
        assert not third.done()
        pipe.release()
        messages = await third
        assert messages[-1]["type"] == "http.response.body"

    asyncio.run(scenario())
    stats = log.close()
    assert (stats.submitted, stats.written, stats.dropped) == (3, 3, 0)
    pipe.close()


@pytest.mark.parametrize(
    ("response_names", "kept"),
    [(frozenset({b"content-type"}), True), (frozenset(), False), (None, True)],
    ids=["format-reads-one", "format-reads-none", "format-does-not-say"],
)
def test_a_record_keeps_the_response_headers_only_for_a_log_that_reads_them(
    tmp_path: Path, response_names: frozenset[bytes] | None, kept: bool
) -> None:
    """The request's header list always goes along; the application's response list only
    when the format may read it, so that a queued record does not keep it alive for nothing."""
    headers = [(b"content-type", b"text/plain")]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    capture = CapturingFormat(frozenset({b"referer"}), response_names)
    scope = http_scope()
    with AccessLog(str(tmp_path / "access.log"), format=capture) as log:
        asyncio.run(call(AccessLogMiddleware(app, log=log), scope))
    [record] = capture.records
    assert record.request_headers is scope["headers"]
    assert record.response_headers == (headers if kept else ())


def pathsend_app(headers: list[tuple[bytes, bytes]], path: Path) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.pathsend", "path": str(path)})

    return app


@pytest.mark.parametrize(
    ("content_length", "logged"),
    [
        (b"12", 12),
        (b"12, 12", 12),
        (b" 12 ,12", 12),
        (b"12, 13", 5),
        (b"twelve", 5),
        (b"", 5),
        (b"9" * 5000, 5),
    ],
    ids=[
        "one",
        "repeated",
        "repeated-spaced",
        "conflicting",
        "not-a-number",
        "empty",
        "more-digits-than-int-reads",
    ],
)
def test_pathsend_logs_the_content_length_or_else_the_file_size(
    tmp_path: Path, content_length: bytes, logged: int
) -> None:
    """A Content-Length the response states is logged (RFC 9110 lets identical repeats
    stand for one); one that states no single number neither raises into the request
    nor is guessed at: the file's size is logged."""
    sent = tmp_path / "file.txt"
    sent.write_bytes(b"12345")
    app = pathsend_app([(b"content-length", content_length)], sent)
    capture = CapturingFormat(frozenset())
    with AccessLog(str(tmp_path / "access.log"), format=capture) as log:
        messages = asyncio.run(call(AccessLogMiddleware(app, log=log), http_scope()))
    assert messages[-1]["type"] == "http.response.pathsend"
    assert [record.bytes_sent for record in capture.records] == [logged]


def test_a_line_of_a_pathsend_shows_the_files_size(tmp_path: Path) -> None:
    """The combined line, whose records the C core queues packed, shows the size of the
    file sent (which the record learns apart from the body bytes it counts)."""
    sent = tmp_path / "file.txt"
    sent.write_bytes(b"12345")
    path = tmp_path / "access.log"
    with AccessLog(str(path), format="combined") as log:
        asyncio.run(call(AccessLogMiddleware(pathsend_app([], sent), log=log), http_scope()))
    assert '"GET /items?page=2 HTTP/1.1" 200 5 "/r" "probe/1"' in path.read_text()


def test_the_duration_never_depends_on_the_wall_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wall clock stepped back an hour during the request changes neither the duration,
    which the monotonic clock measures, nor its sign; the record's time is the wall clock's."""
    import boundlog.asgi

    readings = iter([1_700_003_600.0, 1_700_000_000.0])
    monkeypatch.setattr(boundlog.asgi, "time", lambda: next(readings, 1_700_000_000.0))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start(200))
        await send({"type": "http.response.body", "body": b"ok"})

    capture = CapturingFormat(frozenset())
    with AccessLog(str(tmp_path / "access.log"), format=capture) as log:
        # The pure-Python path, whose clock this test can step; the C path reads the
        # same two clocks in C (csrc/common/clock.h).
        reference = AccessLogMiddleware(app, log=log).__call__
        asyncio.run(call(reference, http_scope()))
    [record] = capture.records
    assert 0 <= record.duration < 60
    assert 1_700_000_000.0 - 60 < record.time <= 1_700_003_600.0


def lifespan_startup(app: Any) -> list[Message]:
    """Run the lifespan startup through ``app``; the messages it sends back."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "lifespan.startup"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send))
    return sent


async def inner_app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.complete"})


@pytest.mark.parametrize(
    ("options", "error", "reason"),
    [
        ({"sink": "/no/such/directory/access.log"}, SinkError, "/no/such/directory"),
        ({"format": "combind"}, ConfigurationError, "unknown format 'combind'"),
        ({"sinkk": "access.log"}, ConfigurationError, "option 'sinkk' (did you mean 'sink'?)"),
    ],
    ids=["missing-directory", "misspelt-format", "misspelt-option"],
)
def test_a_log_that_cannot_be_built_in_a_running_loop_fails_the_lifespan_startup(
    options: dict[str, Any], error: type[Exception], reason: str
) -> None:
    """Made inside the server's first call, as Starlette's add_middleware does, the
    middleware answers the lifespan startup with the reason (which stops every ASGI
    server), and fails each request with the error instead of logging nothing."""

    class LazyApp:
        """Builds the middleware on the first call, as Starlette does."""

        middleware: Any = None

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if self.middleware is None:
                self.middleware = AccessLogMiddleware(inner_app, **options)
            await self.middleware(scope, receive, send)

    lazy = LazyApp()
    [failed] = lifespan_startup(lazy)
    assert failed["type"] == "lifespan.startup.failed"
    assert failed["message"].startswith("boundlog: ")
    assert reason in failed["message"]
    for _ in range(2):
        with pytest.raises(error, match=re.escape(reason)) as raised:
            asyncio.run(call(lazy, http_scope()))
        assert raised.value.__traceback__ is not None
        assert len(traceback.extract_tb(raised.value.__traceback__)) < 10


def test_a_log_that_cannot_be_built_outside_a_loop_raises_at_once() -> None:
    """Made at import time, the middleware raises as the application module loads."""
    with pytest.raises(ConfigurationError, match="unknown format 'combind'"):
        AccessLogMiddleware(inner_app, format="combind")
    with pytest.raises(SinkError, match="/no/such/directory"):
        AccessLogMiddleware(inner_app, sink="/no/such/directory/access.log")


def test_a_log_built_in_a_running_loop_starts_as_usual(tmp_path: Path) -> None:
    """The lazy case with a usable log: the application's own startup answers."""

    async def scenario() -> list[Message]:
        middleware = AccessLogMiddleware(inner_app, sink=str(tmp_path / "access.log"))
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "lifespan.startup"}

        async def send(message: Message) -> None:
            sent.append(message)

        await middleware({"type": "lifespan"}, receive, send)
        middleware.log.close()
        return sent

    assert asyncio.run(scenario()) == [{"type": "lifespan.startup.complete"}]
