"""Fields the application adds (``boundlog.add_fields``, a record's ``notes``): how
they reach a record, and how JSON lines and templates write them.

The end-to-end tests (tests/e2e/test_e2e_fields.py) run them under real servers; the C
request paths are compared with these for arbitrary applications in
tests/speedups/test_speedups_asgi.py and tests/speedups/test_speedups_wsgi.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import boundlog
from _examples import examples
from _records import CapturingFormat, make_record
from _strategies import NOTE_NAMES, NOTE_VALUES, Unprintable
from boundlog import AccessLog, JsonFormat, Record, Template, add_fields, unescape
from boundlog._errors import ConfigurationError
from boundlog.asgi import AccessLogMiddleware as AsgiMiddleware
from boundlog.formats._json import JSON_FIELDS
from boundlog.record._notes import NOTES
from boundlog.record._record import NOTES as NOTES_INDEX
from boundlog.wsgi import AccessLogMiddleware as WsgiMiddleware


def json_line(fmt: JsonFormat, notes: Any) -> dict[str, Any]:
    data = fmt.format_batch([make_record(notes=notes)])
    assert data.count(b"\n") == 1
    assert data.isascii()
    parsed: dict[str, Any] = json.loads(data)
    return parsed


def notes_of(fmt: JsonFormat, notes: Any) -> list[tuple[str, Any]]:
    return list(json_line(fmt, notes).items())[len(JSON_FIELDS) :]


# -- the record -----------------------------------------------------------------------


def test_a_record_has_notes_then_extras_none_by_default() -> None:
    record = make_record()
    assert len(record) == 13
    assert record.notes is None
    assert record[NOTES_INDEX] is None
    assert Record(*record[:11], {"a": 1}).notes == {"a": 1}
    assert Record._fields[-2:] == ("notes", "extras")


# Each test runs its requests in a context of its own: a WSGI exchange that a test
# server never closes (tests/speedups/test_speedups_wsgi.py) leaves its request's dict in the
# thread's context, as a real server that broke PEP 3333 would.


def test_add_fields_is_public_and_does_nothing_outside_a_request() -> None:
    assert boundlog.add_fields is add_fields

    def outside() -> None:
        assert NOTES.get() is None
        add_fields(user="ada")
        assert NOTES.get() is None

    contextvars.Context().run(outside)


# -- which logs collect them ------------------------------------------------------------


@pytest.mark.parametrize(
    ("log_format", "options", "reads"),
    [
        ("combined", {}, False),
        ("common", {}, False),
        ("dev", {}, False),
        ("json", {}, True),
        ('%h "%r" %>s', {}, False),
        ("%h %{user}n", {}, True),
        (CapturingFormat(None), {}, True),  # a format that does not say
        ("combined", {"keep": lambda record: True}, True),  # a predicate sees whole records
    ],
)
def test_a_log_reads_notes_when_its_format_may_show_them(
    tmp_path: Any, log_format: Any, options: dict[str, Any], reads: bool
) -> None:
    log = AccessLog(str(tmp_path / "access.log"), log_format, **options)
    try:
        assert log.reads_notes is reads
    finally:
        log.close()


def asgi_scope() -> dict[str, Any]:
    return {
        "type": "http", "http_version": "1.1", "method": "GET", "path": "/", "raw_path": b"/",
        "query_string": b"", "headers": [], "client": ("10.0.0.1", 1),
    }  # fmt: skip


def run_asgi(middleware: Any, call: Any) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    async def send(message: Any) -> None:
        pass

    async def main() -> None:
        await call(asgi_scope(), receive, send)

    contextvars.Context().run(asyncio.run, main())


@pytest.fixture(params=["c", "python"])
def path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def asgi_call(middleware: Any, path: str) -> Any:
    # The instance's call runs the C path (with the C core); its __call__ the reference.
    return middleware if path == "c" else middleware.__call__


@pytest.mark.parametrize("log_format", ["json", "combined"])
def test_the_asgi_middleware_sets_notes_only_for_a_log_that_reads_them(
    tmp_path: Any, path: str, log_format: str
) -> None:
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        notes = NOTES.get()
        seen.append(notes if notes is None else (id(notes), dict(notes)))
        # A thread of the pool (asyncio.to_thread, Starlette's run_in_threadpool) and a
        # task copy the context, and so share the request's dict.
        await asyncio.to_thread(add_fields, thread=1)
        await asyncio.create_task(_add_task())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x"})
        add_fields(after="the response")

    # For "combined": a format that says it reads no notes, and keeps the records.
    fmt = CapturingFormat(frozenset()) if log_format == "combined" else None
    if fmt is not None:
        fmt.reads_notes = False  # type: ignore[attr-defined]
    log = AccessLog(
        str(tmp_path / "access.log"), fmt if fmt is not None else log_format, flush_interval=0
    )
    try:
        middleware = AsgiMiddleware(app, log=log)
        run_asgi(middleware, asgi_call(middleware, path))
        run_asgi(middleware, asgi_call(middleware, path))
    finally:
        log.close()
    if log_format == "combined":
        assert seen == [None, None]
        assert fmt is not None
        assert [record.notes for record in fmt.records] == [None, None]
    else:
        # A new dict each request; what came after the response (a background task's)
        # is in the line too: the record waits for the application to return.
        assert [notes for _, notes in seen] == [{}, {}]
        assert seen[0][0] != seen[1][0]
        lines = (tmp_path / "access.log").read_bytes().splitlines()
        assert [list(json.loads(line).items())[len(JSON_FIELDS) :] for line in lines] == [
            [("thread", 1), ("task", True), ("after", "the response")]
        ] * 2


async def _add_task() -> None:
    add_fields(task=True)


def test_the_wsgi_middleware_gives_each_request_of_a_thread_its_own_notes(
    tmp_path: Any, path: str
) -> None:
    fmt = CapturingFormat(frozenset())
    log = AccessLog(str(tmp_path / "access.log"), fmt, flush_interval=0)

    def app(environ: Any, start_response: Any) -> Iterator[bytes]:
        if environ["PATH_INFO"] == "/add":
            add_fields(rid=environ["QUERY_STRING"])
        start_response("200 OK", [])
        yield b"x"
        add_fields(in_body=True)

    middleware = WsgiMiddleware(app, log=log)
    call = middleware if path == "c" else lambda *args: WsgiMiddleware.__call__(middleware, *args)
    try:
        contextvars.Context().run(serve_three, call)
        assert log.flush(timeout=10)
    finally:
        log.close()
    assert [record.notes for record in fmt.records] == [
        {"rid": "1", "in_body": True},
        {"in_body": True},
        {"rid": "2", "in_body": True},
    ]


def serve_three(call: Any) -> None:
    """Three requests in this thread's context, as a threaded server serves them."""
    for target, query in (("/add", "1"), ("/plain", ""), ("/add", "2")):
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": target, "QUERY_STRING": query}
        body = call(environ, lambda status, headers: None)
        list(body)
        body.close()
        # The same thread, the same context: between requests the context holds no
        # request's fields, and add_fields adds nothing.
        assert NOTES.get() is None
        add_fields(outside=True)


def test_a_context_without_a_request_sees_none(tmp_path: Any) -> None:
    assert contextvars.Context().run(NOTES.get) is None


# -- JSON lines -------------------------------------------------------------------------


def test_json_writes_notes_after_the_built_in_keys_in_order() -> None:
    fmt = JsonFormat()
    line = json_line(fmt, {"user": "ada", "tenant": 7})
    assert list(line)[: len(JSON_FIELDS)] == list(json_line(fmt, None))
    assert list(line.items())[len(JSON_FIELDS) :] == [("user", "ada"), ("tenant", 7)]


def test_a_note_never_hides_a_field_nor_another_note() -> None:
    """A note named like a key the line has is written with ``app.`` before its name,
    as many times as it takes to make the key new."""
    fmt = JsonFormat(rename={"status": "code"}, request_headers=["X-Tenant"])
    notes = {"status": 1, "code": 2, "x_tenant": 3, "app.code": 4, "time": 5}
    line = json_line(fmt, notes)
    assert line["code"] == 200
    assert line["status"] == 1
    # The built-in keys and the X-Tenant header field's come before the notes.
    assert list(line.items())[len(JSON_FIELDS) + 1 :] == [
        ("status", 1), ("app.code", 2), ("app.x_tenant", 3), ("app.app.code", 4),
        ("app.time", 5),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-(2**70), str(-(2**70))),
        (1.5, "1.5"),
        (1e300, "1e+300"),
        (math.nan, "null"),
        (math.inf, "null"),
        ("ada", '"ada"'),
        ('q"\\\ne\xe9', '"q\\"\\\\x5c\\ne\\u00e9"'),
        # Not valid UTF-8 (a lone surrogate): every byte from 0x80 on as \xhh.
        ("\xe9\ud800", '"\\\\xc3\\\\xa9\\\\xed\\\\xa0\\\\x80"'),
        ([1, "a"], "\"[1, 'a']\""),
        (b"raw", "\"b'raw'\""),
        (Unprintable(), '"<unprintable Unprintable>"'),
        pytest.param(10**5000, '"<unprintable int>"', id="an int too long to write"),
    ],
)
def test_note_values_are_json_scalars_or_their_str(value: object, written: str) -> None:
    data = JsonFormat().format_batch([make_record(notes={"v": value})])
    assert data.endswith(b',"v":' + written.encode() + b"}\n")


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(NOTE_NAMES, NOTE_VALUES, max_size=5))
def test_any_notes_make_one_strict_json_object(notes: dict[str, Any]) -> None:
    data = JsonFormat().format_batch([make_record(notes=notes or None)])
    assert data.count(b"\n") == 1
    assert data.isascii()

    def strict(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    line = json.loads(data, parse_constant=strict)
    written = list(line)[len(JSON_FIELDS) :]
    assert len(written) == len(notes)
    # Each name comes back (escaped by the module's rule), after none or more "app.".
    for name, key in zip(notes, written, strict=True):
        raw, wanted = unescape(key.encode("utf-8")), name.encode("utf-8", "surrogatepass")
        assert raw.endswith(wanted)
        assert set(raw[: len(raw) - len(wanted)].split(b"app.")) <= {b""}


# -- templates --------------------------------------------------------------------------


def test_a_template_shows_a_note_or_a_dash() -> None:
    fmt = Template("%s %{user}n %{n}n %{none}n %{flag}n")
    assert fmt.reads_notes
    assert not Template("%s").reads_notes
    records = [
        make_record(notes={"user": "ada", "n": 1.5, "none": None, "flag": True}),
        make_record(notes=None),
        make_record(notes={"other": 1}),
    ]
    assert fmt.format_batch(records) == b"200 ada 1.5 - true\n200 - - - -\n200 - - - -\n"


def test_a_note_is_escaped_as_a_header_field_is() -> None:
    """The same bytes in a note and in a request header field give the same text."""
    fmt = Template("%{x}n|%{X}i")
    for value in ['a"b', "a\nb", "caf\xe9", "\\", " ", "\ud800", "\x1b[31m"]:
        record = make_record(
            notes={"x": value},
            request_headers=[(b"x", value.encode("utf-8", "surrogatepass"))],
        )
        note, header = fmt.format_batch([record]).rstrip(b"\n").split(b"|")
        assert note == header, value


def test_a_note_needs_a_name() -> None:
    with pytest.raises(ConfigurationError, match="it needs a name"):
        Template("%{}n")
