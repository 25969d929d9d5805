"""The ASGI middleware's C request path against its pure-Python reference.

``AccessLogMiddleware(...)`` with the C core in use is a ``_CompiledAccessLogMiddleware``:
calling it runs the C type's call (csrc/paths/asgi_*.c), while its ``__call__`` attribute is
the reference ``async def``.  For arbitrary applications (any sequence of messages,
suspensions, raises and early returns), scopes (every shape the C code reads, and those
it hands to the reference), and drivers (a server that cancels or closes the request),
both must give the server the same messages, end the same way, and hand the log the
same records with the same counts.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import itertools
import sys
import threading
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _examples import examples
from _servers import (
    LOOPBACK,
    UVICORN_CLEAN_EXITS,
    read_log_lines,
    running_server,
    server_environment,
    stop_gracefully,
    uvicorn_app_command,
)
from boundlog import AccessLog, Extras, JsonFormat, Record, _core, add_fields
from boundlog.asgi import AccessLogMiddleware
from boundlog.capture import _request_id
from boundlog.engine import _log as engine_log

# How long a test waits for the writer to write what it was given: a bound for a writer
# that hangs, not a timing.  A free-threaded CPython on a loaded machine (CI's parallel
# workers) has taken more than 30 s for a few thousand records of these tests.
WRITER_WAIT = 300

pytestmark = pytest.mark.skipif(
    _core.asgi_middleware is None, reason=f"the C core is not in use ({_core.description})"
)

EXISTING_FILE = Path(__file__)
# Pathsend to these: one there, one not, and one whose path os.stat refuses.
PATHS = st.sampled_from([str(EXISTING_FILE), "/nonexistent/boundlog", "nul\x00byte"])


class AppError(Exception):
    """What a scripted application raises."""


class Suspend:
    """An awaitable that suspends its coroutine once, yielding itself to the driver."""

    def __await__(self) -> Iterator[Suspend]:
        yield self


class Collecting:
    """A format that keeps the records it is given, and writes nothing; it reads every
    extra, or every one but ``bytes_received`` (the C path then wraps no receive)."""

    def __init__(
        self, reads_headers: bool, reads_notes: bool = True, reads_received: bool = True
    ) -> None:
        self.records: list[Record] = []
        self.reads_notes = reads_notes
        self.reads_extras = frozenset(Extras._fields) - (
            frozenset() if reads_received else {"bytes_received"}
        )
        if not reads_headers:
            self.request_header_names = frozenset({b"user-agent"})
            self.response_header_names: frozenset[bytes] = frozenset()

    def format_batch(self, records: Sequence[Record]) -> bytes:
        # A log made to pack (see logs()) queues Packed records: compared as Records.
        assert _core.unpacked is not None
        self.records.extend(_core.unpacked(records))
        return b""


HEADER_PAIRS = st.lists(
    st.tuples(st.sampled_from([b"user-agent", b"content-length", b"x"]), st.binary(max_size=8)),
    max_size=3,
)
START = st.fixed_dictionaries(
    {"type": st.just("http.response.start"), "headers": HEADER_PAIRS},
    optional={
        "status": st.sampled_from([200, 204, 304, 404, 500, 0]),
        "trailers": st.booleans(),
    },
)
BODY = st.fixed_dictionaries(
    {"type": st.just("http.response.body")},
    optional={
        "body": st.one_of(st.binary(max_size=20), st.binary(max_size=5).map(bytearray), st.none()),
        "more_body": st.one_of(st.booleans(), st.sampled_from([0, 1])),
    },
)
TRAILERS = st.fixed_dictionaries(
    {"type": st.just("http.response.trailers"), "headers": st.just([])},
    optional={"more_trailers": st.booleans()},
)
PATHSEND = st.fixed_dictionaries({"type": st.just("http.response.pathsend"), "path": PATHS})
OTHER = st.sampled_from([{"type": "http.response.zerocopysend"}, {"no type": 1}])


def _rekeyed(mapping: dict[Any, Any], keys: str) -> dict[Any, Any]:
    """``mapping`` with keys that are not the interned strs servers write: equal new
    ones, or one more key that is no str (the C path then looks each key up)."""
    if keys == "equal, not interned":
        return {"".join(list(key)) if isinstance(key, str) else key: value
                for key, value in mapping.items()}  # fmt: skip
    if keys == "and an int key":
        return {**mapping, 0: "not a str"}
    return mapping


KEYS = st.sampled_from(["interned", "interned", "equal, not interned", "and an int key"])
MESSAGE = st.tuples(st.one_of(START, BODY, BODY, TRAILERS, PATHSEND, OTHER), KEYS).map(
    lambda message_keys: _rekeyed(*message_keys)
)
# What the application does, in order; a message may be given as a mapping proxy.
ACTION = st.one_of(
    st.tuples(st.just("send"), MESSAGE, st.booleans()),
    st.tuples(st.just("suspend")),
    st.tuples(st.just("receive")),
    st.tuples(st.just("raise")),
    st.tuples(st.just("return")),
)
# boundlog.add_fields from the application (after its response too: a log that reads notes
# holds the record until the application ends, so those join it).
NOTE = st.tuples(
    st.just("note"),
    st.sampled_from(["user", "status", "n"]),
    st.one_of(
        st.none(),
        st.integers(),
        st.text(max_size=3),
        st.just([1]),
        # Over the record's budget: both cores cut it alike.
        st.integers(20_000, 40_000).map(lambda size: "v" * size),
    ),
)
# Most of what servers see, which a list of random actions rarely makes: a response
# started, then ended by its last body or by a pathsend of a file that exists (whose
# size a packed record counts), then anything.
COMPLETE = st.tuples(
    st.fixed_dictionaries(
        {
            "type": st.just("http.response.start"),
            "status": st.sampled_from([200, 404]),
            "headers": HEADER_PAIRS,
        }
    ),
    st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("http.response.body"), "body": st.binary(max_size=20)}
        ),
        st.just({"type": "http.response.pathsend", "path": str(EXISTING_FILE)}),
    ),
    st.lists(st.one_of(ACTION, NOTE), max_size=3),
).map(lambda parts: [("send", parts[0], False), ("send", parts[1], False), *parts[2]])
SCRIPT = st.one_of(st.lists(st.one_of(ACTION, NOTE), max_size=8), COMPLETE)


def _scope_of(options: dict[str, Any]) -> dict[str, Any]:
    scope: dict[str, Any] = {"type": "http", "path": "/p\xe9", "method": "GET"}
    for key, value in options.items():
        if value != "absent":
            scope[key] = value
    return scope


SCOPE = st.fixed_dictionaries(
    {
        "http_version": st.sampled_from(["1.1", "2", "1", "1.0", "3", "4", "absent"]),
        "client": st.sampled_from([("10.0.0.1", 5), None, ["10.0.0.2", 6], (), "absent"]),
        "raw_path": st.sampled_from([b"/raw", b"", None, "absent"]),
        "query_string": st.sampled_from([b"a=1", b"", "absent"]),
        "headers": st.one_of(
            HEADER_PAIRS,
            HEADER_PAIRS.map(tuple),
            # Over the record budget (max_record_bytes=4096 below).
            st.just([(b"user-agent", b"u" * 5000), (b"cookie", b"c" * 10)]),
            st.just([("user-agent", "text")]),
            st.just("absent"),
        ),
        "method": st.sampled_from(["GET", "POST", "absent"]),
    }
).map(_scope_of)
SCOPE = st.tuples(SCOPE, KEYS).map(lambda scope_keys: _rekeyed(*scope_keys))
# How the server drives the request: to the end (most often), or throwing CancelledError
# in (or closing it, or dropping it) at its n-th suspension.
DRIVER = st.one_of(
    st.just(("run",)),
    st.just(("run",)),
    st.tuples(st.just("cancel"), st.integers(0, 3)),
    st.tuples(st.just("close"), st.integers(0, 3)),
    st.tuples(st.just("drop"), st.integers(0, 3)),
)


def _application(script: list[tuple[Any, ...]]) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        for action in script:
            if action[0] == "send":
                _, message, proxied = action
                message = dict(message)
                await send(types.MappingProxyType(message) if proxied else message)
            elif action[0] == "suspend":
                await Suspend()
            elif action[0] == "receive":
                await receive()
            elif action[0] == "raise":
                raise AppError("scripted")
            elif action[0] == "note":
                add_fields(**{action[1]: action[2]})
            else:
                return

    return app


def _drive(awaitable: Any, driver: tuple[Any, ...]) -> tuple[Any, ...]:
    """Run ``awaitable`` as a server's task would, by hand: how it ended."""
    iterator = awaitable.__await__()
    suspensions = 0
    value: Any = None
    try:
        while True:
            if driver[0] == "cancel" and suspensions == driver[1] + 1:
                iterator.throw(asyncio.CancelledError())
            elif driver[0] == "close" and suspensions == driver[1] + 1:
                iterator.close()
                return ("closed",)
            elif driver[0] == "drop" and suspensions == driver[1] + 1:
                # A server that forgets a request: its finalizer closes it.
                del awaitable, iterator
                return ("dropped",)
            else:
                iterator.send(value)
            suspensions += 1
    except StopIteration as stop:
        return ("returned", stop.value)
    except BaseException as error:
        return ("raised", type(error), error.args)


# The request body the server receives, message by message: a chunked upload is
# several, with more_body; a message may leave its body out (b"", by the ASGI spec).
REQUEST = st.lists(st.binary(max_size=12) | st.none(), max_size=3)


def _exchange(
    middleware: AccessLogMiddleware,
    call: Any,
    scope: dict[str, Any],
    script: Any,
    driver: Any,
    request: Sequence[bytes | None] = (),
) -> tuple[Any, ...]:
    seen: list[Any] = []
    messages = iter(
        [
            {"type": "http.request", "more_body": index < len(request) - 1}
            | ({} if chunk is None else {"body": chunk})
            for index, chunk in enumerate(request or [b""])
        ]
    )

    async def receive() -> dict[str, Any]:
        # Once the body is received, the server waits for the client to leave.
        return next(messages, {"type": "http.disconnect"})

    async def send(message: Any) -> None:
        seen.append(dict(message))

    middleware.app = _application(script)

    async def on_a_loop() -> tuple[Any, ...]:
        # Driven by hand, but where a loop runs, as the policy "wait" needs.
        return _drive(call(scope, receive, send), driver)

    return asyncio.run(on_a_loop()), seen


def _comparable(record: Record, reads: frozenset[bytes] | None = None) -> tuple[Any, ...]:
    # Times differ between two runs; everything else must not, but for the request
    # header fields a log's lines do not read (``reads``, its request_header_names):
    # a packed record does not keep them (csrc/record/packed.h).
    assert record.duration >= 0
    headers = [
        item
        for item in record[9]
        if reads is None
        or not (type(item) is tuple and len(item) == 2 and type(item[0]) is bytes)
        or item[0].lower() in reads
    ]
    return (*record[2:9], headers, list(record[10]), record[11], record[12])


Logs = dict[tuple[str, bool, bool, bool, bool], tuple[AccessLog, Collecting]]


@pytest.fixture(scope="module")
def logs() -> Iterator[Logs]:
    made = {}
    for path, reads_headers, reads_notes, reads_received, packs in itertools.product(
        ("python", "c"), *[(True, False)] * 4
    ):
        fmt = Collecting(reads_headers, reads_notes, reads_received)
        with pytest.MonkeyPatch.context() as patch:
            # As a log whose writer takes packed records (the combined lines) does: the
            # C hand-off, and the C path's record, pack what has the shape.
            patch.setattr(engine_log, "packs_for", lambda fmt, select, packs=packs: packs)
            log = AccessLog("/dev/null", fmt, flush_interval=0, max_record_bytes=4096)
        made[path, reads_headers, reads_notes, reads_received, packs] = log, fmt
    yield made
    for log, _ in made.values():
        log.close()


def _middleware(log: AccessLog, request_id: str | None = None) -> AccessLogMiddleware:
    async def placeholder(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("replaced by each example's application")

    middleware = AccessLogMiddleware(placeholder, log=log, request_id=request_id)
    assert type(middleware).__name__ == "_CompiledAccessLogMiddleware"
    return middleware


# A dropped exchange whose scope the record cannot be made of reports the error as
# "Exception ignored", in both paths alike.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    script=SCRIPT,
    scope=SCOPE,
    driver=DRIVER,
    reads_headers=st.booleans(),
    reads_notes=st.booleans(),
    reads_received=st.booleans(),
    packs=st.booleans(),
    request_id=st.sampled_from([None, "X-Request-ID", "User-Agent"]),
    request=REQUEST,
)
def test_c_and_python_give_the_same_exchange_records_and_counts(
    logs: Logs,
    script: list[tuple[Any, ...]],
    scope: dict[str, Any],
    driver: tuple[Any, ...],
    reads_headers: bool,
    reads_notes: bool,
    reads_received: bool,
    packs: bool,
    request_id: str | None,
    request: list[bytes | None],
) -> None:
    results = []
    for path in ("python", "c"):
        log, fmt = logs[path, reads_headers, reads_notes, reads_received, packs]
        middleware = _middleware(log, request_id)
        call = middleware.__call__ if path == "python" else middleware
        before = log.stats()
        # One id for both paths, so that their scopes, messages and records compare.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_request_id, "new_request_id", lambda: "0" * 32)
            outcome, seen = _exchange(middleware, call, dict(scope), script, driver, request)
        assert log.flush(timeout=10)
        after = log.stats()
        records = [_comparable(record, log.request_header_names) for record in fmt.records]
        fmt.records.clear()
        counts = (after.submitted - before.submitted, after.dropped - before.dropped)
        results.append((outcome, seen, records, counts))
    assert results[0] == results[1]


@pytest.mark.parametrize("packs", [False, True])
@pytest.mark.parametrize(
    "notes",
    [
        {"user": "ada", "n": 7, "ok": True, "none": None, "ratio": 0.5},
        {"n": -(2**63), "m": 2**63 - 1, "big": 2**64},
        {"huge": 10**5000, "list": [1], "bytes": b"b"},
        {"list": [1], "bytes": b"b", "pair": (1, 2)},
        {"long": "v" * 5000},
        # At the room's edge: the scope below leaves 4096 - 174 bytes, and a note costs
        # 160 and its name's length more than its value's.
        {"long": "v" * 3758},
        {"long": "v" * 3759},
        {"long": "v" * 3000, "short": "s", "n": 2**62},
    ],
)
@pytest.mark.parametrize("after", [False, True])
@pytest.mark.parametrize("reads_headers", [False, True])
def test_added_fields_of_every_kind_join_the_record_alike(
    logs: Logs, notes: dict[str, Any], packs: bool, after: bool, reads_headers: bool
) -> None:
    # The C path copies and measures the usual notes itself (asgi_record.c's
    # budget_notes) and packs them with a packed record (of a log that does not keep
    # response headers, a list here); any other goes to the reference's
    # RecordBudget.notes.  Fields added before the response ends, or after.
    start = ("send", {"type": "http.response.start", "status": 200, "headers": []}, False)
    body = ("send", {"type": "http.response.body", "body": b"x"}, False)
    added = [("note", name, value) for name, value in notes.items()]
    script = [start, body, *added] if after else [*added, start, body]
    scope = {
        "type": "http", "method": "GET", "path": "/", "raw_path": b"/p", "query_string": b"q",
        "headers": [(b"user-agent", b"u")], "http_version": "1.1", "client": ("1.2.3.4", 5),
    }  # fmt: skip
    results = []
    for path in ("python", "c"):
        log, fmt = logs[path, reads_headers, True, False, packs]
        middleware = _middleware(log)
        call = middleware.__call__ if path == "python" else middleware
        outcome = _exchange(middleware, call, dict(scope), script, ("run",))
        assert log.flush(timeout=10)
        results.append(
            (outcome, [_comparable(record, log.request_header_names) for record in fmt.records])
        )
        fmt.records.clear()
    assert results[0] == results[1]
    assert len(results[0][1]) == 1


@pytest.mark.parametrize("length", [3540, 3541])
def test_the_room_of_added_fields_counts_the_header_fields_lines_do_not_read(
    logs: Logs, length: int
) -> None:
    # A packed record keeps the header fields the log reads (here user-agent), but the
    # fields the application adds get what all of the request's fields leave of
    # max_record_bytes, as in the reference: 4096 - 392 here, and the note costs 164
    # more than its value, so that 3540 fits and 3541 is cut.
    scope = {
        "type": "http", "method": "GET", "path": "/", "raw_path": b"/p", "query_string": b"q",
        "headers": [(b"user-agent", b"u"), (b"x-unread", b"z" * 50)], "http_version": "1.1",
        "client": ("1.2.3.4", 5),
    }  # fmt: skip
    script = [
        ("note", "long", "v" * length),
        ("send", {"type": "http.response.start", "status": 200, "headers": []}, False),
        ("send", {"type": "http.response.body", "body": b"x"}, False),
    ]
    results = []
    for path in ("python", "c"):
        log, fmt = logs[path, False, True, False, True]
        middleware = _middleware(log)
        call = middleware.__call__ if path == "python" else middleware
        _exchange(middleware, call, dict(scope), script, ("run",))
        assert log.flush(timeout=10)
        [record] = fmt.records
        fmt.records.clear()
        results.append((_comparable(record, log.request_header_names), record.request_headers))
    assert results[0][0] == results[1][0]
    # The C path's record kept the field its log reads, the reference's all of them.
    assert [name for name, _ in results[1][1]] == [b"user-agent"]
    assert len(results[0][1]) == 2
    notes = results[1][0][-2]
    assert (notes["long"] == "v" * length) == (length == 3540)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(exchanges=st.lists(st.tuples(SCOPE, SCRIPT), min_size=2, max_size=5), packs=st.booleans())
def test_one_middleware_reads_scopes_of_every_making_alike(
    logs: Logs, exchanges: list[tuple[dict[str, Any], list[tuple[Any, ...]]]], packs: bool
) -> None:
    # The C path reads a scope's and a message's items where the previous request's
    # dicts had them (csrc/common/dict_hint.h): one middleware serving scopes whose keys
    # move, go missing or are equal strs that are not the same objects reads each as
    # the reference does.
    results = []
    for path in ("python", "c"):
        log, fmt = logs[path, True, False, False, packs]
        middleware = _middleware(log)
        call = middleware.__call__ if path == "python" else middleware
        outcomes = [
            _exchange(middleware, call, dict(scope), script, ("run",))
            for scope, script in exchanges
        ]
        assert log.flush(timeout=10)
        results.append(
            (outcomes, [_comparable(record, log.request_header_names) for record in fmt.records])
        )
        fmt.records.clear()
    assert results[0] == results[1]


@settings(max_examples=examples(100), deadline=None)
@given(script=SCRIPT, driver=DRIVER, policy=st.sampled_from(["drop", "wait"]))
def test_a_closed_log_refuses_alike(
    script: list[tuple[Any, ...]], driver: tuple[Any, ...], policy: str
) -> None:
    """No room in the queue (here: a closed log) takes the Python side paths from C."""
    results = []
    scope = _scope_of({"http_version": "1.1", "raw_path": b"/", "headers": []})
    for path in ("python", "c"):
        log = AccessLog("/dev/null", policy=policy)
        log.close()
        middleware = _middleware(log)
        call = middleware.__call__ if path == "python" else middleware
        outcome, seen = _exchange(middleware, call, dict(scope), script, driver)
        stats = log.stats()
        results.append((outcome, seen, stats.submitted, stats.dropped))
    assert results[0] == results[1]


def test_servers_see_an_asgi3_application_and_calls_run_the_c_path() -> None:
    log = AccessLog("/dev/null")
    try:
        middleware = _middleware(log)
        # uvicorn, hypercorn and Starlette look at __call__; asyncio tasks at the result.
        assert inspect.iscoroutinefunction(middleware.__call__)
        assert asyncio.iscoroutinefunction(middleware.__call__)
        exchange = middleware({"type": "http"}, None, None)
        assert type(exchange).__module__ == "boundlog._speedups"
        assert asyncio.iscoroutine(exchange)
        exchange.close()
        # Other scopes go to the reference.
        lifespan = middleware({"type": "lifespan"}, None, None)
        assert inspect.iscoroutine(lifespan)
        lifespan.close()
    finally:
        log.close()


def test_a_subclass_keeps_the_python_path() -> None:
    class Mine(AccessLogMiddleware):
        pass

    log = AccessLog("/dev/null")
    try:
        middleware = Mine(_application([]), log=log)
        coroutine = middleware({"type": "http"}, None, None)
        assert inspect.iscoroutine(coroutine)
        coroutine.close()
    finally:
        log.close()


def test_an_exchange_runs_on_a_real_event_loop_and_is_not_reused() -> None:
    fmt = Collecting(True)
    log = AccessLog("/dev/null", fmt, flush_interval=0)
    try:
        middleware = _middleware(log)
        middleware.app = _application(
            [("send", {"type": "http.response.start", "status": 201}, False),
             ("send", {"type": "http.response.body", "body": b"abc"}, False)]
        )  # fmt: skip
        scope = _scope_of({"http_version": "1.1", "raw_path": b"/", "headers": []})

        async def send(message: Any) -> None:
            await asyncio.sleep(0)  # a real suspension, through the exchange

        async def main() -> None:
            exchange = middleware(scope, None, send)
            await asyncio.create_task(exchange)
            with pytest.raises(RuntimeError, match="cannot reuse"):
                await exchange

        asyncio.run(main())
        assert log.flush(timeout=10)
        [record] = fmt.records
        assert (record.status, record.bytes_sent, record.path) == (201, 3, b"/")
    finally:
        log.close()


def test_threads_sharing_a_middleware_lose_nothing() -> None:
    """Without the GIL (3.13t) the C path is driven from many threads at once: each
    request's objects are its own, the middleware's are read-only, the queue is shared."""
    fmt = Collecting(True)
    log = AccessLog("/dev/null", fmt, flush_interval=0, max_queue=100_000)
    threads, each = 8, 300
    try:
        middleware = _middleware(log)
        middleware.app = _application(
            [("send", {"type": "http.response.start", "status": 200}, False),
             ("suspend",),
             ("send", {"type": "http.response.body", "body": b"abc"}, False)]
        )  # fmt: skip
        scope = _scope_of({"http_version": "1.1", "raw_path": b"/t", "headers": []})

        async def send(message: Any) -> None:
            pass

        def serve() -> None:
            for _ in range(each):
                assert _drive(middleware(dict(scope), None, send), ("run",)) == ("returned", None)

        workers = [threading.Thread(target=serve) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        stats = log.close()
    finally:
        log.close()
    assert (stats.submitted, stats.written) == (threads * each, threads * each)
    assert {(record.status, record.bytes_sent) for record in fmt.records} == {(200, 3)}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("ending", ["finished", "raised", "closed", "generator", "huge"])
@pytest.mark.parametrize("request_id", [None, "X-Request-ID"])
@pytest.mark.parametrize("counts_received", [False, True])
def test_the_c_path_keeps_no_reference_to_what_it_was_given(
    ending: str, request_id: str | None, counts_received: bool
) -> None:
    """A reference the C code took and never gave back shows in sys.getrefcount."""
    fmt = JsonFormat(extras=["bytes_received"]) if counts_received else "combined"
    log = AccessLog("/dev/null", fmt, flush_interval=0, max_queue=100_000)
    try:
        middleware = _middleware(log, request_id)
        scope = _scope_of({"http_version": "1.1", "raw_path": b"/r", "headers": [(b"a", b"b")]})
        start = {"type": "http.response.start", "status": 200, "headers": [(b"x", b"y")]}
        body = {"type": "http.response.body", "body": b"abc"}
        request = {"type": "http.request", "body": b"uploaded"}

        async def receive() -> dict[str, Any]:
            return request

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            await send(start)
            if ending == "raised":
                raise AppError("after the start")
            if ending == "closed":
                await Suspend()
            if ending == "huge":
                # Past Py_ssize_t: the count goes on as an int.
                for _ in range(3):
                    await send(huge)
            await send(body)

        @types.coroutine
        def generator_app(scope: Any, receive: Any, send: Any) -> Any:
            yield from receive().__await__()
            yield from send(start).__await__()
            yield from send(body).__await__()

        async def send(message: Any) -> None:
            pass

        huge = {"type": "http.response.body", "body": _Huge(b"h"), "more_body": True}
        middleware.app = generator_app if ending == "generator" else app
        watched = (scope, start, body, request, receive, send, app, middleware, huge)

        def run(times: int) -> None:
            driver = ("close", 0) if ending == "closed" else ("run",)
            for _ in range(times):
                _drive(middleware(scope, receive, send), driver)
            assert log.flush(timeout=WRITER_WAIT)
            gc.collect()

        run(100)  # whatever is made once (interned names, caches) is made here
        before = [sys.getrefcount(thing) for thing in watched]
        run(5_000)  # a reference kept per request shows 5,000 times
        assert [sys.getrefcount(thing) for thing in watched] == before
    finally:
        log.close()


@pytest.mark.parametrize("core", ["c", "python"])
def test_uvicorn_serves_a_types_coroutine_application_on_either_core(
    tmp_path: Path, core: str
) -> None:
    """``await`` accepts a generator whose code has CO_ITERABLE_COROUTINE; the C path
    did not (every request a 500), and now takes it as the reference does."""
    environment = server_environment(tmp_path / "access.log", "combined", "0.01")
    if core == "python":
        environment["BOUNDLOG_NO_EXTENSIONS"] = "1"
    command = functools.partial(uvicorn_app_command, app="tests.apps.generator_coroutine_app:app")
    with running_server(command, environment, tmp_path / "uvicorn.out") as server:
        with httpx.Client(timeout=10) as client:
            for _ in range(3):
                response = client.get(f"http://{LOOPBACK}:{server.port}/gen")
                assert (response.status_code, response.content) == (200, b"generated")
        stop_gracefully(server, UVICORN_CLEAN_EXITS)
    written = read_log_lines(tmp_path / "access.log")
    assert len(written) == 3
    assert all(b'"GET /gen HTTP/1.1" 200 9 ' in line for line in written)


@types.coroutine
def _generator_app(scope: Any, receive: Any, send: Any) -> Any:
    yield from send({"type": "http.response.start", "status": 201, "headers": []}).__await__()
    yield from send({"type": "http.response.body", "body": b"gen"}).__await__()


def _plain_generator_app(scope: Any, receive: Any, send: Any) -> Any:
    # A generator without CO_ITERABLE_COROUTINE: not awaitable, on either path.
    yield


class _Huge(bytes):
    """A body whose __len__ claims more than Py_ssize_t's half: several overflow it."""

    def __len__(self) -> int:
        return sys.maxsize - 3


async def _huge_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for index in range(5):
        await send({"type": "http.response.body", "body": _Huge(b"x"), "more_body": index < 4})


@pytest.mark.parametrize(
    "app",
    [_generator_app, _plain_generator_app, _huge_app],
    ids=["types-coroutine", "plain-generator", "huge-bodies"],
)
def test_c_and_python_take_generators_and_huge_bodies_alike(logs: Logs, app: Any) -> None:
    scope = _scope_of({"http_version": "1.1", "raw_path": b"/r", "headers": []})
    results = []
    for path in ("python", "c"):
        log, fmt = logs[path, True, False, False, True]
        middleware = _middleware(log)
        call = (
            functools.partial(AccessLogMiddleware.__call__, middleware)
            if path == "python"
            else middleware
        )
        seen: list[Any] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        async def send(message: Any, seen: list[Any] = seen) -> None:
            seen.append(dict(message))

        middleware.app = app

        async def on_a_loop(call: Any = call) -> tuple[Any, ...]:
            return _drive(call(scope, receive, send), ("run",))

        ended = asyncio.run(on_a_loop())
        assert log.flush(timeout=10)
        records = [_comparable(record, log.request_header_names) for record in fmt.records]
        fmt.records.clear()
        # A TypeError's message is CPython's own, which differs between versions.
        results.append((ended[:2], seen, records))
    assert results[0] == results[1]
    if app is _huge_app:
        # Python's sum has no bound; a Py_ssize_t one wrapped to a negative count.
        assert results[1][2][0][6] == 5 * (sys.maxsize - 3)
    if app is _generator_app:
        assert results[1][2][0][5:7] == (201, 3)


@pytest.mark.parametrize("thrown", [StopIteration, StopIteration("v"), ValueError])
def test_throw_into_an_exchange_not_started_is_the_coroutines(logs: Logs, thrown: Any) -> None:
    """A coroutine not started raises what is thrown in: on 3.11 from its body, where
    StopIteration becomes RuntimeError (PEP 479); from 3.12 on unchanged.  The C
    exchange does what this Python's coroutines do."""
    scope = _scope_of({"http_version": "1.1"})
    raised = []
    for path in ("python", "c"):
        middleware = _middleware(logs[path, False, False, False, True][0])
        call = (
            functools.partial(AccessLogMiddleware.__call__, middleware)
            if path == "python"
            else middleware
        )

        async def nothing(*args: Any) -> None:
            raise AssertionError("not called")

        iterator = call(scope, nothing, nothing).__await__()
        with pytest.raises((RuntimeError, ValueError, StopIteration)) as caught:
            iterator.throw(thrown)
        error = caught.value
        raised.append((type(error), error.args, type(error.__cause__)))
        iterator.close()
    assert raised[0] == raised[1]
    if thrown is ValueError:
        assert raised[1][0] is ValueError
    elif sys.version_info < (3, 12):
        assert raised[1][:2] == (RuntimeError, ("coroutine raised StopIteration",))
    else:
        assert raised[1][0] is StopIteration
