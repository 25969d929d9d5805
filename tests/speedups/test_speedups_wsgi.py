"""The WSGI middleware's C request path against its pure-Python reference.

``AccessLogMiddleware(...)`` with the C core in use is a ``_CompiledAccessLogMiddleware``:
calling it runs the C type's call (csrc/paths/wsgi_*.c); ``AccessLogMiddleware.__call__`` is
the reference.  For arbitrary applications (start_response with any status line, by
position or keyword, with exc_info, write(), raises before and after starting, bodies
of every kind: lists, tuples, generators that raise, iterables with a close() that
raises, no iterable at all), environs and servers (that iterate all, part or none of
the body, and close it never, once or twice), both must show the server the same
calls, chunks and exceptions, and hand the log the same records with the same counts.
"""

from __future__ import annotations

import functools
import io
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import make_record
from boundlog import AccessLog, Extras, Record, _core, add_fields
from boundlog.capture import _request_id
from boundlog.wsgi import AccessLogMiddleware

# How long a test waits for the writer to write what it was given: a bound for a writer
# that hangs, not a timing.  A free-threaded CPython on a loaded machine (CI's parallel
# workers) has taken more than 30 s for a few thousand records of these tests.
WRITER_WAIT = 300

pytestmark = pytest.mark.skipif(
    _core.wsgi_middleware is None, reason=f"the C core is not in use ({_core.description})"
)


class AppError(Exception):
    """What a scripted application raises."""


class CloseError(Exception):
    """What a scripted body's close() raises."""


class Text(str):
    """A str subclass: the C path asks wsgi.py for its status code."""


class Environ(dict[str, Any]):
    """A dict subclass: environ.c leaves it to Python."""


class Collecting:
    """A format that keeps the records it is given, and writes nothing; it reads every
    extra, or every one but ``bytes_received`` (the C path then wraps no wsgi.input)."""

    def __init__(
        self, reads_headers: bool, reads_notes: bool = True, reads_received: bool = True
    ) -> None:
        self.records: list[Record] = []
        self.reads_notes = reads_notes
        self.reads_extras = frozenset(Extras._fields) - (
            frozenset() if reads_received else {"bytes_received"}
        )
        if reads_headers:
            self.request_header_names = frozenset({b"user-agent", b"referer"})
            self.response_header_names = frozenset({b"content-type"})

    def format_batch(self, records: Sequence[Record]) -> bytes:
        self.records.extend(records)
        return b""


STATUS = st.sampled_from(
    ["200 OK", "404 Not Found", "299 Custom", "abc", "", b"201 Created", Text("204 No Content"), 7]
)
HEADERS = st.sampled_from([[("Content-Type", "text/plain")], [], ()])
CHUNK = st.one_of(st.binary(max_size=6), st.just(bytearray(b"xyz")), st.just(7))
CHUNKS = st.lists(CHUNK, max_size=4)
BODY = st.one_of(
    st.tuples(st.just("list"), CHUNKS),
    st.tuples(st.just("tuple"), CHUNKS),
    st.tuples(st.just("generator"), CHUNKS, st.integers(0, 4) | st.none()),
    st.tuples(st.just("closing"), CHUNKS, st.booleans()),
    st.tuples(st.just("none")),
    st.tuples(st.just("close property raises"), CHUNKS),
)
ACTION = st.one_of(
    st.tuples(st.just("start"), STATUS, HEADERS, st.booleans(), st.booleans()),
    st.tuples(st.just("write"), CHUNK),
    # Reading wsgi.input each way PEP 3333 gives, all of it or some (a size, a hint).
    st.tuples(
        st.just("read"),
        st.sampled_from(["read", "readline", "readlines", "iterate"]),
        st.none() | st.integers(0, 8),
    ),
    st.tuples(st.just("raise")),
    # boundlog.add_fields from the application.
    st.tuples(
        st.just("note"),
        st.sampled_from(["user", "status"]),
        st.one_of(
            st.none(),
            st.integers(),
            st.text(max_size=3),
            st.just([1]),
            # Over the record's budget (max_record_bytes=4096 below): both cores cut it.
            st.integers(3_000, 6_000).map(lambda size: "v" * size),
        ),
    ),
)
SCRIPT = st.tuples(st.lists(ACTION, max_size=4), BODY)
ENVIRON = st.fixed_dictionaries(
    {
        "REQUEST_METHOD": st.sampled_from(["GET", "POST", ""]),
        "PATH_INFO": st.sampled_from(["/p", "/\xe9", "/\u20ac"]),
        "QUERY_STRING": st.sampled_from(["", "a=1"]),
        "REMOTE_ADDR": st.sampled_from(["10.0.0.1", ""]),
        "SERVER_PROTOCOL": st.sampled_from(["HTTP/1.1", "HTTP/1.0"]),
        "HTTP_USER_AGENT": st.sampled_from(["curl", "u" * 5000, None]),
    },
    optional={"RAW_URI": st.sampled_from(["/raw?x=1", "/r"]), "HTTP_REFERER": st.just("ref")},
)
# The request body in wsgi.input, in lines and pieces; None: an environ without one.
REQUEST = st.none() | st.lists(st.sampled_from([b"line\n", b"\n", b"ab", b"x" * 10])).map(b"".join)
# The server: how much of the body it takes (None: all), and how often it closes it.
SERVER = st.tuples(st.none() | st.integers(0, 3), st.integers(0, 2))


class ClosingBody:
    def __init__(self, chunks: list[Any], raises: bool, seen: list[Any]) -> None:
        self.chunks, self.raises, self.seen = chunks, raises, seen

    def __iter__(self) -> Iterator[Any]:
        return iter(self.chunks)

    def close(self) -> None:
        self.seen.append("body closed")
        if self.raises:
            raise CloseError("scripted")


class CloseRaises:
    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[Any]:
        return iter(self.chunks)

    @property
    def close(self) -> Any:
        raise ValueError("no close for you")


def _body(kind: tuple[Any, ...], seen: list[Any]) -> Any:
    if kind[0] == "list":
        return list(kind[1])
    if kind[0] == "tuple":
        return tuple(kind[1])
    if kind[0] == "generator":
        chunks, raise_at = kind[1], kind[2]

        def generate() -> Iterator[Any]:
            for index, chunk in enumerate(chunks):
                if index == raise_at:
                    raise AppError("in the body")
                yield chunk

        return generate()
    if kind[0] == "closing":
        return ClosingBody(list(kind[1]), kind[2], seen)
    if kind[0] == "close property raises":
        return CloseRaises(list(kind[1]))
    return None


def _read(stream: Any, way: str, size: int | None) -> Any:
    if way == "iterate":
        return list(stream)
    method = getattr(stream, way)
    return method() if size is None else method(size)


def _application(script: tuple[list[tuple[Any, ...]], tuple[Any, ...]], seen: list[Any]) -> Any:
    actions, body = script

    def app(environ: Any, start_response: Any) -> Any:
        write = None
        for action in actions:
            if action[0] == "start":
                _, status, headers, with_exc_info, by_keyword = action
                exc_info = None
                if with_exc_info:
                    try:
                        raise AppError("reported with exc_info")
                    except AppError:
                        exc_info = sys.exc_info()
                if by_keyword:
                    write = start_response(headers=headers, status=status, exc_info=exc_info)
                elif exc_info is None:
                    write = start_response(status, headers)
                else:
                    write = start_response(status, headers, exc_info)
                # Its traceback holds this frame, which holds it: a cycle that would
                # keep the response (and its record) alive until the collector runs.
                exc_info = None
            elif action[0] == "write" and write is not None:
                seen.append(("write returned", write(action[1])))
            elif action[0] == "read" and "wsgi.input" in environ:
                seen.append(("read", _read(environ["wsgi.input"], action[1], action[2])))
            elif action[0] == "raise":
                raise AppError("scripted")
            elif action[0] == "note":
                add_fields(**{action[1]: action[2]})
        return _body(body, seen)

    return app


def _serve(
    middleware: Any, call: Any, environ: Any, server: tuple[Any, int], seen: list[Any]
) -> None:
    """What a WSGI server does with the application, step by step, into ``seen``."""

    def start_response(status: Any, headers: Any, exc_info: Any = None) -> Any:
        seen.append(("start_response", status, headers, exc_info is not None))

        def write(data: Any) -> str:
            seen.append(("server write", data))
            return "written"

        return write

    try:
        result = call(environ, start_response)
    except Exception as error:
        seen.append(("app raised", type(error), str(error), type(error.__context__)))
        return
    taken, closes = server
    iterator = None
    try:
        iterator = iter(result)
        while taken is None or taken > 0:
            try:
                seen.append(("chunk", next(iterator)))
            except StopIteration:
                seen.append("end")
                break
            taken = None if taken is None else taken - 1
    except Exception as error:
        seen.append(("body raised", type(error), str(error)))
        # A body that raised has ended, as a generator that raised has.
        if iterator is not None:
            seen.append(("after it raised", next(iterator, "ended")))
    for _ in range(closes):
        try:
            result.close()
            seen.append("closed")
        except Exception as error:
            seen.append(("close raised", type(error), str(error), type(error.__context__)))


def _note_unraisable(seen: list[Any], raised: Any) -> None:
    seen.append(("unraisable", raised.exc_type))


def _comparable(record: Record) -> tuple[Any, ...]:
    # Times differ between two runs; everything else must not.  A whole environ holds
    # each run's own wsgi.input: of that, its type.
    assert record.duration >= 0
    environ = dict(record[9]) if record[9] else record[9]
    if environ and "wsgi.input" in environ:
        environ["wsgi.input"] = type(environ["wsgi.input"])
    return (*record[2:9], environ, list(record[10]), record[11], record[12])


@pytest.fixture(scope="module")
def logs() -> Iterator[dict[tuple[str, bool, bool, bool], tuple[AccessLog, Collecting]]]:
    made = {}
    for path in ("python", "c"):
        for reads_headers in (True, False):
            for reads_notes in (True, False):
                for reads_received in (True, False):
                    fmt = Collecting(reads_headers, reads_notes, reads_received)
                    log = AccessLog("/dev/null", fmt, flush_interval=0, max_record_bytes=4096)
                    made[path, reads_headers, reads_notes, reads_received] = log, fmt
    yield made
    for log, _ in made.values():
        log.close()


def _middleware(log: AccessLog, request_id: str | None = None) -> Any:
    middleware = AccessLogMiddleware(
        lambda environ, start_response: [], log=log, request_id=request_id
    )
    assert type(middleware).__name__ == "_CompiledAccessLogMiddleware"
    return middleware


@settings(max_examples=examples(600), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    script=SCRIPT,
    environ=ENVIRON,
    subclass=st.booleans(),
    server=SERVER,
    reads_headers=st.booleans(),
    reads_notes=st.booleans(),
    reads_received=st.booleans(),
    request_id=st.sampled_from([None, "X-Request-ID", "User-Agent"]),
    request=REQUEST,
)
def test_c_and_python_serve_alike_and_log_the_same_records(
    logs: dict[tuple[str, bool, bool, bool], tuple[AccessLog, Collecting]],
    script: tuple[list[tuple[Any, ...]], tuple[Any, ...]],
    environ: dict[str, Any],
    subclass: bool,
    server: tuple[Any, int],
    reads_headers: bool,
    reads_notes: bool,
    reads_received: bool,
    request_id: str | None,
    request: bytes | None,
) -> None:
    results = []
    for path in ("python", "c"):
        log, fmt = logs[path, reads_headers, reads_notes, reads_received]
        middleware = _middleware(log, request_id)
        seen: list[Any] = []
        middleware.app = _application(script, seen)
        # The reference: the class's own __call__, on the same instance.
        call = (
            functools.partial(AccessLogMiddleware.__call__, middleware)
            if path == "python"
            else middleware
        )
        before = log.stats()
        given_environ = Environ(environ) if subclass else dict(environ)
        if request is not None:
            given_environ["wsgi.input"] = io.BytesIO(request)
        # One id for both paths, so that their environs, responses and records compare.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_request_id, "new_request_id", lambda: "0" * 32)
            # A response the server neither exhausts nor closes is logged by its
            # finalizer, as _serve returns; what that cannot log is reported there.
            patch.setattr(sys, "unraisablehook", functools.partial(_note_unraisable, seen))
            _serve(middleware, call, given_environ, server, seen)
        assert log.flush(timeout=10)
        after = log.stats()
        records = [_comparable(record) for record in fmt.records]
        fmt.records.clear()
        counts = (after.submitted - before.submitted, after.dropped - before.dropped)
        results.append((seen, records, counts))
    assert results[0] == results[1]


def test_requests_take_the_c_path() -> None:
    log = AccessLog("/dev/null", Collecting(True), flush_interval=0)
    try:
        middleware = _middleware(log)
        seen: list[Any] = []
        middleware.app = _application(
            ([("start", "200 OK", [], False, False)], ("list", [b"ab"])), seen
        )
        _serve(middleware, middleware, {"REQUEST_METHOD": "GET"}, (None, 1), seen)
        assert seen == [("start_response", "200 OK", [], False), ("chunk", b"ab"), "end", "closed"]
        response = middleware({"REQUEST_METHOD": "GET"}, lambda status, headers: None)
        assert type(response).__name__ == "WsgiExchange"
        response.close()
        assert log.flush(timeout=10)
        assert log.stats().submitted == 2
    finally:
        log.close()


@pytest.mark.parametrize("policy", ["drop", "wait"])
def test_a_full_queue_goes_to_the_policy(policy: str) -> None:
    """No room at close(): log.submit decides, as the reference's close() lets it."""
    log = AccessLog("/dev/null", Collecting(False), policy=policy, max_queue=1, flush_interval=60)
    middleware = _middleware(log)
    middleware.app = _application(([("start", "200 OK", [], False, False)], ("list", [])), [])
    environ = {"REQUEST_METHOD": "GET"}
    closing = threading.Thread(target=log.close, kwargs={"timeout": 10})
    responses = [middleware(environ, lambda status, headers: None) for _ in range(2)]
    responses[0].close()
    if policy == "drop":
        responses[1].close()
        assert log.stats().dropped == 1
        log.close()
    else:
        # The second waits for room: closing the log takes the first and refuses it.
        waiter = threading.Thread(target=responses[1].close)
        waiter.start()
        closing.start()
        waiter.join(timeout=30)
        closing.join(timeout=30)
        assert not waiter.is_alive()
    stats = log.stats()
    assert stats.submitted == 2
    assert stats.written + stats.dropped == 2


@pytest.mark.parametrize("request_id", [None, "X-Request-ID"])
@pytest.mark.parametrize("reads_received", [False, True])
@pytest.mark.parametrize("server", ["closes", "never-closes", "drops"])
def test_the_c_path_keeps_no_reference_to_what_it_was_given(
    request_id: str | None, reads_received: bool, server: str
) -> None:
    collecting = Collecting(True, reads_received=reads_received)
    log = AccessLog("/dev/null", collecting, flush_interval=0, max_queue=100_000)
    try:
        middleware = _middleware(log, request_id)
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/p", "HTTP_USER_AGENT": "curl"}
        headers = [("Content-Type", "text/plain")]
        chunks = [b"x" * 10]
        stream = io.BytesIO(b"uploaded")

        def app(environ: Any, start_response: Any) -> Any:
            environ["wsgi.input"].read(4)
            start_response("200 OK", headers)("w")
            return iter(chunks) if environ.get("GENERATOR") else chunks

        def start_response(status: Any, headers: Any, exc_info: Any = None) -> Any:
            return len

        middleware.app = app

        def run(times: int) -> None:
            submitted = log.stats().submitted
            for _ in range(times):
                stream.seek(0)
                environ["wsgi.input"] = stream
                response = middleware(environ, start_response)
                if server == "drops":
                    # Neither exhausted nor closed: the finalizer logs it.
                    next(iter(response))
                else:
                    list(response)
                if server == "closes":
                    response.close()
                del response
            assert log.flush(timeout=WRITER_WAIT)
            assert log.stats().submitted == submitted + times
            # The writer holds its last batch until it takes the next: one more record,
            # holding nothing of the above, makes it let go of the others.
            log.submit(make_record())
            assert log.flush(timeout=WRITER_WAIT)
            collecting.records.clear()

        watched = [environ, chunks, app, middleware, headers, stream]
        run(100)
        before = [sys.getrefcount(thing) for thing in watched]
        run(5_000)  # a reference kept per request shows 5,000 times
        environ["GENERATOR"] = "yes"
        run(100)
        del environ["GENERATOR"]
        assert [sys.getrefcount(thing) for thing in watched] == before
    finally:
        log.close()


def test_a_subclass_keeps_the_python_path_and_keywords_take_the_reference() -> None:
    class Subclass(AccessLogMiddleware):
        pass

    log = AccessLog("/dev/null", Collecting(False), flush_interval=0)
    try:
        subclassed = Subclass(lambda environ, start_response: [b"x"], log=log)
        assert _core.wsgi_middleware is not None
        assert not isinstance(subclassed, _core.wsgi_middleware)
        # The exchange of a log that reads completed (see Collecting).
        unused = subclassed(environ={}, start_response=None)
        assert type(unused).__name__ == "_LearningExchange"
        unused.close()
        compiled = _middleware(log)
        # A call by keyword is the reference's (no server makes one).
        response = compiled(environ={}, start_response=lambda status, headers: None)
        assert type(response).__name__ == "_LearningExchange"
        response.close()
        assert log.flush(timeout=10)
        assert log.stats().submitted == 2
    finally:
        log.close()
