"""The WSGI middleware, checked by wsgiref's validator and by a real wsgiref server."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server
from wsgiref.util import setup_testing_defaults
from wsgiref.validate import validator

import pytest

from _records import CapturingFormat
from boundlog import AccessLog
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
