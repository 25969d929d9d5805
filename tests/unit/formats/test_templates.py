"""Templates: every Apache directive and gunicorn atom, escaping, and errors at construction."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from _records import make_record
from _servers import CLIENT_TIMEOUT, read_log_lines, running_server, stop_gracefully
from boundlog import ConfigurationError, Extras, Record, Template
from boundlog.formats._apache import ApacheFormat, make_format
from boundlog.formats._escape import unescape
from test_formats import CLEAN_RECORDS, RAW, RECORDS, SETTINGS, lines_of, text_bytes
from test_integration_gunicorn import group_processes, gunicorn_command

GUNICORN_DEFAULT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
PID = str(os.getpid())


def basic(credentials: bytes) -> bytes:
    return b"Basic " + base64.b64encode(credentials)


# The record every case starts from: 2023-11-14T22:13:20.25Z, 4.2 ms, with a query,
# a Referer, a request ID, Basic credentials, a cookie and a response Content-Type.
BASE: dict[str, Any] = {
    "query": b"a=1",
    "request_headers": [
        (b"Host", b"example.test"),
        (b"Referer", b"http://example.test/start"),
        (b"User-Agent", b"curl/8.5.0"),
        (b"X-Request-ID", b"r-42"),
        (b"Authorization", basic(b"alice:secret")),
        (b"Cookie", b"session=abc"),
    ],
    "response_headers": [("Content-Type", "text/plain"), ("Set-Cookie", "id=1")],
}

CASES: list[tuple[str, dict[str, Any], str]] = [
    # Apache directives.
    ("%h", {}, "127.0.0.1"),
    ("%h", {"client": None}, "-"),
    ("%a", {"client": "unix socket"}, "unix\\x20socket"),
    ("%l", {}, "-"),
    ("%u", {}, "alice"),
    ("%u", {"request_headers": []}, "-"),
    ("%u", {"request_headers": [(b"authorization", b"Bearer abc")]}, "-"),
    ("%u", {"request_headers": [(b"authorization", basic(b"no-colon"))]}, "-"),
    ("%u", {"request_headers": [(b"authorization", basic(b'a "b\n:pw'))]}, "a\\x20\\x22b\\x0a"),
    ("%t", {}, "[14/Nov/2023:22:13:20 +0000]"),
    ("%{%Y-%m-%dT%H:%M:%S%z}t", {}, "2023-11-14T22:13:20+0000"),
    ("%{begin:%H}t %{%%z}t", {}, "22 %z"),
    ("%{sec}t %{msec}t %{usec}t", {}, "1700000000 1700000000250 1700000000250000"),
    ("%{msec_frac}t %{usec_frac}t", {}, "250 250000"),
    ("%r", {}, "GET /hello?a=1 HTTP/1.1"),
    ("%r", {"query": b"", "method": "HEAD", "path": b'/"x"'}, "HEAD /\\x22x\\x22 HTTP/1.1"),
    ("%m %U %H", {}, "GET /hello HTTP/1.1"),
    ("%q", {}, "?a=1"),
    ("%q", {"query": b""}, ""),
    ("%>s %s", {"status": 404}, "404 404"),
    ("%b %B", {}, "1024 1024"),
    ("%b %B", {"bytes_sent": 0}, "- 0"),
    ("%b %B", {"status": 304}, "- 0"),
    ("%D %T %Tf", {}, "4200 0 0.004200"),
    ("%D %T %Tf", {"duration": 2.5}, "2500000 2 2.500000"),
    ("%D %T %Tf", {"duration": float("nan")}, "- - -"),
    ("%{X-Request-ID}i %{x-request-id}i", {}, "r-42 r-42"),
    ("%{X-Missing}i", {}, "-"),
    ('"%{Referer}i"', {"request_headers": [(b"referer", b'a"b\\c\x85')]}, '"a\\x22b\\x5cc\\x85"'),
    ("%{Cookie}i %{Authorization}i", {}, "[redacted] [redacted]"),
    ("%{Content-Type}o %{Set-Cookie}o %{X-Missing}o", {}, "text/plain [redacted] -"),
    ("%P", {}, PID),
    ("100%% %s", {}, "100% 200"),
    # gunicorn atoms.
    ("%(h)s %(l)s %(u)s", {}, "127.0.0.1 - alice"),
    ("%(t)s", {}, "[14/Nov/2023:22:13:20 +0000]"),
    ("%(r)s", {}, "GET /hello?a=1 HTTP/1.1"),
    ("%(m)s %(U)s %(q)s %(H)s %(s)s", {}, "GET /hello a=1 HTTP/1.1 200"),
    ("[%(q)s]", {"query": b""}, "[]"),
    ("%(B)s %(b)s", {}, "1024 1024"),
    ("%(B)s %(b)s", {"method": "HEAD"}, "0 -"),
    ("%(f)s %(a)s", {}, "http://example.test/start curl/8.5.0"),
    ("%(f)s %(a)s", {"request_headers": []}, "- -"),
    ("%(T)s %(M)s %(D)s %(L)s", {}, "0 4 4200 0.004200"),
    ("%(T)s %(M)s %(D)s %(L)s", {"duration": 61.0345678}, "61 61034 61034568 61.034568"),
    ("%(p)s", {}, f"<{PID}>"),
    ("%({x-request-id}i)s %({X-Missing}i)s", {}, "r-42 -"),
    ("%({content-type}o)s %({set-cookie}o)s", {}, "text/plain [redacted]"),
    # Both kinds in one template.
    ('%a %(a)s "%r" %(s)s', {}, '127.0.0.1 curl/8.5.0 "GET /hello?a=1 HTTP/1.1" 200'),
]


# Named by template and position, not by the expected line, which holds this process's
# pid: parallel workers (pytest -n) must collect the same test ids.
@pytest.mark.parametrize(
    ("template", "fields", "expected"),
    CASES,
    ids=[f"{index}:{template}" for index, (template, _, _) in enumerate(CASES)],
)
def test_each_directive_and_atom_writes_its_field(
    template: str, fields: dict[str, Any], expected: str
) -> None:
    """A directive or atom writes exactly its field, escaped where a client controls it."""
    record = make_record(**{**BASE, **fields})
    assert Template(template, utc=True).format_batch([record]) == expected.encode() + b"\n"


def test_a_batch_writes_each_record_as_it_would_alone() -> None:
    """Formatting every case's record in one batch gives each record's own line."""
    template = Template(" ".join(sorted({template for template, _, _ in CASES})), utc=True)
    records = [make_record(**{**BASE, **fields}) for _, fields, _ in CASES]
    records.append(make_record(time=1_800_000_000.5))  # another second
    alone = b"".join(template.format_batch([record]) for record in records)
    assert template.format_batch(records) == alone
    assert template.format_batch([]) == b""


def test_allowed_headers_are_written_and_the_user_never_with_its_password() -> None:
    """allow_headers lets a sensitive field through; %u still shows only the user name."""
    record = make_record(**BASE)
    allowed = Template("%u %{Cookie}i %{Set-Cookie}o", allow_headers=["cookie", "Set-Cookie"])
    assert allowed.format_batch([record]) == b"alice session=abc id=1\n"
    with_user = Template("%u %{Authorization}i", allow_headers=["Cookie"])
    assert with_user.format_batch([record]) == b"alice [redacted]\n"
    authorization = Template("%{Authorization}i", allow_headers=["Authorization"])
    assert authorization.format_batch([record]) == basic(b"alice:secret") + b"\n"


@pytest.mark.parametrize("utc", [False, True])
@SETTINGS
@given(st.lists(RECORDS, max_size=8))
def test_gunicorn_default_template_writes_exactly_the_combined_format(
    utc: bool, records: list[Record]
) -> None:
    """gunicorn's default template gives byte for byte the combined line, whatever the input."""
    combined = ApacheFormat(combined=True, utc=utc)
    assert Template(GUNICORN_DEFAULT, utc=utc).format_batch(records) == combined.format_batch(
        records
    )


# Every client-controlled field, each quoted, then the unquoted client and user.
HOSTILE_TEMPLATE = (
    '"%m" "%U" "%q" "%H" "%{Referer}i" "%{X-Custom}i" "%{X-Out}o" "%(q)s" "%(a)s" %h %u'
)
QUOTED = rb'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\x[0-9a-f]{2})*)"'
UNQUOTED = rb"((?:[\x21\x23-\x5b\x5d-\x7e]|\\x[0-9a-f]{2})+)"
HOSTILE_LINE = re.compile(b" ".join([QUOTED] * 9 + [UNQUOTED] * 2))
HOSTILE_RECORDS = st.builds(
    lambda record, custom, out, user: record._replace(
        request_headers=[
            *record.request_headers,
            (b"X-Custom", custom),
            (b"Authorization", basic(user + b":pw")),
        ],
        response_headers=[(b"X-Out", out)],
    ),
    RECORDS,
    RAW,
    RAW,
    RAW.map(lambda user: user.replace(b":", b"") or b"u"),
)


@SETTINGS
@given(st.lists(HOSTILE_RECORDS, max_size=8), st.lists(CLEAN_RECORDS, max_size=4))
def test_hostile_bytes_never_break_a_line_or_a_field_and_unescape_back(
    hostile: list[Record], clean: list[Record]
) -> None:
    """Any bytes in any field keep one line per record, its quotes, and reverse exactly."""
    records = hostile + clean
    data = Template(HOSTILE_TEMPLATE).format_batch(records)
    for line, record in zip(lines_of(data, len(records)), records, strict=True):
        match = HOSTILE_LINE.fullmatch(line)
        assert match, line
        headers = dict((name.lower(), value) for name, value in record.request_headers)
        response_headers = dict(record.response_headers)
        user = b"-"
        if b"authorization" in headers:
            user = base64.b64decode(headers[b"authorization"][6:]).partition(b":")[0]
        expected = [
            text_bytes(record.method),
            record.path,
            b"?" + record.query if record.query else b"",
            text_bytes(record.protocol),
            headers.get(b"referer", b"-"),
            headers.get(b"x-custom", b"-"),
            response_headers.get(b"X-Out", b"-"),
            record.query,
            headers.get(b"user-agent", b"-"),
            text_bytes(record.client) if record.client else b"-",
            user,
        ]
        assert list(map(unescape, match.groups())) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("%h %x", "unknown directive %x at position 3"),
        ('%h "%(zz)s"', "unknown atom %(zz)s at position 4"),
        ("%(h)d", "%(h)d (atoms are %(name)s) at position 0"),
        ("%h %{User-Agent", "an unterminated %{ at position 3"),
        ("%h %(h", "an unterminated %( at position 3"),
        ("%h 100%", "a lone % ends the template (write %% for a percent sign) at position 6"),
        ("%{}e", "%{}e (it needs a name: %{REMOTE_USER}e) at position 0"),
        ("%({}n)s", "%{}n (it needs a name: %{user}n) at position 0"),
        ("%{color}x", "%{color}x (a record's extras are route, trace_id, span_id"),
        ("%{X Y}i", "'X Y' is not a header field name"),
        ("%{end:%H}t", "%{end:%H}t (records hold when a request was received: use begin:)"),
        ("%<s", "unknown directive %< at position 0"),
    ],
)
def test_an_unsupported_directive_is_refused_at_construction(template: str, message: str) -> None:
    """The error names the directive and its position, and lists what templates support."""
    with pytest.raises(ConfigurationError) as raised:
        Template(template)
    assert message in str(raised.value)
    assert "templates support Apache directives %% %a" in str(raised.value)
    assert "gunicorn atoms %(a)s" in str(raised.value)


@pytest.mark.parametrize("line_break", ["\n", "\r", "\x85", "\u2028"])
def test_a_line_break_in_the_template_is_refused(line_break: str) -> None:
    """A template that would write a record over two lines is refused."""
    with pytest.raises(ConfigurationError, match="holds a line break"):
        Template(f"%h{line_break}%s")


def test_allow_headers_must_be_a_list_not_one_name() -> None:
    """A lone string would allow its single characters as header names, not the header."""
    with pytest.raises(ConfigurationError, match=r"write \['Cookie'\]"):
        Template("%{Cookie}i", allow_headers="Cookie")


def test_make_format_compiles_a_string_with_percent_as_a_template() -> None:
    """A format string with % is a template; an unknown name's error suggests one."""
    template = make_format("%h %>s", utc=True)
    assert isinstance(template, Template)
    assert template.format_batch([make_record()]) == b"127.0.0.1 200\n"
    with pytest.raises(ConfigurationError, match="or write a template such as"):
        make_format("apache", utc=True)


@pytest.mark.parametrize("text", ["", "plain text", 'caf\u00e9 "%%" \\ \t'])
def test_template_text_without_fields_is_written_as_it_is(text: str) -> None:
    """The template's own text, even a quote or a backslash, is written unescaped."""
    expected = text.replace("%%", "%").encode() + b"\n"
    assert Template(text).format_batch([make_record(), make_record()]) == expected * 2


# The atoms whose values gunicorn's own logger and boundlog write alike for plain
# requests (gunicorn does not escape; boundlog writes %(b)s as - for an empty body).
GUNICORN_ATOMS = (
    '%(h)s %(l)s %(u)s "%(r)s" %(s)s %(B)s %(m)s %(U)s %(q)s %(H)s %(p)s "%(f)s" "%(a)s" '
    '"%({x-request-id}i)s"'
)
# Authorization values gunicorn's glogging reads a user from, or does not.
AUTHORIZATIONS = {
    "basic": basic(b"alice:secret"),
    "lower-case-scheme": b"basic " + base64.b64encode(b"bob:pw"),
    "colon-in-password": basic(b"carol:p:w"),
    "empty-user": basic(b":pw"),
    "bearer": b"Bearer abc.def",
    "not-base64": b"Basic !!!",
    "absent": None,
}


def _gunicorn_lines(logger_class: str, tmp_path: Path) -> tuple[list[bytes], set[int]]:
    """The lines gunicorn writes with ``logger_class`` for one request per Authorization
    value, and the pids of its workers."""
    log_path = tmp_path / f"{logger_class}.log"
    command = gunicorn_command(
        "--access-logfile", str(log_path), "--access-logformat", GUNICORN_ATOMS,
        logger_class=logger_class,
    )  # fmt: skip
    with running_server(command, {}, tmp_path / f"{logger_class}.out") as server:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            for name, authorization in AUTHORIZATIONS.items():
                headers = {"User-Agent": "t/1", "Referer": "http://r/", "X-Request-ID": name}
                if authorization is not None:
                    headers["Authorization"] = authorization.decode()
                client.get(f"/bytes/3?case={name}", headers=headers)
        workers = set(group_processes(server.process.pid)) - {server.process.pid}
        stop_gracefully(server)
    return read_log_lines(log_path), workers


def test_gunicorn_atoms_are_written_as_gunicorn_writes_them(tmp_path: Path) -> None:
    """Real gunicorn with its own logger and with boundlog's, the same template of atoms:
    the same lines, the Basic user in %(u)s (- when absent, not Basic or undecodable) and
    a worker's <pid> in %(p)s."""
    lines: dict[str, list[bytes]] = {}
    for logger_class in ("gunicorn.glogging.Logger", "boundlog.gunicorn.Logger"):
        written, workers = _gunicorn_lines(logger_class, tmp_path)
        pids = {int(pid) for pid in re.findall(rb" <(\d+)> ", b"\n".join(written))}
        assert pids
        assert pids <= workers, (pids, workers)
        lines[logger_class] = sorted(re.sub(rb" <\d+> ", b" <pid> ", line) for line in written)
    assert lines["boundlog.gunicorn.Logger"] == lines["gunicorn.glogging.Logger"]
    users = {line.split(b" ")[2] for line in lines["boundlog.gunicorn.Logger"]}
    assert users == {b"alice", b"bob", b"carol", b"-"}


TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_extras_directives_write_what_the_record_learnt() -> None:
    """%{route}x, %{trace_id}x, %{span_id}x, %{completed}x, %{bytes_received}x (and
    Apache's %I), %{close_code}x, and server variables %{NAME}e or %({NAME}e)s: ``-``
    where unknown; the template says what it reads, so that integrations learn it."""
    template = Template(
        "%U %{route}x %{trace_id}x %{span_id}x %{completed}x %I %{close_code}x "
        "%{REMOTE_USER}e %({tenant}e)s %({user}n)s"
    )
    assert template.reads_extras == {
        "route", "trace", "completed", "bytes_received", "close_code", "environ",
    }  # fmt: skip
    assert template.environ_names == {"REMOTE_USER", "tenant"}
    assert template.reads_notes
    assert template.request_header_names == {b"traceparent"}
    learnt = Extras(
        route="/items/{id}", trace=(1, 2), completed=True, bytes_received=5, close_code=1001,
        environ={"REMOTE_USER": "ada", "tenant": 7},
    )  # fmt: skip
    records = [
        make_record(extras=learnt, notes={"user": "x"}),
        make_record(
            request_headers=[(b"traceparent", TRACEPARENT)], extras=Extras(completed=False)
        ),
        make_record(),
    ]
    assert template.format_batch(records).decode().splitlines() == [
        f"/hello /items/{{id}} {'0' * 31}1 {'0' * 15}2 true 5 1001 ada 7 x",
        "/hello - 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7 false - - - - -",
        "/hello - - - - - - - - -",
    ]


def test_a_route_or_variable_from_the_application_is_escaped() -> None:
    hostile = 'a"b\nc\x00'
    template = Template("%{route}x %{v}e")
    line = template.format_batch(
        [make_record(extras=Extras(route=hostile, environ={"v": hostile}))]
    )
    assert line.count(b"\n") == 1
    assert line.endswith(b"\n")
    assert [unescape(field) for field in line[:-1].split(b" ")] == [hostile.encode()] * 2


@pytest.mark.parametrize(
    ("completed", "protocol", "asked", "answered", "status"),
    [
        (False, "HTTP/1.1", None, None, "X"),
        (True, "HTTP/1.1", None, None, "+"),
        (True, "HTTP/1.1", b"close", None, "-"),
        (True, "HTTP/1.1", None, "Close", "-"),
        (True, "HTTP/1.1", b"keep-alive, Upgrade", None, "+"),
        (True, "HTTP/1.0", None, None, "-"),
        (True, "HTTP/1.0", b"Keep-Alive", None, "+"),
        (True, "HTTP/2", None, None, "+"),
        (None, "HTTP/1.1", None, None, "-"),
    ],
)
def test_connection_status_is_apaches_percent_x(
    completed: bool | None, protocol: str, asked: bytes | None, answered: Any, status: str
) -> None:
    """X: aborted before the response completed; +: the connection may stay open; -: it
    closes, or nobody said whether the response completed."""
    template = Template("%X")
    assert template.reads_extras == {"completed"}
    record = make_record(
        protocol=protocol,
        request_headers=[] if asked is None else [(b"connection", asked)],
        response_headers=[] if answered is None else [("Connection", answered)],
        extras=None if completed is None else Extras(completed=completed),
    )
    assert template.format_batch([record]) == status.encode() + b"\n"
