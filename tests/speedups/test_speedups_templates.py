"""The C core's log templates (csrc/formats/template.c) against the pure-Python reference: the
same bytes.

``Template.format_batch_python`` defines a template's line; the C ``format_template``
must give the same bytes for every template and batch it handles, with every option
(``utc``, ``allow_headers``), and hand back (None) every batch it does not, which the
template then formats in Python.  The leak and thread tests of the C formats, templates
among them, are in tests/speedups/test_speedups.py.
"""

from __future__ import annotations

import base64
import os
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import make_record
from _strategies import (
    DURATIONS,
    ENVIRON_NAMES,
    JSON_TIMES,
    LATIN1,
    ORDINARY_EXTRAS,
    ORDINARY_VALUES,
    RAW,
    TEXT,
    TRACEPARENTS,
    VALUES,
    compared,
    compared_packed,
    hostile_records,
    outcome,
    packable_records,
)
from boundlog import ConfigurationError, Extras, Record, Template, _core
from boundlog.formats._templates import (
    _APACHE,
    _C_CODE,
    _EPOCH_UNITS,
    _EXTRAS_DIRECTIVES,
    _GUNICORN,
)

needs_c = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)

# The names of the notes templates show (the records' notes hold them).
NOTE_NAMES = ["user", "tenant", "caf\xe9"]
# The header fields templates name: plain, sensitive, CGI's two unprefixed ones.
HEADER_NAMES = ["X-Request-ID", "Referer", "User-Agent", "Cookie", "Set-Cookie",
                "Authorization", "Proxy-Authorization", "Content-Type", "Accept"]  # fmt: skip
# strftime formats: directives, %z (the clock's own offset), a literal %%z, quotes and
# backslashes the clock escapes, non-ASCII.
STRFTIME = st.sampled_from(
    ["%Y-%m-%d", "%H:%M:%S %z", "%%z", "begin:%d/%b/%Y", '"%a"\\', "caf\xe9 %j", "%s", ""]
)
DIRECTIVES = st.one_of(
    st.sampled_from([f"%{name}" for name in _APACHE]),
    st.sampled_from([f"%({name})s" for name in _GUNICORN]),
    st.sampled_from(HEADER_NAMES).flatmap(
        lambda name: st.sampled_from(
            [f"%{{{name}}}i", f"%{{{name}}}o", f"%({{{name.lower()}}}i)s", f"%({{{name}}}o)s"]
        )
    ),
    st.sampled_from([*_EPOCH_UNITS, *(f"begin:{unit}" for unit in _EPOCH_UNITS)]).map(
        lambda unit: f"%{{{unit}}}t"
    ),
    STRFTIME.map(lambda format: f"%{{{format}}}t"),
    st.sampled_from([f"%{{{name}}}x" for name in _EXTRAS_DIRECTIVES]),
    # The variables and notes records hold, one none does, and a name with a space.
    st.sampled_from([*ENVIRON_NAMES, "absent"]).flatmap(
        lambda name: st.sampled_from([f"%{{{name}}}e", f"%({{{name}}}e)s"])
    ),
    st.sampled_from([*NOTE_NAMES, "absent", "a b"]).flatmap(
        lambda name: st.sampled_from([f"%{{{name}}}n", f"%({{{name}}}n)s"])
    ),
    st.just("%%"),
)
# Template text: quotes, backslashes, percent signs (as %%), spaces, non-ASCII, a lone
# surrogate; never a line break (a ConfigurationError).
TEMPLATE_TEXT = st.one_of(
    st.sampled_from(['"', " ", "\\", "[", "-", "?", "\xe9", "\ud800", "\U0001f600"]),
    TEXT.filter(lambda text: len(f"-{text}-".splitlines()) == 1).map(
        lambda text: text.replace("%", "%%")
    ),
)
TEMPLATES = st.lists(st.one_of(DIRECTIVES, TEMPLATE_TEXT), max_size=14).map("".join)
OPTIONS = st.fixed_dictionaries(
    {"utc": st.booleans()},
    optional={
        "allow_headers": st.lists(
            st.sampled_from(["Cookie", "Set-Cookie", "Authorization", "Proxy-Authorization"])
        )
    },
)

# Basic credentials, well-formed and not: odd schemes, spacing, padding, characters
# base64 skips, no colon, an empty user, hostile bytes in the user name.
USERS = st.one_of(st.sampled_from([b"alice", b"", b"a b", b'"\\\n\xff']), st.binary(max_size=8))
CREDENTIALS = st.builds(
    lambda scheme, user, colon, password, damage: (
        scheme + base64.b64encode(user + colon + password) + damage
    ),
    st.sampled_from([b"Basic ", b"basic ", b"BASIC  ", b" Basic\t", b"Basic\t", b"Bearer ", b""]),
    USERS,
    st.sampled_from([b":", b""]),
    st.binary(max_size=6),
    st.sampled_from([b"", b"=", b"==", b" ", b"\n", b"!", b"A", b"AB", b"\xff", b" x"]),
)
AUTHORIZATIONS = st.one_of(
    CREDENTIALS,
    CREDENTIALS.map(lambda value: value.decode("latin-1")),
    st.sampled_from(
        [b"Basic", b"Basic ", b"Basic ====", b"Basic YQ", b"Basic YWI6", "Basic \u20ac"]
    ),
    VALUES,
)
NAMES = st.sampled_from(
    [b"x-request-id", b"X-Request-ID", "X-REQUEST-ID", b"referer", "Referer", b"user-agent",
     b"cookie", "COOKIE", b"set-cookie", b"proxy-authorization", b"content-type",
     "Content-Type", b"accept", b"host", b"x-request-id\x00", "\u0130", b"", b"traceparent",
     "Traceparent"]
)  # fmt: skip
AUTHORIZATION_NAMES = st.sampled_from([b"authorization", b"Authorization", "AUTHORIZATION"])
# Connection values (%X): its tokens in any case and spacing, str.strip()'s non-ASCII
# whitespace, a sign that lower-cases into ASCII only outside latin-1 (the Kelvin sign).
CONNECTION_NAMES = st.sampled_from([b"connection", b"Connection", "CONNECTION"])
CONNECTION_TEXT = st.lists(
    st.sampled_from(
        ["close", "Close", "keep-alive", "Keep-Alive", " KEEP-ALIVE ", "upgrade", "",
         "\x85close\xa0", "\x1cclose", "\u212aeep-alive", "clos\xe9", "close\x00"]
    ),
    max_size=3,
).map(",".join)  # fmt: skip
CONNECTIONS = st.one_of(
    CONNECTION_TEXT, CONNECTION_TEXT.map(lambda text: text.encode("utf-8")), VALUES
)
PAIRS = st.lists(
    st.one_of(
        st.tuples(NAMES, VALUES),
        st.tuples(AUTHORIZATION_NAMES, AUTHORIZATIONS),
        st.tuples(CONNECTION_NAMES, CONNECTIONS),
    ),
    max_size=6,
)
ENVIRONS = st.dictionaries(
    st.sampled_from(
        ["HTTP_X_REQUEST_ID", "HTTP_REFERER", "HTTP_USER_AGENT", "HTTP_COOKIE", "CONTENT_TYPE",
         "HTTP_CONTENT_TYPE", "HTTP_AUTHORIZATION", "HTTP_SET_COOKIE", "REMOTE_ADDR",
         "HTTP_CONNECTION", "HTTP_TRACEPARENT"]
    ),
    st.none() | VALUES | AUTHORIZATIONS | CONNECTIONS,
)  # fmt: skip
HEADERS = st.one_of(PAIRS, PAIRS.map(tuple), ENVIRONS, st.just(()))
RECORDS = hostile_records(HEADERS)
PLAIN_HEADERS = [
    (b"host", b"example.test"), (b"referer", b"https://example.test/"),
    (b"user-agent", b"curl/8.0"), (b"x-request-id", b"abc"),
    (b"authorization", b"Basic YWxpY2U6c2VjcmV0"), (b"authorization", b"Bearer t"),
    (b"cookie", b"s=1"),
]  # fmt: skip
PLAIN_RECORDS = st.builds(
    make_record,
    time=st.floats(min_value=1.7e9, max_value=1.7e9 + 3),
    duration=st.floats(min_value=0, max_value=30),
    client=st.sampled_from(["127.0.0.1", "::1", None]),
    status=st.sampled_from([101, 200, 204, 304, 404]),
    bytes_sent=st.integers(min_value=0, max_value=10**6),
    method=st.sampled_from(["GET", "HEAD"]),
    query=st.sampled_from([b"", b"a=1"]),
    request_headers=st.lists(st.sampled_from(PLAIN_HEADERS), max_size=5),
    response_headers=st.sampled_from([[], [(b"content-type", b"text/plain")]]),
)

# gunicorn's default access_log_format (gunicorn.config.AccessLogFormat.default), the
# templates README.md and docs/ show, and those error messages suggest.
GUNICORN_DEFAULT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
EPOCHS = "%{sec}t %{msec}t %{usec}t %{msec_frac}t %{usec_frac}t %{begin:%H:%M:%S}t"
DOCUMENTED = [
    GUNICORN_DEFAULT,
    '%h %t "%r" %>s %b %D "%{X-Request-ID}i"',
    "%a %{Authorization}i",
    '%(h)s "%(r)s" %(s)s %(B)s %(D)s "%({x-request-id}i)s"',
    '%a %t "%r" %s %b "%{Referer}i" "%{User-Agent}i"',
    '%a %t "%r" %s %b %Tf "%{X-Request-ID}i"',
    '%a %t "%r" %s %b %T %Tf %D %P %{X-Request-ID}i %{Content-Type}o',
    "%h %a %l %u %t %{%Y-%m-%d}t %r %m %U %q %H %s %>s %b %B %D %T %P %{X}i %{X}o %%",
    "%(h)s %(l)s %(u)s %(t)s %(r)s %(m)s %(U)s %(q)s %(H)s %(s)s %(B)s %(b)s %(f)s %(a)s "
    "%(T)s %(M)s %(D)s %(L)s %(p)s %({x-request-id}i)s %({content-type}o)s",
    EPOCHS,
    '%h %t "%r" %>s %b %D',
    '%a %t "%r" %s %b %Tf',
    '%(h)s "%(r)s" %(s)s %(D)s',
]
# The documented templates with a time in their lines.
TIME_TEMPLATES = [
    text
    for text in DOCUMENTED
    if {op[0] for op in Template(text)._ops} & {_C_CODE[kind] for kind in ("time", "epoch")}
]


def template(text: str, options: dict[str, Any]) -> Template:
    try:
        return Template(text, **options)
    except ConfigurationError:
        assume(False)  # a strftime format this platform refuses
        raise


def c_lines(fmt: Template, records: list[Record]) -> bytes | None:
    assert _core.format_template is not None
    return _core.format_template(records, fmt._ops, os.getpid())


def check(fmt: Template, records: list[Record]) -> Any:
    return compared(fmt, lambda batch: c_lines(fmt, batch), records)


@needs_c
@settings(max_examples=examples(600), suppress_health_check=[HealthCheck.too_slow])
@given(TEMPLATES, st.lists(RECORDS, max_size=8), OPTIONS)
def test_c_and_python_give_the_same_bytes(
    text: str, records: list[Record], options: dict[str, Any]
) -> None:
    check(template(text, options), records)


@needs_c
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(st.sampled_from(DOCUMENTED), TEMPLATES),
    st.lists(PLAIN_RECORDS, max_size=8),
    RECORDS,
    st.data(),
    OPTIONS,
)
def test_a_batch_mixing_plain_and_hostile_records(
    text: str, plain: list[Record], hostile: Record, data: st.DataObject, options: dict[str, Any]
) -> None:
    records = list(plain)
    records.insert(data.draw(st.integers(min_value=0, max_value=len(records))), hostile)
    check(template(text, options), records)


@needs_c
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(DOCUMENTED), st.lists(PLAIN_RECORDS, min_size=1, max_size=8), OPTIONS)
def test_documented_templates_format_every_ordinary_batch_in_c(
    text: str, records: list[Record], options: dict[str, Any]
) -> None:
    """What servers hand over is formatted in C (bytes, not None), never handed back."""
    fmt = Template(text, **options)
    assert c_lines(fmt, records) == fmt.format_batch_python(records)


# Templates showing every field of a record's extras, %X and %I, variables and notes.
EXTRAS_TEMPLATES = [
    '%h %t "%r" %>s %b %X %I %{route}x %{trace_id}x %{span_id}x %{completed}x '
    "%{bytes_received}x %{close_code}x",
    '%a "%r" %s %{REMOTE_USER}e %({user}e)s %{x}e %{user}n %({tenant}n)s %{absent}e %{absent}n',
    "%{caf\xe9}n %X %{Connection}i",
]
CONNECTION_HEADERS = [
    (b"connection", b"close"), (b"Connection", b"Keep-Alive"), ("CONNECTION", "upgrade, close"),
    (b"connection", b"keep-alive, Upgrade"),
]  # fmt: skip
ORDINARY_NOTES = st.none() | st.dictionaries(
    st.sampled_from(NOTE_NAMES), ORDINARY_VALUES, min_size=1, max_size=3
)


@needs_c
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(EXTRAS_TEMPLATES),
    st.lists(
        st.tuples(
            PLAIN_RECORDS,
            st.sampled_from(["HTTP/1.0", "HTTP/1.1", "HTTP/2"]),
            st.lists(st.sampled_from(CONNECTION_HEADERS), max_size=2),
            st.sampled_from([[], [(b"connection", b"close")], [(b"Connection", b"keep-alive")]]),
            ORDINARY_NOTES,
            ORDINARY_EXTRAS,
        ),
        min_size=1,
        max_size=8,
    ),
)
def test_extras_variables_and_notes_of_every_usual_kind_are_formatted_in_c(
    text: str, records_and_more: list[tuple[Any, ...]]
) -> None:
    """What integrations learn and applications add, with the Connection fields servers
    hand over, is formatted in C, never handed back."""
    records = [
        record._replace(
            protocol=protocol,
            request_headers=[*record.request_headers, *connection],
            response_headers=[*record.response_headers, *response_connection],
            notes=notes,
            extras=extras,
        )
        for record, protocol, connection, response_connection, notes, extras in records_and_more
    ]
    fmt = Template(text)
    assert c_lines(fmt, records) == fmt.format_batch_python(records)


@needs_c
@pytest.mark.parametrize(
    ("completed", "protocol", "sent", "answered", "status"),
    [
        (None, "HTTP/1.1", [], [], b"-"),
        (False, "HTTP/1.1", [], [], b"X"),
        (True, "HTTP/1.1", [], [], b"+"),
        (True, "HTTP/1.0", [], [], b"-"),
        (True, "HTTP/1.0", [(b"connection", b" Keep-Alive\x85")], [], b"+"),
        (True, "HTTP/1.1", [], [(b"connection", b"upgrade,CLOSE")], b"-"),
        (True, "HTTP/2", [("Connection", "\u212aeep-alive")], [], b"+"),
        (True, None, [], [], b"+"),
    ],
)
def test_the_connection_status(
    completed: bool | None, protocol: str | None, sent: Any, answered: Any, status: bytes
) -> None:
    """%X: X when the response did not complete, + when the connection may stay open,
    - when it closes or nobody knows: in C as in Python."""
    record = make_record(
        protocol=protocol,  # type: ignore[arg-type]
        request_headers=sent,
        response_headers=answered,
        extras=Extras(completed=completed),
    )
    fmt = Template("%X")
    assert c_lines(fmt, [record]) == fmt.format_batch_python([record]) == status + b"\n"


@needs_c
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(
    TEMPLATES,
    st.lists(
        st.builds(
            make_record,
            client=st.none() | TEXT,
            method=TEXT,
            protocol=TEXT,
            path=RAW,
            query=RAW,
            duration=DURATIONS.filter(lambda d: type(d) is float),
            request_headers=PAIRS,
            response_headers=PAIRS,
        ),
        min_size=1,
        max_size=6,
    ),
    OPTIONS,
)
def test_c_formats_hostile_text_and_bytes(
    text: str, records: list[Record], options: dict[str, Any]
) -> None:
    """Hostile bytes, surrogates, control characters, non-ASCII, None, NaN and negative
    durations, repeated header fields, Basic credentials of every shape: all in C."""
    fmt = template(text, options)
    # Not a duration whose microseconds pass 64 bits (left to Python: it writes them).
    assume(not any(1e12 <= record.duration < float("inf") for record in records))
    assert check(fmt, records) is not None


@needs_c
@settings(max_examples=examples(300))
@given(st.lists(AUTHORIZATIONS, min_size=1, max_size=6), st.booleans())
@example(
    [b"Basic YWxpY2U6c2VjcmV0", b" bAsIc  YWxpY2U6c2VjcmV0\t", b"Basic YWxpY2U", b"Basicx"], False
)
def test_the_user_of_basic_credentials(values: list[bytes | str], allowed: bool) -> None:
    fmt = Template(
        '%u %{Authorization}i "%(u)s"', allow_headers=["Authorization"] if allowed else []
    )
    records = [make_record(request_headers=[(b"authorization", value)]) for value in values]
    assert check(fmt, records) is not None


@needs_c
@settings(max_examples=examples(300))
@given(st.lists(JSON_TIMES, min_size=1, max_size=6), st.booleans(), st.sampled_from(TIME_TEMPLATES))
@example([1_600_000_000.9999995, 1_600_000_000.25], True, EPOCHS)
@example([-0.9999996, -1.5, 0.0005, -0.0], False, EPOCHS)
def test_times(times: list[float], utc: bool, text: str) -> None:
    """Times, epoch units and their fractions, negative ones and a second's end: as Python."""
    fmt = Template(text, utc=utc)
    check(fmt, [make_record(time=when) for when in times])


@needs_c
@settings(max_examples=examples(300))
@given(st.lists(DURATIONS, min_size=1, max_size=6))
@example([0.0, -0.0, 0.4999994e-6, 0.5e-6, 1e-6, 2.5, float("nan"), -1.0, float("inf")])
def test_durations(durations: list[float]) -> None:
    """%D %T %Tf %(M)s: whole units of the microseconds, "-" unless in [0, inf)."""
    fmt = Template("%D %T %Tf %(M)s %(L)s")
    c = check(fmt, [make_record(duration=duration) for duration in durations])
    readable = all(type(d) is float and (not 0 <= d < float("inf") or d < 1e12) for d in durations)
    assert c is not None or not readable


# Each batch the C core leaves to Python for a template showing extras, variables and
# notes, and why.
EXTRAS_HANDED_BACK = {
    "extras of another size": make_record(extras=tuple(Extras())[:-1]),  # type: ignore[arg-type]
    "extras as a list": make_record(extras=list(Extras())),  # type: ignore[arg-type]
    "a route past 64 bits": make_record(extras=Extras(route=2**64)),  # type: ignore[arg-type]
    "a count that is a list": make_record(extras=Extras(bytes_received=[1])),  # type: ignore[arg-type]
    "a variable that is a tuple": make_record(extras=Extras(environ={"REMOTE_USER": (1,)})),
    "an environ not a dict": make_record(
        extras=Extras(environ=MappingProxyType({"REMOTE_USER": "ada"}))
    ),
    "notes not a dict": make_record(notes=MappingProxyType({"user": "ada"})),
    "a note that is an int subclass": make_record(notes={"user": type("N", (int,), {})(1)}),
    "a protocol of bytes, completed": make_record(
        protocol=b"HTTP/1.0",  # type: ignore[arg-type]
        extras=Extras(completed=True),
    ),
    "Connection headers of None": make_record(response_headers=None),  # type: ignore[arg-type]
    "traceparent headers of None, a span": make_record(
        request_headers=None,  # type: ignore[arg-type]
        extras=Extras(trace=(1, 2)),
    ),
}


@needs_c
@pytest.mark.parametrize("why", EXTRAS_HANDED_BACK)
def test_what_c_does_not_read_of_extras_and_notes_is_left_to_python(why: str) -> None:
    fmt = Template("%X %I %{route}x %{span_id}x %{REMOTE_USER}e %{user}n")
    records: Any = [make_record(), EXTRAS_HANDED_BACK[why]]
    assert c_lines(fmt, records) is None
    assert outcome(fmt.format_batch, records) == outcome(fmt.format_batch_python, records)


# Each batch the C core leaves to Python, and why.
HANDED_BACK = {
    "a status past 64 bits": make_record(status=2**64),
    "a byte count past 64 bits": make_record(bytes_sent=-(2**64)),
    "a bool status": make_record(status=True),
    "a duration too big for a float": make_record(duration=10**400),
    "a duration of another type": make_record(duration="1"),
    "a duration past 64 bits of microseconds": make_record(duration=1e300),
    "bytes for the client": make_record(client=b"127.0.0.1"),
    "text for the path": make_record(path="/"),
    "no method": make_record(method=None),
    "a str subclass": make_record(method=type("Method", (str,), {})("GET")),
    "a time neither float nor int": make_record(time=None),
    "NaN": make_record(time=float("nan")),
    "a time the clock refuses": make_record(time=2**62),
    "a header value of None": make_record(request_headers=[(b"referer", None)]),
    "a pair as a list": make_record(request_headers=[[b"referer", b"x"]]),
    "a Mapping, not a dict": make_record(request_headers=type("M", (dict,), {})()),
    "headers of None": make_record(request_headers=None),  # type: ignore[arg-type]
    "a record too short": tuple(make_record())[:-1],
}


@needs_c
@pytest.mark.parametrize("why", HANDED_BACK)
def test_what_c_does_not_read_is_left_to_python(why: str) -> None:
    fmt = Template('%h %u %t %{sec}t "%r" %>s %b %D "%{Referer}i"', utc=True)
    records: Any = [make_record(), HANDED_BACK[why]]
    assert c_lines(fmt, records) is None
    assert outcome(fmt.format_batch, records) == outcome(fmt.format_batch_python, records)


@needs_c
def test_only_the_fields_a_template_shows_are_read() -> None:
    """A field no op reads may hold anything: the reference does not read it either."""
    record = make_record(method=None, duration="x", time=None, response_headers=None)  # type: ignore[arg-type]
    fmt = Template('%h "%U%q" %(s)s')
    assert c_lines(fmt, [record]) == fmt.format_batch_python([record])


@needs_c
def test_c_reads_any_sequence_of_records() -> None:
    fmt = Template(GUNICORN_DEFAULT)
    records = [make_record(), make_record(status=304, method="HEAD", client=None)]
    expected = fmt.format_batch_python(records)
    assert c_lines(fmt, records) == expected
    assert _core.format_template is not None
    assert _core.format_template(tuple(records), fmt._ops, os.getpid()) == expected
    assert c_lines(fmt, []) == b"" == fmt.format_batch([])
    header = (b"connection", "HTTP_CONNECTION")
    for ops in [
        ((99, 0, None),), ((0, 0, "text"),), ((9, 0, None),), [(0, 0, b"x")], ((0, 0),),
        # An index past Extras's fields, an id neither trace nor span, a header field of
        # another shape, a name that is not a str.
        ((_C_CODE["extra"], 6, None),), ((_C_CODE["trace"], 2, header),),
        ((_C_CODE["connection-status"], 0, (b"connection",)),),
        ((_C_CODE["environ"], 0, b"REMOTE_USER"),), ((_C_CODE["note"], 0, None),),
    ]:  # fmt: skip
        with pytest.raises(TypeError):
            _core.format_template(records, ops, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _core.format_template(records, fmt._ops)  # type: ignore[call-arg]


@needs_c
def test_the_pid_is_the_callers() -> None:
    fmt = Template("%P %(p)s")
    assert _core.format_template is not None
    assert _core.format_template([make_record()], fmt._ops, 42) == b"42 <42>\n"
    assert fmt.format_batch([make_record()]) == b"%d <%d>\n" % (os.getpid(), os.getpid())


@needs_c
@pytest.mark.parametrize("text", DOCUMENTED)
def test_documented_templates_take_the_c_path(text: str) -> None:
    """Plain records are formatted in C (bytes, not None), by format_batch too."""
    fmt = Template(text)
    records = [
        make_record(),
        make_record(client=None, referer=b"https://example.test/", query=b"a=1"),
        make_record(request_headers=[(b"authorization", b"Basic YWxpY2U6c2VjcmV0")]),
    ]
    data = c_lines(fmt, records)
    assert isinstance(data, bytes)
    assert data == fmt.format_batch(records) == fmt.format_batch_python(records)
    assert Template.format_batch is not Template.format_batch_python


def test_the_gunicorn_default_is_gunicorns() -> None:
    config = pytest.importorskip("gunicorn.config")
    assert config.AccessLogFormat.default == GUNICORN_DEFAULT


@needs_c
def test_the_traceparent_field_is_read_even_with_a_span() -> None:
    """The reference reads every record's traceparent field, span or not: headers it
    cannot read are left to it."""
    record = make_record(request_headers=None, extras=Extras(trace=(1, 2)))  # type: ignore[arg-type]
    fmt = Template("%{trace_id}x")
    assert c_lines(fmt, [record]) is None
    assert outcome(fmt.format_batch, [record]) == outcome(fmt.format_batch_python, [record])
    assert fmt.format_batch([record._replace(request_headers=[])]) == b"%032x\n" % 1


# Records of the shape the C hand-off packs (csrc/record/packed.c): hostile texts and
# bytes, every float time and duration, request header fields as bytes pairs (ASGI),
# str pairs (gunicorn's: names in any case) or the environ fields the WSGI paths pick.
PACKABLE_BYTES = st.sampled_from(
    [b"x-request-id", b"X-Request-ID", b"referer", b"user-agent", b"cookie", b"host",
     b"traceparent", b"Traceparent", b"connection", b"authorization", b"Authorization", b""]
)  # fmt: skip
BYTES_VALUES = st.one_of(
    RAW, CREDENTIALS, TRACEPARENTS.map(lambda value: value.encode()),
    CONNECTION_TEXT.map(lambda text: text.encode("latin-1", "replace")),
)  # fmt: skip
LATIN1_VALUES = st.one_of(
    LATIN1, CREDENTIALS.map(lambda value: value.decode("latin-1")), TRACEPARENTS,
    CONNECTION_TEXT.filter(lambda text: max(map(ord, text), default=0) < 256),
)  # fmt: skip
PACKABLE_HEADERS = st.one_of(
    st.lists(st.tuples(PACKABLE_BYTES, BYTES_VALUES), max_size=6),
    st.lists(
        st.tuples(PACKABLE_BYTES.map(lambda name: name.decode().upper()), LATIN1_VALUES),
        max_size=6,
    ).map(tuple),
    st.dictionaries(
        st.sampled_from(
            ["HTTP_X_REQUEST_ID", "HTTP_REFERER", "HTTP_AUTHORIZATION", "HTTP_TRACEPARENT",
             "HTTP_CONNECTION", "HTTP_USER_AGENT"]
        ),
        LATIN1_VALUES,
    ),
)  # fmt: skip
PACKABLE_RECORDS = packable_records(PACKABLE_HEADERS)


@needs_c
@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(st.sampled_from(DOCUMENTED + EXTRAS_TEMPLATES), TEMPLATES),
    st.lists(st.tuples(PACKABLE_RECORDS, st.booleans()), max_size=8),
    OPTIONS,
)
def test_packed_records_give_the_reference_lines(
    text: str, batch: list[tuple[Record, bool]], options: dict[str, Any]
) -> None:
    """The C hand-off queues a template's records packed: any mix of packed and unpacked
    records gives the reference's lines of the records, every directive included (the
    ones reading what a packed record never holds write what they write for None)."""
    fmt = template(text, options)
    c = compared_packed(fmt, lambda records: c_lines(fmt, records), batch)
    # Packed, every usual record is formatted in C, never handed back.
    ordinary = all(
        0 <= record.time < 4102444800.0
        and not (1e12 <= record.duration < float("inf"))
        and record.notes is None
        for record, _ in batch
    )
    if ordinary and text in DOCUMENTED + EXTRAS_TEMPLATES:
        assert c is not None


@needs_c
def test_gunicorns_default_line_of_its_own_headers_packs() -> None:
    """gunicorn hands over its request's header fields as pairs of str, names in upper
    case: such a record packs, and its line (the default template) is the reference's."""
    assert _core.speedups is not None
    record = make_record(
        request_headers=[("HOST", "example.test"), ("REFERER", "https://r.test/\xe9"),
                         ("USER-AGENT", 'curl "8"'), ("AUTHORIZATION", "Basic YWxpY2U6eA==")],
    )  # fmt: skip
    packed = _core.speedups.pack_record(record)
    assert packed is not None
    assert packed.record() == record
    fmt = Template(GUNICORN_DEFAULT)
    line = fmt.format_batch_python([record])
    assert c_lines(fmt, [packed]) == line  # type: ignore[list-item]
    assert b" alice [" in line
    assert b'"https://r.test/\\xe9" "curl \\x228\\x22"' in line
