"""``completed`` and ``bytes_received`` in a record's extras, in process: what each
middleware learns, on which request path, and that a log reading neither keeps the C
path with nothing wrapped; http.server's mixin under a real ThreadingHTTPServer
(tests/e2e/test_e2e_completed.py runs the middlewares under real servers)."""

from __future__ import annotations

import asyncio
import http.client
import inspect
import io
import socket
import threading
from collections.abc import Iterator
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from _helpers import wait_until
from _servers import LOOPBACK
from apps.exchange_fields import CHUNK
from boundlog import AccessLog, Extras, Record, _core
from boundlog.asgi import AccessLogMiddleware
from boundlog.capture._counting import CountingReader
from boundlog.http_server import AccessLogMixin
from boundlog.wsgi import AccessLogMiddleware as WsgiMiddleware
from test_e2e_completed import abandon
from test_extras import MIDDLEWARES, WSGI_MIDDLEWARES, Capture, finishing, http_scope, send

BOTH = frozenset({"completed", "bytes_received"})
RECEIVED = frozenset({"bytes_received"})
BODY = (b"first line\n", b"second\n", b"", b"rest")


def logged(fmt: Capture) -> AccessLog:
    return AccessLog(sink="/dev/null", format=fmt, report_loss=False)  # type: ignore[arg-type]


def body_messages() -> Any:
    """A server's receive: the request body in ``BODY``'s messages, then a disconnect."""
    messages = [
        {"type": "http.request", "body": chunk, "more_body": more}
        for chunk, more in zip(BODY, (True, True, True, False), strict=True)
    ]
    messages.append({"type": "http.disconnect"})
    pending = iter(messages)

    async def receive() -> dict[str, Any]:
        return next(pending)

    return receive


def asgi_exchange(middleware: Any, app: Any, reads: frozenset[str]) -> Record:
    fmt = Capture(reads)
    log = logged(fmt)
    try:
        asyncio.run(middleware(app, log=log)(http_scope(), body_messages(), send))
    finally:
        log.close()
    [record] = fmt.records
    return record


async def reading_the_body(scope: Any, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body", False):
        pass
    await finishing(scope, receive, send)


async def reading_one_message(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"part", "more_body": True})


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize(
    ("app", "extras"),
    [
        (reading_the_body, Extras(completed=True, bytes_received=sum(map(len, BODY)))),
        # It returned without finishing, having read the first message only.
        (reading_one_message, Extras(completed=False, bytes_received=len(BODY[0]))),
    ],
)
def test_the_asgi_middleware_counts_the_body_bytes_the_application_received(
    middleware: Any, app: Any, extras: Extras
) -> None:
    assert asgi_exchange(middleware, app, BOTH).extras == extras


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_bytes_received_alone_are_learnt_alone(middleware: Any) -> None:
    record = asgi_exchange(middleware, reading_the_body, RECEIVED)
    assert record.extras == Extras(bytes_received=sum(map(len, BODY)))


def call_of(reads: frozenset[str]) -> tuple[object, list[Any]]:
    """What calling ``AccessLogMiddleware`` (the default class) returns for an HTTP
    request, and the receive its application was given."""
    given: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        given.append(receive)
        await finishing(scope, receive, send)

    log = logged(Capture(reads))
    server_receive = body_messages()
    try:
        call = AccessLogMiddleware(app, log=log)(http_scope(), server_receive, send)

        async def run() -> None:
            await call  # type: ignore[misc]

        asyncio.run(run())
    finally:
        log.close()
    assert len(given) == 1
    return call, [given[0], server_receive]


@pytest.mark.skipif(_core.asgi_middleware is None, reason="no C core")
def test_an_asgi_log_reading_no_bytes_received_keeps_the_c_path_and_the_servers_receive() -> None:
    call, (given, server_receive) = call_of(frozenset({"completed", "route", "trace"}))
    # The C path's exchange is an awaitable of its own, not the reference's coroutine.
    assert not inspect.iscoroutine(call)
    assert given is server_receive


@pytest.mark.skipif(_core.asgi_middleware is None, reason="no C core")
def test_an_asgi_log_reading_bytes_received_keeps_the_c_path_and_wraps_receive() -> None:
    call, (given, server_receive) = call_of(RECEIVED)
    assert not inspect.iscoroutine(call)
    assert given is not server_receive


class Stream(io.BytesIO):
    """A server's wsgi.input, with an attribute of its own besides the stream's."""

    server_attribute = "kept"


def test_the_counting_reader_counts_each_way_of_reading_and_forwards_the_rest() -> None:
    """wsgi.input's and http.server's rfile's reader (_counting): PEP 3333's reads, and
    the buffered reader's read1 and readinto."""
    stream = Stream(b"".join(BODY))
    reader = CountingReader(stream)
    buffer = bytearray(3)
    assert reader.read1(2) == b"fi"
    assert (reader.readinto(buffer), buffer) == (3, bytearray(b"rst"))
    assert reader.readline() == b" line\n"
    assert reader.readlines(1) == [b"second\n"]
    assert list(reader) == [b"rest"]
    assert reader.read() == b""
    assert reader.bytes_read == sum(map(len, BODY))
    assert reader.server_attribute == "kept"
    reader.close()
    assert stream.closed


def wsgi_exchange(
    middleware: Any, app: Any, reads: frozenset[str], taken: int | None = None
) -> Record:
    """The record of one request through ``middleware(app)``, whose server takes
    ``taken`` chunks of the body (all and the end for None) and closes it."""
    fmt = Capture(reads)
    log = logged(fmt)
    environ = {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/upload", "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": Stream(b"".join(BODY)),
    }  # fmt: skip
    try:
        body = middleware(app, log=log)(environ, lambda status, headers, exc_info=None: None)
        chunks = iter(body)
        if taken is None:
            list(chunks)
        else:
            for _ in range(taken):
                next(chunks)
        body.close()
    finally:
        log.close()
    [record] = fmt.records
    return record


def answering(*chunks: bytes, read: Any = None) -> Any:
    """A WSGI application that calls ``read(wsgi.input)`` (unless None) and answers
    ``chunks`` as a list."""

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if read is not None:
            read(environ["wsgi.input"])
        start_response("200 OK", [])
        return list(chunks)

    return app


def streaming(*chunks: bytes) -> Any:
    """A WSGI application that answers ``chunks`` from a generator."""

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [])
        yield from chunks

    return app


def read_every_way(stream: Any) -> None:
    assert stream.server_attribute == "kept"
    assert stream.readline() == BODY[0]
    assert stream.readline(3) == b"sec"
    assert stream.readlines() == [b"ond\n", b"rest"]


def read_by_iteration(stream: Any) -> None:
    assert list(stream) == [BODY[0], BODY[1], BODY[3]]


def read_some(stream: Any) -> None:
    assert stream.read(5) == b"first"
    assert stream.read(0) == b""


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
@pytest.mark.parametrize(
    ("read", "received"),
    [
        (read_every_way, sum(map(len, BODY))),
        (read_by_iteration, sum(map(len, BODY))),
        (read_some, 5),
        (lambda stream: stream.read(), sum(map(len, BODY))),
        (None, 0),
    ],
)
def test_the_wsgi_middleware_counts_what_the_application_read_of_wsgi_input(
    middleware: Any, read: Any, received: int
) -> None:
    record = wsgi_exchange(middleware, answering(b"ok", read=read), BOTH)
    assert record.extras == Extras(completed=True, bytes_received=received)


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
@pytest.mark.parametrize("app", [answering(b"a", b"bb", b"ccc"), streaming(b"a", b"bb", b"ccc")])
@pytest.mark.parametrize(
    ("taken", "completed", "sent"), [(None, True, 6), (3, False, 6), (1, False, 1), (0, False, 0)]
)
def test_a_wsgi_response_completes_when_the_server_asks_past_its_last_chunk(
    middleware: Any, app: Any, taken: int | None, completed: bool, sent: int
) -> None:
    """A server that stops taking chunks early (its client went away) closes the body
    before the end: taking the last chunk is not enough, it has to ask for the next."""
    record = wsgi_exchange(middleware, app, frozenset({"completed"}), taken)
    assert record.extras == Extras(completed=completed)
    assert record.bytes_sent == sent


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
def test_a_log_counting_bytes_received_counts_a_list_body_as_the_server_takes_it(
    middleware: Any,
) -> None:
    """As for ``completed``: both request paths take a list chunk by chunk."""
    record = wsgi_exchange(middleware, answering(b"a", b"bb", b"ccc"), RECEIVED, taken=1)
    assert (record.bytes_sent, record.extras) == (1, Extras(bytes_received=0))


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
def test_a_wsgi_application_that_raises_mid_body_is_logged_incomplete(middleware: Any) -> None:
    fmt = Capture(BOTH)
    log = logged(fmt)

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [])
        yield b"part"
        raise RuntimeError("the test application fails mid-body, on purpose")

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "wsgi.input": Stream(b"")}
    try:
        body = middleware(app, log=log)(environ, lambda status, headers, exc_info=None: None)
        with pytest.raises(RuntimeError, match="on purpose"):
            list(body)
        body.close()
    finally:
        log.close()
    [record] = fmt.records
    assert record.extras == Extras(completed=False, bytes_received=0)
    assert record.bytes_sent == 4


def wsgi_call(reads: frozenset[str]) -> tuple[object, Any, Any]:
    """What calling ``WsgiMiddleware`` (the default class) returns, the wsgi.input its
    application was given and the server's."""
    given: list[Any] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        given.append(environ["wsgi.input"])
        start_response("200 OK", [])
        return [b"ok"]

    log = logged(Capture(reads))
    server_input = Stream(b"")
    try:
        body = WsgiMiddleware(app, log=log)(
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "wsgi.input": server_input},
            lambda status, headers, exc_info=None: None,
        )
        list(body)  # type: ignore[call-overload]
        body.close()  # type: ignore[attr-defined]
    finally:
        log.close()
    return body, given[0], server_input


@pytest.mark.skipif(_core.wsgi_middleware is None, reason="no C core")
def test_a_wsgi_log_reading_no_bytes_received_keeps_the_c_path_and_the_servers_input() -> None:
    from boundlog.wsgi import _Exchange

    body, given, server_input = wsgi_call(frozenset({"route", "trace", "completed"}))
    assert not isinstance(body, _Exchange)
    assert given is server_input


@pytest.mark.skipif(_core.wsgi_middleware is None, reason="no C core")
def test_a_wsgi_log_reading_bytes_received_keeps_the_c_path_and_wraps_wsgi_input() -> None:
    from boundlog.wsgi import _Exchange

    body, given, server_input = wsgi_call(RECEIVED)
    assert not isinstance(body, _Exchange)
    assert given is not server_input
    assert given.server_attribute == "kept"


class HttpServerHandler(AccessLogMixin, BaseHTTPRequestHandler):
    """/stream answers ``CHUNK`` twice; /abandoned, as exchange_wsgi's does, sends a
    chunk, waits for the client to go away and writes on until that fails; a POST reads
    its body and answers with its length."""

    protocol_version = "HTTP/1.1"
    access_log: ClassVar[AccessLog | None] = None

    def do_POST(self) -> None:
        length = len(self.rfile.read(int(self.headers["Content-Length"])))
        self.answer(str(length).encode())

    def do_GET(self) -> None:
        if self.path == "/stream":
            self.answer(CHUNK, CHUNK)
            return
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(CHUNK)
        with suppress(OSError):
            self.connection.recv(1, socket.MSG_PEEK)
        while True:
            self.wfile.write(CHUNK)

    def answer(self, *chunks: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(sum(map(len, chunks))))
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # The abandoned response's failed write, which the test expects.
        pass


def test_http_server_learns_completion_and_the_body_bytes_the_handler_read() -> None:
    fmt = Capture(BOTH)
    HttpServerHandler.access_log = logged(fmt)
    with QuietServer((LOOPBACK, 0), HttpServerHandler) as server:
        serving = threading.Thread(target=server.serve_forever)
        serving.start()
        try:
            connection = http.client.HTTPConnection(LOOPBACK, server.server_port)
            # Two requests on one connection: each counts its own body, no header field.
            for body in (b"a" * 3000, b"b" * 5):
                connection.request("POST", "/upload", body=body)
                assert connection.getresponse().read() == str(len(body)).encode()
            connection.request("GET", "/stream")
            assert connection.getresponse().read() == CHUNK * 2
            connection.close()
            abandon(server.server_port)
            wait_until(lambda: HttpServerHandler.access_log.stats().submitted == 4)  # type: ignore[union-attr]
        finally:
            server.shutdown()
            serving.join()
            HttpServerHandler.access_log.close()
    uploads, streamed, abandoned = fmt.records[:2], fmt.records[2], fmt.records[3]
    assert [record.extras for record in uploads] == [
        Extras(completed=True, bytes_received=3000), Extras(completed=True, bytes_received=5)
    ]  # fmt: skip
    assert streamed.extras == Extras(completed=True, bytes_received=0)
    assert (abandoned.path, abandoned.status) == (b"/abandoned", 200)
    assert abandoned.extras == Extras(completed=False, bytes_received=0)
    assert abandoned.bytes_sent >= len(CHUNK)


def test_http_server_reads_nothing_for_a_log_reading_neither() -> None:
    fmt = Capture(frozenset({"route"}))
    HttpServerHandler.access_log = logged(fmt)
    with QuietServer((LOOPBACK, 0), HttpServerHandler) as server:
        serving = threading.Thread(target=server.serve_forever)
        serving.start()
        try:
            connection = http.client.HTTPConnection(LOOPBACK, server.server_port)
            connection.request("POST", "/upload", body=b"abc")
            assert connection.getresponse().read() == b"3"
            connection.close()
            wait_until(lambda: HttpServerHandler.access_log.stats().submitted == 1)  # type: ignore[union-attr]
        finally:
            server.shutdown()
            serving.join()
            HttpServerHandler.access_log.close()
    [record] = fmt.records
    assert record.extras is None


def test_http_server_counts_no_body_for_a_refused_request() -> None:
    fmt = Capture(BOTH)
    HttpServerHandler.access_log = logged(fmt)
    with QuietServer((LOOPBACK, 0), HttpServerHandler) as server:
        serving = threading.Thread(target=server.serve_forever)
        serving.start()
        try:
            with socket.create_connection((LOOPBACK, server.server_port)) as connection:
                connection.sendall(b"GET / HTTP/9.9\r\nContent-Length: 3\r\n\r\nabc")
                # An error page, and the server closes the connection.
                while connection.recv(65536):
                    pass
            wait_until(lambda: HttpServerHandler.access_log.stats().submitted == 1)  # type: ignore[union-attr]
        finally:
            server.shutdown()
            serving.join()
            HttpServerHandler.access_log.close()
    [record] = fmt.records
    assert (record.status, record.extras) == (505, Extras(completed=True, bytes_received=0))
