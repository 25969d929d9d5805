"""A record's extras (``boundlog.Extras``): what an integration learns of an exchange
only for a log whose format reads it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import get_current_span

import boundlog
from boundlog import AccessLog, ConfigurationError, Extras, Record, _core
from boundlog.asgi import AccessLogMiddleware
from boundlog.wsgi import AccessLogMiddleware as WsgiMiddleware


class ReadsRoute:
    reads_extras = frozenset({"route"})

    def format_batch(self, records: Sequence[Record]) -> bytes:
        return b"".join(b"%r\n" % (record.extras,) for record in records)


class SaysNothing:
    def format_batch(self, records: Sequence[Record]) -> bytes:
        return b"\n" * len(records)


def test_extras_are_none_until_an_integration_learns_something() -> None:
    assert Extras() == (None,) * len(Extras._fields)
    assert boundlog.Record(0.0, 0.0, None, "GET", b"/", b"", "HTTP/1.1", 200, 0).extras is None


@pytest.mark.parametrize(
    ("fmt", "reads"),
    [
        ("combined", frozenset()),
        ("common", frozenset()),
        ("dev", frozenset()),
        (ReadsRoute(), frozenset({"route"})),
        # A format that does not say reads all but bytes_received, which only a format
        # that asks for it pays.
        (SaysNothing(), frozenset(Extras._fields) - {"bytes_received"}),
    ],
)
def test_a_log_reads_the_extras_its_format_says(fmt: object, reads: frozenset[str]) -> None:
    with AccessLog(sink="/dev/null", format=fmt, report_loss=False) as log:  # type: ignore[arg-type]
        assert log.reads_extras == reads


def test_a_keep_predicate_sees_what_the_format_reads() -> None:
    """Filtering never moves a log off its fast path: a keep predicate gets no extras
    of its own (nor its combined log any)."""
    with AccessLog(
        sink="/dev/null", format=ReadsRoute(), keep=lambda record: True, report_loss=False
    ) as log:
        assert log.reads_extras == frozenset({"route"})
    with AccessLog(sink="/dev/null", keep=lambda record: True, report_loss=False) as log:
        assert log.reads_extras == frozenset()


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("route", "must be a set of field names"),
        (frozenset({"route", "color"}), "names 'color', which records do not have"),
        ({1}, "must be a set of field names"),
    ],
)
def test_a_format_naming_unknown_extras_is_refused(names: object, message: str) -> None:
    class Odd(SaysNothing):
        reads_extras = names

    with pytest.raises(ConfigurationError, match=message):
        AccessLog(sink="/dev/null", format=Odd(), report_loss=False)


class Capture:
    """A format keeping its records, reading the extras it is given."""

    def __init__(self, reads: frozenset[str]) -> None:
        self.reads_extras = reads
        self.records: list[Record] = []

    def format_batch(self, records: Sequence[Record]) -> bytes:
        self.records += records
        return b"x\n" * len(records)


def request_paths(middleware: type, compiled: object) -> list[Any]:
    """``middleware`` on each request path: the pure-Python one (a subclass keeps it,
    whatever the core) and the C one, when the core has it (``compiled``)."""
    reference = type("Reference" + middleware.__name__, (middleware,), {})
    return [
        pytest.param(reference, id="python"),
        pytest.param(
            middleware, id="c", marks=pytest.mark.skipif(compiled is None, reason="no C core")
        ),
    ]


MIDDLEWARES = request_paths(AccessLogMiddleware, _core.asgi_middleware)


def http_scope() -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "path": "/items/7", "raw_path": b"/items/7", "query_string": b"", "headers": [],
        "client": ("10.1.2.3", 5000), "server": ("127.0.0.1", 8000),
    }  # fmt: skip


async def receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def send(message: Any) -> None:
    pass


async def finishing(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"done"})


async def leaving(scope: Any, receive: Any, send: Any) -> None:
    # The client left mid-body: the application returns without finishing.
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"part", "more_body": True})


def served(middleware: Any, app: Any, fmt: Capture, span: bool) -> list[Record]:
    """The records of one request through ``middleware(app)``, inside an OpenTelemetry
    server span when ``span``, as OpenTelemetry's ASGI middleware would make it."""
    tracer = TracerProvider().get_tracer("test")
    log = AccessLog(sink="/dev/null", format=fmt, report_loss=False)  # type: ignore[arg-type]
    logged = middleware(app, log=log)

    async def request() -> None:
        if span:
            with tracer.start_as_current_span("GET /items/{item_id}"):
                await logged(http_scope(), receive, send)
        else:
            await logged(http_scope(), receive, send)

    asyncio.run(request())
    log.close()
    return fmt.records


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize(("app", "completed"), [(finishing, True), (leaving, False)])
def test_the_span_current_in_the_request_and_completion_are_learnt(
    middleware: Any, app: Any, completed: bool
) -> None:
    spans: list[tuple[int, int]] = []

    async def remembering(scope: Any, receive: Any, send: Any) -> None:
        context = get_current_span().get_span_context()
        spans.append((context.trace_id, context.span_id))
        await app(scope, receive, send)

    [record] = served(middleware, remembering, Capture(frozenset({"trace", "completed"})), True)
    assert record.extras == Extras(trace=spans[0], completed=completed)
    assert spans[0][0] != 0


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_no_current_span_is_no_trace(middleware: Any) -> None:
    [record] = served(middleware, finishing, Capture(frozenset({"trace"})), False)
    assert record.extras == Extras()


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize("reads", [frozenset(), frozenset({"close_code"})])
def test_a_log_reading_no_learnt_extras_gets_none(middleware: Any, reads: frozenset[str]) -> None:
    [record] = served(middleware, finishing, Capture(reads), True)
    assert record.extras is None


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_an_extras_function_that_raises_fails_the_request_not_the_log(
    middleware: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What learning raises (a broken OpenTelemetry SDK, say) reaches the server as the
    application's error would, and the log goes on."""
    failures = iter([LookupError("no span")])

    def learner(reads: frozenset[str], *context: Any) -> Any:
        def learn(scope: Any, completed: bool) -> Extras:
            for failure in failures:
                raise failure
            return Extras(completed=completed)

        return learn

    monkeypatch.setattr(boundlog.asgi, "learner", learner)
    fmt = Capture(frozenset({"completed"}))
    log = AccessLog(sink="/dev/null", format=fmt, report_loss=False)  # type: ignore[arg-type]
    logged = middleware(finishing, log=log)

    with pytest.raises(LookupError):
        asyncio.run(logged(http_scope(), receive, send))
    asyncio.run(logged(http_scope(), receive, send))
    log.close()
    assert [record.extras for record in fmt.records][-1] == Extras(completed=True)


WSGI_MIDDLEWARES = request_paths(WsgiMiddleware, _core.wsgi_middleware)


def wsgi_served(middleware: Any, fmt: Capture, route: object) -> list[Record]:
    """The records of one request through ``middleware``, whose application leaves
    ``route`` under boundlog's environ key (nothing for None)."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if route is not None:
            environ["boundlog.route"] = route
        start_response("200 OK", [])
        return [b"done"]

    log = AccessLog(sink="/dev/null", format=fmt, report_loss=False)  # type: ignore[arg-type]
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/items/7", "SERVER_PROTOCOL": "HTTP/1.1"}
    try:
        body = middleware(app, log=log)(environ, lambda status, headers, exc_info=None: None)
        list(body)
        body.close()
    finally:
        log.close()
    return fmt.records


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
@pytest.mark.parametrize(
    ("route", "learnt"), [("/items/{item_id}", "/items/{item_id}"), (None, None), (7, None)]
)
def test_the_wsgi_middleware_learns_the_route_the_application_left(
    middleware: Any, route: object, learnt: str | None
) -> None:
    [record] = wsgi_served(middleware, Capture(frozenset({"route"})), route)
    assert record.extras == Extras(route=learnt)


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
def test_a_wsgi_log_reading_no_route_gets_no_extras(middleware: Any) -> None:
    # A websocket's close code: nothing a WSGI exchange has.
    [record] = wsgi_served(middleware, Capture(frozenset({"close_code"})), "/items/{item_id}")
    assert record.extras is None


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_the_route_an_asgi_application_left_comes_first(middleware: Any) -> None:
    async def leaving_a_route(scope: Any, receive: Any, send: Any) -> None:
        scope["route"] = object()  # not a Starlette route: no template
        scope["boundlog.route"] = "items/<int:item_id>/"
        await finishing(scope, receive, send)

    [record] = served(middleware, leaving_a_route, Capture(frozenset({"route"})), False)
    assert record.extras == Extras(route="items/<int:item_id>/")


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
def test_a_wsgi_extras_function_that_raises_fails_the_close_not_the_log(
    middleware: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What learning raises reaches the server from ``close()``, as an error of the
    body's own close would, and the next request is logged."""
    failures = iter([LookupError("no route")])

    def wsgi_learner(reads: frozenset[str], *context: Any) -> Any:
        def learn(environ: Any, completed: bool, trace: Any) -> Extras:
            for failure in failures:
                raise failure
            return Extras(route="/again")

        return learn

    monkeypatch.setattr(boundlog.wsgi, "wsgi_learner", wsgi_learner)
    fmt = Capture(frozenset({"route"}))
    with pytest.raises(LookupError):
        wsgi_served(middleware, fmt, None)
    assert wsgi_served(middleware, fmt, None)[-1].extras == Extras(route="/again")


class ReadsEnviron(SaysNothing):
    environ_names = frozenset({"REMOTE_USER", "tenant"})


def test_a_log_keeps_the_server_variables_its_format_names() -> None:
    with AccessLog(sink="/dev/null", format=ReadsEnviron(), report_loss=False) as log:  # type: ignore[arg-type]
        assert log.environ_names == frozenset({"REMOTE_USER", "tenant"})
    with AccessLog(sink="/dev/null", format="combined", report_loss=False) as log:
        assert log.environ_names == frozenset()


def test_a_format_naming_variables_oddly_is_refused() -> None:
    class Odd(SaysNothing):
        environ_names = "REMOTE_USER"

    with pytest.raises(ConfigurationError, match="environ_names must be a set of variable names"):
        AccessLog(sink="/dev/null", format=Odd(), report_loss=False)


@pytest.mark.parametrize("middleware", WSGI_MIDDLEWARES)
def test_a_wsgi_span_is_read_as_the_application_is_called(
    middleware: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The span current when the middleware is called, not when the body is closed;
    a span read that raises gives no ids, and the request goes on."""
    tracer = TracerProvider().get_tracer("test")
    fmt = Capture(frozenset({"trace"}))
    with tracer.start_as_current_span("GET /items/7") as span:
        expected = (span.get_span_context().trace_id, span.get_span_context().span_id)
        [record] = wsgi_served(middleware, fmt, None)
    assert record.extras == Extras(trace=expected)

    def broken() -> Any:
        raise RuntimeError("no span")

    monkeypatch.setattr("opentelemetry.trace.get_current_span", broken)
    [record] = wsgi_served(middleware, Capture(frozenset({"trace"})), None)
    assert record.extras == Extras()
