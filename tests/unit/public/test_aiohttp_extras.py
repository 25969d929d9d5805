"""What boundlog's aiohttp logger learns of a request for a log that reads it: the route
template, the trace, whether the response completed, the request body bytes read.

Each test runs a real aiohttp server (``web.AppRunner`` on a loopback port) in the test's
event loop, sends it real requests, and reads the lines the log wrote once the runner's
cleanup has closed it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from opentelemetry import trace
from opentelemetry.instrumentation.aiohttp_server import AioHttpServerInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from _records import CapturingFormat
from _servers import CLIENT_TIMEOUT, LOOPBACK, read_log_lines
from boundlog import AccessLog, ConfigurationError, JsonFormat, Record
from boundlog.aiohttp import access_logger

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
TEMPLATE = "%r %{route}x %{trace_id}x %{span_id}x %X %I"

Send = Callable[[str], Awaitable[None]]


async def ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def echo_span(request: web.Request) -> web.Response:
    """The ids of the span the handler runs in, as the line must show them."""
    context = trace.get_current_span().get_span_context()
    return web.Response(text=f"{context.trace_id:032x} {context.span_id:016x}")


async def read_three(request: web.Request) -> web.Response:
    """Reads 3 bytes of the body and leaves the rest."""
    return web.Response(body=await request.content.read(3))


async def read_all(request: web.Request) -> web.Response:
    return web.Response(text=str(len(await request.read())))


def application() -> web.Application:
    app = web.Application()
    app.router.add_get("/plain", ok)
    app.router.add_get("/items/{item_id}", ok)
    app.router.add_get("/span", echo_span)
    app.router.add_post("/three", read_three)
    app.router.add_post("/upload", read_all)
    app.router.add_static("/static", Path(__file__).parents[2])
    sub = web.Application()
    sub.router.add_get("/things/{name}", ok)
    app.add_subapp("/sub", sub)
    return app


def serve(
    tmp_path: Path,
    fmt: Any,
    exchange: Callable[[httpx.AsyncClient, int], Awaitable[None]],
    app: web.Application | None = None,
) -> list[bytes]:
    """Run ``app`` with a log in ``fmt``, ``exchange`` requests with it: the log's lines."""
    path = tmp_path / "access.log"
    app = application() if app is None else app

    async def run() -> None:
        logger = access_logger(app, sink=str(path), format=fmt)
        runner = web.AppRunner(app, access_log_class=logger)
        await runner.setup()
        await web.TCPSite(runner, LOOPBACK, 0).start()
        port = runner.addresses[0][1]
        try:
            async with httpx.AsyncClient(
                base_url=f"http://{LOOPBACK}:{port}", timeout=CLIENT_TIMEOUT
            ) as client:
                await exchange(client, port)
        finally:
            # Closes the log once aiohttp has finished its last request.
            await runner.cleanup()

    asyncio.run(run())
    return read_log_lines(path)


def get(*targets: str, **headers: str) -> Callable[[httpx.AsyncClient, int], Awaitable[None]]:
    async def send(client: httpx.AsyncClient, port: int) -> None:
        for target in targets:
            await client.get(target, headers=headers)

    return send


def test_the_line_shows_the_route_template_matched(tmp_path: Path) -> None:
    """The resource's template, a sub-application's prefix included; a static route's is
    its prefix; none (``-``) when no route matched, a 404 or a 405."""
    lines = serve(
        tmp_path,
        "%r %{route}x",
        get("/plain", "/items/7", "/sub/things/ada", "/static/_servers.py", "/nope", "/sub/nope"),
    )
    assert lines == [
        b"GET /plain HTTP/1.1 /plain",
        b"GET /items/7 HTTP/1.1 /items/{item_id}",
        b"GET /sub/things/ada HTTP/1.1 /sub/things/{name}",
        b"GET /static/_servers.py HTTP/1.1 /static",
        b"GET /nope HTTP/1.1 -",
        b"GET /sub/nope HTTP/1.1 -",
    ]


def test_a_method_the_route_does_not_take_has_no_route(tmp_path: Path) -> None:
    async def send(client: httpx.AsyncClient, port: int) -> None:
        assert (await client.post("/plain")).status_code == 405

    assert serve(tmp_path, "%s %{route}x", send) == [b"405 -"]


def test_a_route_the_handler_names_comes_first(tmp_path: Path) -> None:
    async def named(request: web.Request) -> web.Response:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", web.NotAppKeyWarning)
            request["boundlog.route"] = "/named/{what}"
        return web.Response(text="ok")

    app = application()
    app.router.add_get("/named/{what}/{rest:.*}", named)
    assert serve(tmp_path, "%{route}x", get("/named/a/b"), app) == [b"/named/{what}"]


def test_json_lines_show_the_route_and_completion(tmp_path: Path) -> None:
    [line] = serve(tmp_path, "json", get("/items/7"))
    fields = json.loads(line)
    assert (fields["route"], fields["completed"]) == ("/items/{item_id}", True)


def test_the_span_of_opentelemetrys_middleware_is_the_lines(tmp_path: Path) -> None:
    """Under OpenTelemetry's aiohttp server instrumentation, its middleware first, the line
    shows the ids of the server span the handler ran in: a child of the caller's."""
    seen: list[str] = []

    async def send(client: httpx.AsyncClient, port: int) -> None:
        seen.append((await client.get("/span", headers={"traceparent": TRACEPARENT})).text)
        seen.append((await client.get("/span")).text)

    instrumentor = AioHttpServerInstrumentor()
    # The instrumentor makes web.Application a subclass that puts its middleware first,
    # which aiohttp discourages with a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        instrumentor.instrument(tracer_provider=TracerProvider())
    try:
        app = application()
    finally:
        instrumentor.uninstrument()
    lines = serve(tmp_path, "%{trace_id}x %{span_id}x", send, app)
    assert [line.decode() for line in lines] == seen
    assert seen[0].startswith(TRACE_ID)
    assert not seen[0].endswith(PARENT_ID)
    assert not seen[1].startswith(TRACE_ID)


def test_without_instrumentation_the_traceparent_header_gives_the_ids(tmp_path: Path) -> None:
    lines = serve(tmp_path, JsonFormat(), get("/span", traceparent=TRACEPARENT))
    fields = json.loads(lines[0])
    assert (fields["trace_id"], fields["span_id"]) == (TRACE_ID, PARENT_ID)


def test_a_template_of_extras(tmp_path: Path) -> None:
    lines = serve(tmp_path, TEMPLATE, get("/items/7", traceparent=TRACEPARENT))
    assert lines == [
        f"GET /items/7 HTTP/1.1 /items/{{item_id}} {TRACE_ID} {PARENT_ID} + 0".encode()
    ]


def test_bytes_received_counts_what_the_handler_read(tmp_path: Path) -> None:
    """``request.content``'s bytes the handler read: all of a body it read, 3 of one it
    read 3 bytes of, a chunked body's decoded bytes, none of a GET's."""

    async def send(client: httpx.AsyncClient, port: int) -> None:
        await client.post("/upload", content=b"x" * 10_000)
        await client.post("/three", content=b"0123456789")

        async def chunks() -> Any:
            yield b"abc"
            yield b"defgh"

        await client.post("/upload", content=chunks())
        await client.get("/plain")

    lines = serve(tmp_path, JsonFormat(extras=["bytes_received"]), send)
    assert [json.loads(line)["bytes_received"] for line in lines] == [10_000, 3, 8, 0]
    (tmp_path / "template").mkdir()
    assert serve(tmp_path / "template", "%I", get("/plain")) == [b"0"]


def stream_handler(*, let_error_out: bool, done: asyncio.Event) -> Any:
    """A handler streaming chunks until its client leaves."""

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        try:
            while True:
                await response.write(b"x" * 65536)
        except ConnectionError:
            if let_error_out:
                raise
            return response
        finally:
            done.set()

    return stream


def leave_mid_stream(done: asyncio.Event) -> Callable[[httpx.AsyncClient, int], Awaitable[None]]:
    """Read the start of /stream's response on a socket of its own, close it, then ask for
    /plain once the handler has seen the client leave."""

    async def send(client: httpx.AsyncClient, port: int) -> None:
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
        writer.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
        )
        writer.write(b"GET /stream HTTP/1.1\r\nHost: test\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(1000)
        # SO_LINGER with no time: the close resets the connection mid-stream.
        writer.close()
        await done.wait()
        await client.get("/plain")

    return send


def test_a_client_that_leaves_mid_stream_is_logged_as_not_completed(tmp_path: Path) -> None:
    """A handler that returns its response when the client has gone: aiohttp fails to
    write its end, and logs it."""
    done = asyncio.Event()
    app = application()
    app.router.add_get("/stream", stream_handler(let_error_out=False, done=done))
    lines = serve(tmp_path, "%r %s %{completed}x %X %B", leave_mid_stream(done), app)
    assert [line.rsplit(b" ", 1)[0] for line in lines] == [
        b"GET /stream HTTP/1.1 200 false X",
        b"GET /plain HTTP/1.1 200 true +",
    ]
    # The bytes written before the client left (the response never reached its end,
    # where aiohttp sets body_length): at least the 1000 the client read.
    assert int(lines[0].rsplit(b" ", 1)[1]) >= 1000


def test_aiohttp_does_not_log_a_handler_that_lets_the_clients_leaving_out(tmp_path: Path) -> None:
    """The documented gap: aiohttp drops the connection without calling the logger."""
    done = asyncio.Event()
    app = application()
    app.router.add_get("/stream", stream_handler(let_error_out=True, done=done))
    lines = serve(tmp_path, "%r %{completed}x", leave_mid_stream(done), app)
    assert lines == [b"GET /plain HTTP/1.1 true"]


def captured_extras(tmp_path: Path, fmt: Any) -> list[Record]:
    log = AccessLog(sink=str(tmp_path / "captured.log"), format=fmt, report_loss=False)

    async def run() -> None:
        app = application()
        runner = web.AppRunner(app, access_log_class=access_logger(app, log=log))
        await runner.setup()
        await web.TCPSite(runner, LOOPBACK, 0).start()
        try:
            async with httpx.AsyncClient(timeout=CLIENT_TIMEOUT) as client:
                await client.get(f"http://{LOOPBACK}:{runner.addresses[0][1]}/items/7")
        finally:
            await runner.cleanup()

    try:
        asyncio.run(run())
    finally:
        log.close()
    return list(fmt.records)


def test_a_log_that_reads_no_extras_gets_none_and_no_middleware(tmp_path: Path) -> None:
    """combined reads none: records hold None, and no middleware is added to the app."""
    fmt = CapturingFormat(None)
    fmt.reads_extras = frozenset()  # type: ignore[attr-defined]
    [record] = captured_extras(tmp_path, fmt)
    assert record.extras is None
    app = web.Application()
    combined = access_logger(app, sink=str(tmp_path / "combined.log"), format="combined")
    assert combined.access_log is not None
    combined.access_log.close()
    assert list(app.middlewares) == []


def test_a_log_reads_only_what_its_format_does(tmp_path: Path) -> None:
    fmt = CapturingFormat(None)
    fmt.reads_extras = frozenset({"route"})  # type: ignore[attr-defined]
    [record] = captured_extras(tmp_path, fmt)
    assert record.extras is not None
    assert record.extras._asdict() == {
        "route": "/items/{item_id}", "trace": None, "completed": None,
        "bytes_received": None, "close_code": None, "environ": None,
    }  # fmt: skip


@pytest.mark.parametrize("request_id", [True, "X-Correlation-ID"])
def test_request_ids_are_refused_with_what_to_do_instead(request_id: bool | str) -> None:
    with pytest.raises(
        ConfigurationError, match=r"not available under aiohttp.*%\{X-Request-ID\}o"
    ):
        access_logger(request_id=request_id)
