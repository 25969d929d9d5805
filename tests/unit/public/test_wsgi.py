"""The WSGI middleware, checked by wsgiref's validator and by a real wsgiref server."""

from __future__ import annotations

import gc
import http.client
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar
from wsgiref.simple_server import WSGIRequestHandler, make_server
from wsgiref.util import setup_testing_defaults
from wsgiref.validate import validator

import pytest

from _records import CapturingFormat
from boundlog import AccessLog
from boundlog.record._record import CLIENT, REQUEST_HEADERS
from boundlog.wsgi import AccessLogMiddleware

StartResponse = Callable[..., Any]


def environ(**overrides: str) -> dict[str, Any]:
    env: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": "/things",
        "QUERY_STRING": "a=1",
        "REMOTE_ADDR": "192.0.2.7",
        "HTTP_USER_AGENT": "probe/2",
        "HTTP_REFERER": "http://example/",
    }
    env.update(overrides)
    setup_testing_defaults(env)
    return env


def run(app: Any, env: dict[str, Any]) -> bytes:
    """Call a WSGI app the way a server does: iterate the body, then close it."""
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        return written.append

    body = app(env, start_response)
    try:
        for chunk in body:
            written.append(chunk)
    finally:
        if hasattr(body, "close"):
            body.close()
    return b"".join(written)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def hello(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello ", b"world"]


def test_a_response_is_logged_once_with_its_fields(tmp_path: Path) -> None:
    """Every field comes from the environ; the body bytes are counted."""
    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log:
        app = validator(AccessLogMiddleware(validator(hello), log=log))
        assert run(app, environ(HTTP_X_REQUEST_ID="req-42")) == b"hello world"
    [line] = lines(path)
    assert {k: line[k] for k in line if k not in ("time", "duration_ms")} == {
        "client": "192.0.2.7",
        "method": "GET",
        "path": "/things",
        "query": "a=1",
        "protocol": "HTTP/1.0",
        "status": 200,
        "bytes_sent": 11,
        "referer": "http://example/",
        "user_agent": "probe/2",
        "request_id": "req-42",
        "route": None,
        "trace_id": None,
        "span_id": None,
        "completed": True,
    }


@pytest.mark.parametrize(
    ("status_line", "status"),
    [
        ("200 OK", 200),
        ("404 Not Found", 404),
        ("404 NOT FOUND", 404),
        ("299 Custom Reason", 299),
        ("599 ", 599),
        ("OK", 0),
        ("\u00b200 Superscript", 0),
    ],
)
def test_the_status_code_comes_from_the_status_line(
    tmp_path: Path, status_line: str, status: int
) -> None:
    """A standard line, another reason phrase or none give the code; no code gives 0."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        start_response(status_line, [])
        return [b""]

    capture = CapturingFormat(frozenset())
    with AccessLog(str(tmp_path / "access.log"), format=capture) as log:
        run(AccessLogMiddleware(app, log=log), environ())
    assert [record.status for record in capture.records] == [status]


class ServerRefusal(Exception):
    """What a server raises for a status that is not a str (waitress: AssertionError)."""


@pytest.mark.parametrize("status", [200, None, ["200 OK"]], ids=["int", "none", "list"])
def test_a_status_that_is_no_str_meets_the_servers_own_error(tmp_path: Path, status: Any) -> None:
    """PEP 3333's status is a str; the server refuses anything else with its own error,
    which the middleware's reading of the code must not replace (it raised TypeError)."""

    def start_response(status: Any, headers: Any, exc_info: Any = None) -> Any:
        if not isinstance(status, str):
            raise ServerRefusal(status)
        return None

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        start_response(status, [])
        return [b""]

    capture = CapturingFormat(frozenset())
    with (
        AccessLog(str(tmp_path / "access.log"), format=capture) as log,
        pytest.raises(ServerRefusal),
    ):
        AccessLogMiddleware(app, log=log)(environ(), start_response)
    assert len(capture.records) == 1


class ClosingList(list[bytes]):
    """A list body with a close() of its own, as some frameworks return."""

    closed = 0

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize(
    "make_body",
    [list, tuple, ClosingList, lambda chunks: (chunk for chunk in chunks)],
    ids=["list", "tuple", "list-with-close", "generator"],
)
def test_every_kind_of_body_is_counted_and_closed_once(
    tmp_path: Path, make_body: Callable[[list[bytes]], Iterable[bytes]]
) -> None:
    """Lists go to the server as they are, other iterables through a counter; close() once."""
    bodies: list[Iterable[bytes]] = []

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        bodies.append(make_body([b"hello ", b"", b"world"]))
        return bodies[0]

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log:
        assert run(validator(AccessLogMiddleware(validator(app), log=log)), environ()) == (
            b"hello world"
        )
    assert lines(path)[0]["bytes_sent"] == 11
    if isinstance(bodies[0], ClosingList):
        assert bodies[0].closed == 1


def test_a_list_body_never_iterated_logs_no_bytes(tmp_path: Path) -> None:
    """A server that closes the body without taking from it (client gone) logs 0 bytes."""
    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log:
        AccessLogMiddleware(hello, log=log)(environ(), lambda *a: None).close()  # type: ignore[attr-defined]
    assert lines(path)[0]["bytes_sent"] == 0


def test_write_callable_bytes_are_counted(tmp_path: Path) -> None:
    """Bytes passed to the legacy write() callable count like body bytes."""

    def legacy(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"1234")
        return [b"56"]

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log:
        run(validator(AccessLogMiddleware(validator(legacy), log=log)), environ())
    assert lines(path)[0]["bytes_sent"] == 6


def test_an_exception_before_start_response_is_500_and_propagates(tmp_path: Path) -> None:
    """The app's exception is re-raised unchanged and the record says 500, 0 bytes."""

    def broken(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        raise LookupError("no such thing")

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log, pytest.raises(LookupError):
        run(AccessLogMiddleware(broken, log=log), environ())
    [line] = lines(path)
    assert (line["status"], line["bytes_sent"]) == (500, 0)


def test_a_body_raising_before_the_server_took_a_chunk_is_the_500_it_answers(
    tmp_path: Path,
) -> None:
    """wsgiref (as gunicorn and waitress) sends the headers with the first chunk it
    takes, even an empty one: an application or a body that raises before leaves it free
    to answer 500, and the line says so.  A body that raises later keeps the status that
    was sent."""

    def failing(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        if environ["PATH_INFO"] == "/started":
            raise LookupError("the application fails after start_response, on purpose")
        first = {"/first": [], "/empty": [b""], "/later": [b"abc"]}[environ["PATH_INFO"]]

        def chunks() -> Iterator[bytes]:
            yield from first
            raise LookupError("the body fails, on purpose")

        return chunks()

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args: Any) -> None:
            pass

    path = tmp_path / "access.log"
    statuses = []
    with AccessLog(str(path), format="json") as log:
        server = make_server(
            "127.0.0.1", 0, AccessLogMiddleware(failing, log=log), handler_class=Quiet
        )
        # wsgiref prints the application's traceback: expected, and not this test's.
        server.handle_error = lambda *args: None  # type: ignore[method-assign]
        thread = threading.Thread(target=server.serve_forever)
        thread.start()
        try:
            for request_path in ("/started", "/first", "/empty", "/later"):
                connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
                connection.request("GET", request_path)
                statuses.append(connection.getresponse().status)
                connection.close()
        finally:
            server.shutdown()
            thread.join()
            server.server_close()
    assert statuses == [500, 500, 200, 200]
    assert [(line["path"], line["status"], line["bytes_sent"]) for line in lines(path)] == [
        ("/started", 500, 0),
        ("/first", 500, 0),
        ("/empty", 200, 0),
        ("/later", 200, 3),
    ]


def test_a_body_abandoned_midway_logs_the_bytes_taken(tmp_path: Path) -> None:
    """A server that stops iterating (client gone) and closes logs only what it took."""
    closed = threading.Event()

    def endless(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])

        def chunks() -> Iterator[bytes]:
            try:
                while True:
                    yield b"x" * 10
            finally:
                closed.set()

        return chunks()

    path = tmp_path / "access.log"
    with AccessLog(str(path), format="json") as log:
        body = AccessLogMiddleware(endless, log=log)(environ(), lambda *a: None)
        chunks = iter(body)
        next(chunks)
        next(chunks)
        body.close()  # type: ignore[attr-defined]
    assert closed.is_set(), "the app's own close() must be called"
    assert lines(path)[0]["bytes_sent"] == 20


def test_a_real_wsgiref_server_logs_each_request(tmp_path: Path) -> None:
    """Requests over a loopback socket to wsgiref's server produce one combined line each."""
    path = tmp_path / "access.log"

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args: Any) -> None:
            pass

    with AccessLog(str(path)) as log:
        server = make_server(
            "127.0.0.1", 0, AccessLogMiddleware(hello, log=log), handler_class=Quiet
        )
        thread = threading.Thread(target=server.serve_forever)
        thread.start()
        try:
            for query in ("", "?q=1"):
                connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
                connection.request("GET", f"/hi{query}", headers={"User-Agent": "ua x"})
                assert connection.getresponse().read() == b"hello world"
                connection.close()
        finally:
            server.shutdown()
            thread.join()
            server.server_close()
    written = path.read_text().splitlines()
    assert [line.split('"')[1] for line in written] == [
        "GET /hi HTTP/1.1",
        "GET /hi?q=1 HTTP/1.1",
    ]
    assert all(line.endswith('200 11 "-" "ua x"') for line in written)


_REFERER = {"HTTP_REFERER": "http://example/"}


@pytest.mark.parametrize(
    ("names", "options", "expected"),
    [
        (frozenset({b"referer"}), {}, _REFERER),
        (
            frozenset({b"referer", b"content-type"}),
            {},
            {**_REFERER, "CONTENT_TYPE": "text/plain"},
        ),
        (
            frozenset({b"referer", b"content-type", b"x-absent"}),
            {},
            {**_REFERER, "CONTENT_TYPE": "text/plain", "HTTP_X_ABSENT": None},
        ),
        (
            frozenset({b"referer"}),
            {"trusted_proxies": ["10.0.0.0/8"]},
            {**_REFERER, "HTTP_X_FORWARDED_FOR": "203.0.113.1"},
        ),
        (None, {}, None),
        (frozenset({b"referer"}), {"keep": lambda record: True}, None),
    ],
    ids=[
        "one-field",
        "two-fields",
        "three-fields-one-absent",
        "plus-proxy-header",
        "format-does-not-say",
        "keep-predicate",
    ],
)
def test_a_record_keeps_only_the_header_fields_the_log_reads(
    tmp_path: Path,
    names: frozenset[bytes] | None,
    options: dict[str, Any],
    expected: dict[str, str | None] | None,
) -> None:
    """Not the server's environ, which would keep its streams alive in the queue, unless
    the log may read any field (``expected`` None); an absent field is kept as None."""
    capture = CapturingFormat(names)
    env = environ(HTTP_X_FORWARDED_FOR="203.0.113.1", CONTENT_TYPE="text/plain")
    with AccessLog(str(tmp_path / "access.log"), format=capture, **options) as log:
        run(AccessLogMiddleware(hello, log=log), env)
    [record] = capture.records
    # The response's header list only goes to a log that may read it (a keep predicate).
    assert record.response_headers == (
        [("Content-Type", "text/plain")] if "keep" in options else ()
    )
    if expected is None:
        assert record.request_headers is env
    else:
        assert record.request_headers == expected


class GunicornResponse:
    """What gunicorn's workers hand its logger as ``resp``."""

    status = "200 OK"
    sent = 3
    headers: ClassVar[list[tuple[str, str]]] = []


class GunicornRequest:
    """What gunicorn's workers hand its logger as ``req``."""

    headers: ClassVar[list[tuple[str, str]]] = []


# Environs as servers fill them, each with one thing missing or unusual.
ENVIRONS = {
    "plain": {"PATH_INFO": "/a", "QUERY_STRING": "x=1"},
    "no-method": {"REQUEST_METHOD": None, "PATH_INFO": "/a"},
    "empty-method": {"REQUEST_METHOD": "", "PATH_INFO": "/a"},
    "empty-remote-addr": {"REMOTE_ADDR": "", "PATH_INFO": "/a"},
    "no-remote-addr": {"REMOTE_ADDR": None, "PATH_INFO": "/a"},
    "script-name": {"SCRIPT_NAME": "/app", "PATH_INFO": "/b", "QUERY_STRING": "y=2"},
    "raw-uri": {"RAW_URI": "/raw%20p?q=%22", "PATH_INFO": "/raw p", "QUERY_STRING": "q=%22"},
    "request-uri": {"REQUEST_URI": "/app/u?z", "SCRIPT_NAME": "/app", "PATH_INFO": "/u"},
    "empty-raw-uri": {"RAW_URI": "", "PATH_INFO": "/p", "QUERY_STRING": "k"},
    "no-protocol": {"SERVER_PROTOCOL": None, "PATH_INFO": "/a"},
    "latin-1-path": {"PATH_INFO": "/caf\xe9"},
}


def server_environ(overrides: dict[str, str | None]) -> dict[str, Any]:
    env: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "REMOTE_ADDR": "192.0.2.7",
        "SERVER_PROTOCOL": "HTTP/1.1",
        **overrides,
    }
    return {name: value for name, value in env.items() if value is not None}


@pytest.mark.parametrize("overrides", ENVIRONS.values(), ids=ENVIRONS.keys())
def test_the_wsgi_middleware_and_the_gunicorn_logger_log_an_environ_alike(
    tmp_path: Path, overrides: dict[str, str | None]
) -> None:
    """The same environ gives the same record fields through both, and the same line."""
    from gunicorn.config import Config

    from boundlog.gunicorn import Logger

    env = server_environ(overrides)
    capture = CapturingFormat(frozenset())
    with AccessLog(str(tmp_path / "wsgi.log"), format=capture) as log:

        def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
            start_response("200 OK", [])
            return [b"abc"]

        run(AccessLogMiddleware(app, log=log), dict(env))
        logger = Logger(Config())
        logger.boundlog = log
        logger.access(GunicornResponse(), GunicornRequest(), dict(env), timedelta(milliseconds=3))
    through_wsgi, through_gunicorn = capture.records
    assert through_wsgi[CLIENT:REQUEST_HEADERS] == through_gunicorn[CLIENT:REQUEST_HEADERS]
    assert through_wsgi.bytes_sent == 3
    lines_path = tmp_path / "lines.log"
    with AccessLog(str(lines_path), format="common") as lines_log:
        for record in capture.records:
            lines_log.submit(record._replace(time=0.0))
    lines = lines_path.read_bytes().splitlines(keepends=True)
    assert lines[0] == lines[1]
    assert re.fullmatch(rb'\S+ - - \[[^]]+\] "\S+ \S+ \S+" 200 3\n', lines[0]), lines[0]


def test_a_clock_step_back_during_a_request_logs_no_negative_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The middleware measures the duration by the monotonic clock: a wall clock stepped
    back an hour between the request and its close changes neither its size nor sign."""
    import boundlog.wsgi

    readings = iter([1_700_003_600.0, 1_700_000_000.0])
    monkeypatch.setattr(boundlog.wsgi, "time", lambda: next(readings, 1_700_000_000.0))
    capture = CapturingFormat(frozenset())
    with AccessLog(str(tmp_path / "access.log"), format=capture) as log:
        run(AccessLogMiddleware(hello, log=log), environ())
    [record] = capture.records
    assert 0 <= record.duration < 60


@pytest.mark.parametrize(
    ("elapsed", "duration"),
    [(timedelta(milliseconds=1500), 1.5), (timedelta(days=1, seconds=2), 86_402.0),
     (timedelta(seconds=-1), 0.0), (timedelta(microseconds=-1), 0.0)],
    ids=["1.5s", "over-a-day", "clock-step-back", "a-microsecond-back"],
)  # fmt: skip
def test_the_gunicorn_logger_reads_the_whole_timedelta(
    tmp_path: Path, elapsed: timedelta, duration: float
) -> None:
    """gunicorn's workers time a request by the wall clock: a step back gives a negative
    timedelta, logged as 0 rather than as the day minus the step that ``seconds`` holds."""
    from gunicorn.config import Config

    from boundlog.gunicorn import Logger

    capture = CapturingFormat(frozenset())
    with AccessLog(str(tmp_path / "access.log"), format=capture) as log:
        logger = Logger(Config())
        logger.boundlog = log
        logger.access(GunicornResponse(), GunicornRequest(), server_environ({}), elapsed)
    assert [record.duration for record in capture.records] == [duration]


class _ReferenceMiddleware(AccessLogMiddleware):
    """A subclass keeps the pure-Python request path, whichever core is in use."""


def _two_chunks(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    # No Content-Length: wsgiref sends what it takes and closes the connection.
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello ", b"world"]


def _two_generated(environ: dict[str, Any], start_response: StartResponse) -> Iterator[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    yield b"hello "
    yield b"world"


@pytest.mark.parametrize("middleware_class", [AccessLogMiddleware, _ReferenceMiddleware])
@pytest.mark.parametrize("app", [_two_chunks, _two_generated], ids=["list", "generator"])
@pytest.mark.parametrize(
    ("server", "bytes_sent"), [("never-closes", 11), ("drops", 6)], ids=["never-closes", "drops"]
)
def test_a_server_that_never_calls_close_still_logs_every_request(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    middleware_class: type[AccessLogMiddleware],
    app: Any,
    server: str,
    bytes_sent: int,
) -> None:
    """PEP 3333 makes the server call close(); some never do.  A body the server took
    whole is logged when it asked past its end; one it dropped after its first chunk is
    logged when the response is garbage-collected.  No request is lost uncounted."""
    import wsgiref.simple_server

    class NeverCloses(wsgiref.simple_server.ServerHandler):
        def close(self) -> None:
            # BaseHandler.close without result.close(): the server forgets the response.
            self.result = self.headers = self.status = self.environ = None  # type: ignore[assignment]
            self.bytes_sent = 0
            self.headers_sent = False

        def finish_response(self) -> None:
            if server == "never-closes":
                super().finish_response()
                return
            # Writes the first chunk and drops the rest, without close().
            for data in self.result:
                self.write(data)
                break
            self.finish_content()
            self.close()

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args: Any) -> None:
            pass

    monkeypatch.setattr(wsgiref.simple_server, "ServerHandler", NeverCloses)
    path = tmp_path / "access.log"
    requests = 20
    with AccessLog(str(path), format="json") as log:
        middleware = middleware_class(app, log=log)
        assert (type(middleware) is _ReferenceMiddleware) == (
            middleware_class is _ReferenceMiddleware
        )
        wsgi_server = make_server("127.0.0.1", 0, middleware, handler_class=Quiet)
        thread = threading.Thread(target=wsgi_server.serve_forever)
        thread.start()
        try:
            for _ in range(requests):
                connection = http.client.HTTPConnection(
                    "127.0.0.1", wsgi_server.server_port, timeout=10
                )
                connection.request("GET", "/hi")
                body = connection.getresponse().read()
                connection.close()
                assert body == (b"hello world" if server == "never-closes" else b"hello ")
        finally:
            wsgi_server.shutdown()
            thread.join()
            wsgi_server.server_close()
        # A dropped generator body is in a cycle (its frame holds start_response, the
        # response's): the collector frees it, and its finalizer logs it.
        gc.collect()
        assert log.flush(timeout=10)
        stats = log.stats()
    written = lines(path)
    assert len(written) == requests, stats
    assert stats.submitted == stats.written == requests
    # Taken whole: every byte; dropped: the first chunk (the JSON line says whether the
    # response completed, so a list too is counted as the server takes it).
    assert {line["bytes_sent"] for line in written} == {bytes_sent}
    assert {line["completed"] for line in written} == {server == "never-closes"}
    assert {line["status"] for line in written} == {200}


def test_close_after_the_end_of_the_body_logs_once(tmp_path: Path) -> None:
    """The record goes when the server asks past the last chunk; close() then closes the
    body (the application's close() runs) and does not log again."""
    closed = threading.Event()

    class Body:
        def __iter__(self) -> Iterator[bytes]:
            yield b"abc"

        def close(self) -> None:
            closed.set()

    def app(environ: dict[str, Any], start_response: StartResponse) -> Any:
        start_response("200 OK", [])
        return Body()

    for middleware_class in (AccessLogMiddleware, _ReferenceMiddleware):
        capture = CapturingFormat(None)
        with AccessLog(str(tmp_path / "access.log"), format=capture) as log:
            response = middleware_class(app, log=log)(environ(), lambda *args: None)
            assert list(response) == [b"abc"]
            assert log.flush(timeout=10)
            [record] = capture.records
            assert record.bytes_sent == 3
            response.close()  # type: ignore[attr-defined]
            assert closed.is_set()
            assert log.flush(timeout=10)
            assert len(capture.records) == 1
            assert log.stats().submitted == 1
        closed.clear()


def test_a_dropped_response_finalized_while_its_thread_holds_the_queues_locks(
    tmp_path: Path,
) -> None:
    """The collector runs a finalizer on whatever thread allocates, even one that holds
    the queue's locks, which are not reentrant: handing the record over takes none.  The
    first record is queued, the second refused (``max_queue=1``), and both counted."""
    for middleware_class in (AccessLogMiddleware, _ReferenceMiddleware):
        capture = CapturingFormat(None)
        with AccessLog(str(tmp_path / "access.log"), format=capture, max_queue=1) as log:
            middleware = middleware_class(hello, log=log)
            responses = [middleware(environ(), lambda *args: None) for _ in range(2)]
            admission = log._admission
            with admission._lock, admission._count_lock:
                responses.clear()  # both finalized here, on this thread
            assert log.flush(timeout=10)
            stats = log.stats()
        assert (stats.submitted, stats.written, stats.dropped) == (2, 1, 1), middleware_class
        assert len(capture.records) == 1
