"""The common, combined and JSON formats: one valid, reversible line per record, whatever the input."""

from __future__ import annotations

import json
import locale
import math
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _examples import examples
from _helpers import local_zone
from _records import apache_record, make_record, request_header
from boundlog import ConfigurationError, Record
from boundlog.capture._trace import trace_ids
from boundlog.formats._apache import FORMATS, make_format
from boundlog.formats._escape import unescape

# Apache's definitions, `%h %l %u %t "%r" %>s %b` and ` "%{Referer}i" "%{User-agent}i"`,
# with every field in boundlog's escaped form (see _escape).
QUOTED = rb"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\x[0-9a-f]{2})*"
UNQUOTED = rb"(?:[\x21\x23-\x5b\x5d-\x7e]|\\x[0-9a-f]{2})+"
MONTH = rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
COMMON = (
    rb"(?P<host>" + UNQUOTED + rb") (?P<ident>-) (?P<user>-) "
    rb"\[(?P<time>\d{2}/" + MONTH + rb"/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] "
    rb'"(?P<request>' + QUOTED + rb')" (?P<status>\d+) (?P<bytes>[1-9]\d*|-)'
)
COMBINED = COMMON + rb' "(?P<referer>' + QUOTED + rb')" "(?P<agent>' + QUOTED + rb')"'
LINE_PATTERNS = {"common": re.compile(COMMON), "combined": re.compile(COMBINED)}

JSON_FIELDS = [
    "time", "client", "method", "path", "query", "protocol", "status", "bytes_sent",
    "duration_ms", "referer", "user_agent", "request_id", "route", "trace_id", "span_id", "completed",
]  # fmt: skip
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(?:Z|[+-]\d{2}:\d{2})")

LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# Characters weighted towards those that break lines, quoting, fields or %-formatting.
SPECIAL = LINE_BREAKS + '"\\ %?-\x00\x7f\ud800\udc00\U0001f600'
TEXT = st.text(st.one_of(st.sampled_from(SPECIAL), st.characters(exclude_categories=())))
RAW = st.one_of(st.binary(), TEXT.map(lambda text: text.encode("utf-8", "surrogatepass")))
CLIENTS = st.one_of(
    st.none(),
    st.sampled_from(["", "127.0.0.1", "::1", "2001:db8::8a2e:370:7334", "/run/app.sock"]),
    TEXT,
)
RECORDS = st.builds(
    make_record,
    time=st.floats(min_value=0, max_value=4102444800.0),
    duration=st.floats(min_value=0, max_value=1e6),
    client=CLIENTS,
    method=TEXT,
    path=RAW,
    query=RAW,
    protocol=TEXT,
    status=st.integers(min_value=0, max_value=10**30),
    bytes_sent=st.integers(min_value=0, max_value=10**30),
    referer=st.none() | RAW,
    user_agent=st.none() | RAW,
)
# Records whose every field is printable ASCII without `"` and `\` (and without a space
# in the unquoted client): the fast path.
PLAIN = st.text(st.sampled_from(bytes(range(0x20, 0x7F)).translate(None, b'"\\').decode()))
CLEAN_RECORDS = st.builds(
    make_record,
    time=st.floats(min_value=1e9, max_value=2e9),
    duration=st.floats(min_value=0, max_value=10),
    client=st.none() | PLAIN.map(lambda text: text.replace(" ", "")),
    method=PLAIN,
    path=PLAIN.map(str.encode),
    query=PLAIN.map(str.encode),
    protocol=PLAIN,
    status=st.integers(min_value=100, max_value=599),
    bytes_sent=st.integers(min_value=0, max_value=10**9),
    referer=st.none() | PLAIN.map(str.encode),
    user_agent=st.none() | PLAIN.map(str.encode),
)
# Shared, loaded machines: no deadline, and slow generation of big records is expected.
SETTINGS = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# The reference line: 2000-10-10T20:55:36Z is 13:55:36 in Los Angeles (-0700, summer).
REFERENCE = apache_record(
    971211336.0, 0.0123, "127.0.0.1", "GET", b"/apache_pb.gif", b"", "HTTP/1.0", 200, 2326,
    b"http://www.example.com/start.html", b"Mozilla/4.08 [en] (Win98; I ;Nav)",
)  # fmt: skip
REFERENCE_COMMON = (
    b'127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326\n'
)
REFERENCE_COMBINED = (
    b'127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 '
    b'"http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"\n'
)
# 1700000000 is 2023-11-14T22:13:20Z, 14:13:20 in Los Angeles (-0800, winter).
NOVEMBER = apache_record(
    1700000000.25, 0.5, "10.1.2.3", "POST", b"/items", b"page=2", "HTTP/1.1", 201, 0, None, None
)


@pytest.fixture
def los_angeles() -> Iterator[None]:
    with local_zone("America/Los_Angeles"):
        yield


@pytest.fixture
def foreign_month_names() -> Iterator[None]:
    """Set LC_TIME to a locale whose month abbreviations are not English, or skip."""
    saved = locale.setlocale(locale.LC_TIME)
    for name in ("de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "es_ES.UTF-8"):
        try:
            locale.setlocale(locale.LC_TIME, name)
        except locale.Error:
            continue
        break
    else:
        pytest.skip("no locale with non-English month names is installed")
    try:
        assert time.strftime("%b", time.gmtime(REFERENCE.time)) != "Oct"
        yield
    finally:
        locale.setlocale(locale.LC_TIME, saved)


def text_bytes(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


def lines_of(data: bytes, count: int) -> list[bytes]:
    """Split a batch into lines, checking both ways of splitting agree on ``count``."""
    assert data.endswith(b"\n") or count == 0
    lines = data.split(b"\n")
    assert lines.pop() == b""
    assert len(lines) == count
    assert len(data.decode("ascii").splitlines()) == count
    return lines


def check_apache_line(line: bytes, record: Record, name: str) -> None:
    """The line matches Apache's definition and every field unescapes to the record's bytes."""
    match = LINE_PATTERNS[name].fullmatch(line)
    assert match, line
    assert unescape(match["host"]) == (text_bytes(record.client) if record.client else b"-")
    target = record.path + (b"?" + record.query if record.query else b"")
    request = text_bytes(record.method) + b" " + target + b" " + text_bytes(record.protocol)
    assert unescape(match["request"]) == request
    assert int(match["status"]) == record.status
    sent = _on_the_wire(record)
    assert match["bytes"] == (b"%d" % sent if sent else b"-")
    if name == "combined":
        for header, field in (
            (request_header(record, b"referer"), "referer"),
            (request_header(record, b"user-agent"), "agent"),
        ):
            assert unescape(match[field]) == (b"-" if header is None else header)


def strict_json(line: bytes) -> list[tuple[str, Any]]:
    """Parse a line as a strict parser would: no NaN, no lone surrogates, keys in order."""

    def reject(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    pairs: list[tuple[str, Any]] = json.loads(
        line, parse_constant=reject, object_pairs_hook=lambda pairs: pairs
    )
    for _, value in pairs:
        if isinstance(value, str):
            value.encode("utf-8")  # raises on a lone surrogate
    return pairs


def expected_json_text(value: str | None) -> str | None:
    """Text as it reads back: its UTF-8 bytes as expected_json_bytes reads them back."""
    return None if value is None else expected_json_bytes(text_bytes(value))


def expected_json_bytes(value: bytes | None) -> str | None:
    """Bytes as they read back: their UTF-8 text, or if they are not UTF-8 their bytes
    from 0x80 on as \\xhh; a backslash as \\x5c."""
    if value is None:
        return None
    value = value.replace(b"\\", b"\\x5c")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(chr(byte) if byte < 0x80 else "\\x%02x" % byte for byte in value)


def check_json_line(line: bytes, record: Record, utc: bool) -> None:
    """The line is strict JSON with the record's fields, named and ordered as documented."""
    assert line.isascii()
    pairs = strict_json(line)
    assert [key for key, _ in pairs] == JSON_FIELDS
    fields = dict(pairs)
    assert RFC3339.fullmatch(fields["time"])
    assert fields["time"].endswith("Z") == utc
    assert fields["client"] == expected_json_text(record.client)
    assert fields["method"] == expected_json_text(record.method)
    assert fields["protocol"] == expected_json_text(record.protocol)
    assert fields["path"] == expected_json_bytes(record.path)
    assert fields["query"] == expected_json_bytes(record.query)
    assert fields["referer"] == expected_json_bytes(request_header(record, b"referer"))
    assert fields["user_agent"] == expected_json_bytes(request_header(record, b"user-agent"))
    assert fields["request_id"] == expected_json_bytes(request_header(record, b"x-request-id"))
    assert fields["status"] == record.status
    assert fields["bytes_sent"] == _on_the_wire(record)
    assert math.isclose(fields["duration_ms"], record.duration * 1000, rel_tol=1e-9, abs_tol=5e-4)
    route = record.extras.route if record.extras else None
    assert fields["route"] == (expected_json_text(route) if isinstance(route, str) else route)
    ids = trace_ids(
        record.extras.trace if record.extras else None, request_header(record, b"traceparent")
    )
    assert (fields["trace_id"], fields["span_id"]) == (ids or (None, None))
    assert fields["completed"] == (record.extras.completed if record.extras else None)


@pytest.mark.parametrize("name", ["common", "combined"])
@SETTINGS
@given(st.lists(RECORDS, max_size=8), st.booleans())
def test_apache_lines_match_the_definition_and_reverse(
    name: str, records: list[Record], utc: bool
) -> None:
    """Any bytes or text in any field give one strictly valid line per record that reverses."""
    data = make_format(name, utc=utc).format_batch(records)
    for line, record in zip(lines_of(data, len(records)), records, strict=True):
        check_apache_line(line, record, name)


@pytest.mark.parametrize("name", ["common", "combined"])
@SETTINGS
@given(st.lists(CLEAN_RECORDS, min_size=1, max_size=8))
def test_apache_clean_batches_match_the_definition(name: str, records: list[Record]) -> None:
    """Batches that need no escaping (the fast path) give the same valid, reversible lines."""
    data = make_format(name, utc=True).format_batch(records)
    for line, record in zip(lines_of(data, len(records)), records, strict=True):
        check_apache_line(line, record, name)


@pytest.mark.parametrize("name", FORMATS)
@SETTINGS
@given(st.lists(CLEAN_RECORDS, max_size=8), RECORDS, st.data())
def test_mixed_batch_equals_its_lines_formatted_alone(
    name: str, clean: list[Record], dirty: Record, data: st.DataObject
) -> None:
    """One record needing escaping in a clean batch changes no other line."""
    records = list(clean)
    records.insert(data.draw(st.integers(min_value=0, max_value=len(records))), dirty)
    fmt = make_format(name, utc=True)
    assert fmt.format_batch(records) == b"".join(fmt.format_batch([r]) for r in records)
    if name in LINE_PATTERNS:
        lines = lines_of(fmt.format_batch(records), len(records))
        for line, record in zip(lines, records, strict=True):
            check_apache_line(line, record, name)


@pytest.mark.parametrize("utc", [False, True])
@SETTINGS
@given(st.lists(RECORDS, max_size=8))
def test_json_lines_are_strict_json_with_every_field(utc: bool, records: list[Record]) -> None:
    """Any input gives one ASCII, strictly valid JSON object per record with its exact fields."""
    data = make_format("json", utc=utc).format_batch(records)
    for line, record in zip(lines_of(data, len(records)), records, strict=True):
        check_json_line(line, record, utc)


@SETTINGS
@given(st.lists(st.text(), min_size=1, max_size=4))
def test_json_round_trips_valid_utf8_exactly(texts: list[str]) -> None:
    """Valid UTF-8 in every bytes field and any Unicode text read back exactly (a
    backslash as \\x5c, which unescape reverses)."""
    records = [
        apache_record(
            1e9, 0.0, text, text, text.encode(), text.encode(), text, 200, 1, text.encode(), b""
        )
        for text in texts
    ]
    data = make_format("json", utc=True).format_batch(records)
    for line, text in zip(lines_of(data, len(records)), texts, strict=True):
        fields = json.loads(line)
        for name in ("client", "method", "path", "query", "protocol", "referer"):
            assert fields[name] == text.replace("\\", "\\x5c")
            assert unescape(fields[name].encode()).decode() == text


@pytest.mark.usefixtures("los_angeles")
@pytest.mark.parametrize(
    ("name", "line"), [("common", REFERENCE_COMMON), ("combined", REFERENCE_COMBINED)]
)
def test_reference_line_in_local_time(name: str, line: bytes) -> None:
    """Apache's documented example line comes out byte for byte, offset -0700 in October."""
    assert make_format(name, utc=False).format_batch([REFERENCE]) == line


@pytest.mark.usefixtures("los_angeles")
@pytest.mark.parametrize(
    ("utc", "line"),
    [
        (False, b'10.1.2.3 - - [14/Nov/2023:14:13:20 -0800] "POST /items?page=2 HTTP/1.1" 201 - "-" "-"\n'),
        (True, b'10.1.2.3 - - [14/Nov/2023:22:13:20 +0000] "POST /items?page=2 HTTP/1.1" 201 - "-" "-"\n'),
    ],
)  # fmt: skip
def test_november_line_local_and_utc(utc: bool, line: bytes) -> None:
    """Los Angeles is -0800 in November; utc=True writes +0000; no body bytes and no headers are -."""
    assert make_format("combined", utc=utc).format_batch([NOVEMBER]) == line


@pytest.mark.usefixtures("foreign_month_names")
def test_month_names_are_english_whatever_the_locale() -> None:
    """LC_TIME set to a non-English locale still gives `Oct`, as the Common Log Format requires."""
    assert make_format("common", utc=True).format_batch([REFERENCE]) == (
        b'127.0.0.1 - - [10/Oct/2000:20:55:36 +0000] "GET /apache_pb.gif HTTP/1.0" 200 2326\n'
    )


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        ({}, b'127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/1.1" 200 512 "r" "ua"\n'),
        ({"query": b""}, b'127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "GET /a HTTP/1.1" 200 512 "r" "ua"\n'),
        ({"bytes_sent": 0}, b'127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/1.1" 200 - "r" "ua"\n'),
        ({"client": None}, b'- - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/1.1" 200 512 "r" "ua"\n'),
        ({"client": ""}, b'- - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/1.1" 200 512 "r" "ua"\n'),
        ({"referer": None, "user_agent": None}, b'127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/1.1" 200 512 "-" "-"\n'),
        ({"referer": b"", "user_agent": b""}, b'127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/1.1" 200 512 "" ""\n'),
        ({"client": "2001:db8::1"}, b'2001:db8::1 - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/1.1" 200 512 "r" "ua"\n'),
        ({"client": "/run/my app.sock"}, b'/run/my\\x20app.sock - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/1.1" 200 512 "r" "ua"\n'),
        ({"status": 10**20, "bytes_sent": 10**30}, b'127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/1.1" 100000000000000000000 1000000000000000000000000000000 "r" "ua"\n'),
        ({"path": b"/100%25%s%d", "query": b"%(x)s", "referer": b"%%", "user_agent": b"%b"}, b'127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "GET /100%25%s%d?%(x)s HTTP/1.1" 200 512 "%%" "%b"\n'),
        ({"method": "G\"T", "path": b"/a b\n", "user_agent": b"\xff\xc3\xa9\\"}, b'127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "G\\x22T /a b\\x0a?x=1 HTTP/1.1" 200 512 "r" "\\xff\\xc3\\xa9\\x5c"\n'),
        ({"client": "\ud800", "protocol": "HTTP/\u2028"}, b'\\xed\\xa0\\x80 - - [14/Nov/2023:22:13:20 +0000] "GET /a?x=1 HTTP/\\xe2\\x80\\xa8" 200 512 "r" "ua"\n'),
    ],
)  # fmt: skip
def test_combined_examples(changes: dict[str, Any], line: bytes) -> None:
    """Each field's special case is written exactly as documented."""
    fields = {"time": 1700000000.0, "duration": 0.001, "path": b"/a", "query": b"x=1",
              "bytes_sent": 512, "referer": b"r", "user_agent": b"ua"}  # fmt: skip
    record = make_record(**{**fields, **changes})
    assert make_format("combined", utc=True).format_batch([record]) == line
    assert make_format("combined", utc=True).format_batch([record, record]) == line * 2


def test_json_example_line() -> None:
    """A JSON line has the documented fields in order, times in RFC 3339 with milliseconds."""
    with local_zone("Asia/Kolkata"):
        line = make_format("json", utc=False).format_batch([NOVEMBER])
    assert line == (
        b'{"time":"2023-11-15T03:43:20.250+05:30","client":"10.1.2.3","method":"POST",'
        b'"path":"/items","query":"page=2","protocol":"HTTP/1.1","status":201,"bytes_sent":0,'
        b'"duration_ms":500.000,"referer":null,"user_agent":null,"request_id":null,'
        b'"route":null,"trace_id":null,"span_id":null,"completed":null}\n'
    )


@pytest.mark.parametrize(
    ("changes", "field", "value"),
    [
        ({"path": b"/caf\xc3\xa9"}, "path", "/caf\u00e9"),
        ({"path": b"/\xff\xfe"}, "path", "/\\xff\\xfe"),
        ({"request_headers": [(b"user-agent", b"\xed\xa0\x80")]}, "user_agent", "\\xed\\xa0\\x80"),
        ({"client": "\udc80x"}, "client", "\\xed\\xb2\\x80x"),
        ({"method": "\u2028"}, "method", "\u2028"),
        ({"duration": math.nan}, "duration_ms", None),
        ({"duration": math.inf}, "duration_ms", None),
        ({"duration": 1e306}, "duration_ms", None),
        ({"status": 10**20}, "status", 10**20),
    ],
)
def test_json_special_values(changes: dict[str, Any], field: str, value: Any) -> None:
    """Invalid UTF-8, lone surrogates and non-finite durations still give strict JSON."""
    record = NOVEMBER._replace(**changes)
    for records in ([record], [NOVEMBER, record]):
        line = lines_of(make_format("json", utc=True).format_batch(records), len(records))[-1]
        assert dict(strict_json(line))[field] == value


@pytest.mark.parametrize("name", FORMATS)
def test_empty_batch_is_empty(name: str) -> None:
    """A batch of no records formats to no bytes."""
    assert make_format(name, utc=True).format_batch([]) == b""


def test_unknown_format_lists_the_valid_names() -> None:
    """make_format() with an unknown name raises ConfigurationError naming every valid format."""
    with pytest.raises(ConfigurationError, match=r"'xml'.*combined, common, dev, json"):
        make_format("xml", utc=True)


def _on_the_wire(record: Record) -> int:
    """The bytes a server really sends for ``record``'s response."""
    bodiless = record.method == "HEAD" or record.status in (204, 304)
    informational = 100 <= record.status < 200 and record.status != 101
    return 0 if bodiless or informational else record.bytes_sent


@pytest.mark.parametrize("name", ["combined", "common", "json"])
@pytest.mark.parametrize(
    ("method", "status", "expected"),
    [
        ("HEAD", 200, 0),
        ("GET", 304, 0),
        ("GET", 204, 0),
        ("GET", 103, 0),
        ("GET", 101, 7),
        ("GET", 200, 7),
    ],
)
def test_bodies_servers_discard_are_not_counted(
    name: str, method: str, status: int, expected: int
) -> None:
    """HEAD, 204, 304 and 1xx responses send no body, whatever the app handed over; a
    101's bytes are the websocket frames sent after it."""
    records = [make_record(method=method, status=status, bytes_sent=7), make_record()]
    line = make_format(name, utc=True).format_batch(records).splitlines()[0]
    if name == "json":
        assert json.loads(line)["bytes_sent"] == expected
    else:
        assert line.split(b'" ')[1].split(b" ")[1] == (b"%d" % expected if expected else b"-")
