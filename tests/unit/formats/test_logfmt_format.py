"""logfmt lines: the JSON line's fields as pairs that a logfmt parser reads back exactly.

The parser is logfmtkv's, in its strict mode, which accepts and rejects what go-logfmt
(the reference logfmt implementation, which Loki's ``| logfmt`` follows) does.  Every
test runs on the core in use: the C one, or pure Python under BOUNDLOG_NO_EXTENSIONS=1.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logfmtkv import parse_pairs

from _examples import examples
from _records import make_record
from _strategies import ORDINARY_EXTRAS, ORDINARY_VALUES, RAW, TEXT, hostile_records, outcome
from boundlog import (
    FORMATS,
    AccessLog,
    ConfigurationError,
    Extras,
    JsonFormat,
    LogfmtFormat,
    Record,
    unescape,
)
from boundlog.formats._logfmt import logfmt_key, logfmt_value

# 1700000000.25 is 2023-11-14T22:13:20.250Z.
DEFAULT_LINE = (
    'time=2023-11-14T22:13:20.250Z client=127.0.0.1 method=GET path=/hello query="" '
    "protocol=HTTP/1.1 status=200 bytes_sent=1024 duration_ms=4.200 user_agent=test-agent/1.0\n"
)
_PRINTABLE_LINE = re.compile(rb"[\x20-\x7e]*\n")
_KEY = re.compile(r"[!#-<>-\[\]-~]+")


def line(fmt: LogfmtFormat, record: Record) -> str:
    """The one line ``fmt`` writes for ``record``, checked to be the same inside a batch."""
    data = fmt.format_batch([record])
    assert fmt.format_batch([make_record(), record, record])[-2 * len(data) :] == data * 2
    return data.decode("ascii")


def json_pairs(data: bytes) -> list[tuple[str, str]]:
    """A JSON line's keys and values as text, nulls left out: a number as the JSON line
    writes it, true and false as those words, a string as JSON reads it."""
    entry = json.loads(data, parse_float=str, parse_int=str)
    words = {True: "true", False: "false"}
    return [
        (key, words[value] if type(value) is bool else value)
        for key, value in entry.items()
        if value is not None
    ]


def logfmt_pairs(data: bytes) -> list[tuple[str, str | None]]:
    """A logfmt line's pairs, read as go-logfmt reads them."""
    assert _PRINTABLE_LINE.fullmatch(data), data
    return [tuple(pair) for pair in parse_pairs(data.decode("ascii")[:-1], strict=True)]


def test_the_default_line() -> None:
    assert line(LogfmtFormat(utc=True), make_record()) == DEFAULT_LINE
    assert "logfmt" in FORMATS


def test_format_logfmt_by_name(tmp_path: Any) -> None:
    path = tmp_path / "access.log"
    with AccessLog(str(path), format="logfmt", utc=True) as log:
        log.submit(make_record())
    assert path.read_text() == DEFAULT_LINE


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (b"/plain", "/plain"),
        (b"", '""'),
        (b"a b", '"a b"'),
        (b"k=v", '"k=v"'),
        (b'say "hi"', r'"say \"hi\""'),
        (b"back\\slash", r'"back\\x5cslash"'),
        (b"lf\nx\rcr\ttab", r'"lf\nx\rcr\ttab"'),
        (b"\x00\x1b\x7f", r'"\u0000\u001b\u007f"'),
        (b"caf\xc3\xa9", r'"caf\u00e9"'),
        (b"\xe2\x80\xa8", r'"\u2028"'),
        (b"\xf0\x9f\x98\x80", r'"\ud83d\ude00"'),
        (b"\xff\xfe", r'"\\xff\\xfe"'),
        (b"null", "null"),
        (b"-", "-"),
    ],
)
def test_a_value_is_bare_only_when_a_parser_reads_it_as_it_is(value: bytes, written: str) -> None:
    """Quoted (as the JSON line's string) when empty or holding a space, =, " or a
    backslash, or anything outside printable ASCII; the parser gives back the JSON
    string's text, and unescape() the bytes."""
    text = line(LogfmtFormat(utc=True), make_record(path=value))
    assert f" path={written} " in text
    [path] = [value for key, value in logfmt_pairs(text.encode()) if key == "path"]
    assert path is not None
    assert unescape(path.encode("utf-8")) == value


def test_a_null_leaves_its_pair_out() -> None:
    """A missing client or header, an unknown route and ids, a duration that is not
    finite: no pair; a parser has no value for the key."""
    record = make_record(
        client=None, user_agent=None, duration=float("inf"), extras=Extras(route=None)
    )
    text = line(LogfmtFormat(utc=True), record)
    assert text == (
        'time=2023-11-14T22:13:20.250Z method=GET path=/hello query="" protocol=HTTP/1.1 '
        "status=200 bytes_sent=1024\n"
    )


def test_the_fields_of_the_extras_and_trace_ids() -> None:
    fmt = LogfmtFormat(utc=True, extras=["bytes_received", "close_code"], environ=["REMOTE_USER"])
    trace = (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7)
    record = make_record(
        extras=Extras(
            route="/items/{item_id}", trace=trace, completed=False, bytes_received=12,
            environ={"REMOTE_USER": "ada lovelace"},
        )
    )  # fmt: skip
    assert line(fmt, record) == DEFAULT_LINE[:-1] + (
        " route=/items/{item_id} trace_id=4bf92f3577b34da6a3ce929d0e0e4736"
        ' span_id=00f067aa0ba902b7 completed=false bytes_received=12 REMOTE_USER="ada lovelace"\n'
    )


def test_added_headers_and_renamed_keys() -> None:
    fmt = LogfmtFormat(
        utc=True,
        request_headers=["X-Forwarded-Proto", "Cookie"],
        response_headers={"Content-Type": "type"},
        rename={"time": "@timestamp", "duration_ms": "latency_ms"},
    )
    record = make_record(
        request_headers=[(b"x-forwarded-proto", b"https"), (b"cookie", b"secret")],
        response_headers=[(b"content-type", b"text/html; charset=utf-8")],
    )
    assert line(fmt, record) == (
        '@timestamp=2023-11-14T22:13:20.250Z client=127.0.0.1 method=GET path=/hello query="" '
        "protocol=HTTP/1.1 status=200 bytes_sent=1024 latency_ms=4.200 x_forwarded_proto=https "
        'cookie=[redacted] type="text/html; charset=utf-8"\n'
    )


def test_the_application_fields_names_made_keys() -> None:
    """A note's name is made a key (each character a key may not hold as _), then
    prefixed app. while the line has it; a null note writes nothing."""
    notes = {"user": "ada", "status": 7, "a b": 1.5, "": True, "caf\xe9": None, "a_b": [1]}
    text = line(LogfmtFormat(utc=True), make_record(notes=notes))
    assert text == DEFAULT_LINE[:-1] + " user=ada app.status=7 a_b=1.5 _=true app.a_b=[1]\n"
    assert logfmt_key("caf\xe9 x") == "caf__x"
    assert logfmt_key("") == "_"


def test_options_given_as_iterators() -> None:
    """Options read twice (by the JSON line's checks and for the keys) may be iterators."""
    fmt = LogfmtFormat(
        request_headers=iter(["Accept"]), extras=iter(["close_code"]), environ=iter(["x"])
    )
    record = make_record(request_headers=[(b"accept", b"*/*")])
    assert line(fmt, record).endswith(" accept=*/*\n")
    assert fmt.reads_extras >= {"close_code", "environ"}
    assert fmt.environ_names == {"x"}
    assert fmt.request_header_names >= {b"accept"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rename": {"time": "a b"}}, r"rename\['time'\] is 'a b'.*e\.g\. 'a_b'"),
        ({"request_headers": {"Accept": 'say"'}}, r"request_headers\['Accept'\]"),
        ({"response_headers": {"Accept": "a=b"}}, r"response_headers\['Accept'\]"),
        ({"environ": {"REMOTE_USER": "caf\xe9"}}, r"environ\['REMOTE_USER'\]"),
        ({"rename": {"nope": "x"}}, "unknown field"),
    ],
)
def test_a_key_a_logfmt_line_cannot_hold_is_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        LogfmtFormat(**options)


def test_logfmt_value_of_each_json_value() -> None:
    assert logfmt_value("null") is None
    assert logfmt_value("200") == "200"
    assert logfmt_value("-1.5e+300") == "-1.5e+300"
    assert logfmt_value("true") == "true"
    assert logfmt_value('"x"') == "x"
    assert logfmt_value('""') == '""'
    assert logfmt_value('"null"') == "null"
    assert logfmt_value('"a\\"b"') == '"a\\"b"'


# Names a note may have that are keys as they are, so that the JSON line's keys are
# the logfmt line's.
_KEY_NOTES = st.none() | st.dictionaries(
    st.sampled_from(["user", "tenant", "status", "app.status", "x", "route"]),
    ORDINARY_VALUES,
    max_size=4,
)
_HEADERS = st.lists(
    st.tuples(
        st.sampled_from([b"referer", b"user-agent", b"x-request-id", b"accept", b"traceparent"]),
        RAW,
    ),
    max_size=4,
)
_OPTIONS = st.fixed_dictionaries(
    {"utc": st.booleans()},
    optional={
        "request_headers": st.lists(
            st.sampled_from(["Accept", "Cookie", "X-Forwarded-Proto"]), unique=True
        ),
        "rename": st.dictionaries(
            st.sampled_from(["time", "client", "path"]),
            st.sampled_from(["@t", "r.1", "k:v"]),
            max_size=1,
        ),
        "extras": st.lists(st.sampled_from(["bytes_received", "close_code"])),
        "environ": st.lists(st.sampled_from(["REMOTE_USER", "raw_path"]), unique=True),
    },
)


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_records(_HEADERS, _KEY_NOTES), min_size=1, max_size=6), _OPTIONS)
def test_a_parser_reads_the_json_lines_values(
    records: list[Record], options: dict[str, Any]
) -> None:
    """Whatever the records hold, each line parses strictly, and its pairs are the JSON
    line's keys and values, in order, the nulls left out."""
    fmt = LogfmtFormat(**options)
    expected = outcome(JsonFormat(**options).format_batch, records)
    if not isinstance(expected, bytes):
        # The reference raises for a value no server hands over: logfmt too.
        assert not isinstance(outcome(fmt.format_batch, records), bytes)
        return
    lines = fmt.format_batch(records).splitlines(keepends=True)
    assert len(lines) == len(records)
    for logfmt_line, json_line in zip(lines, expected.splitlines(), strict=True):
        assert logfmt_pairs(logfmt_line) == json_pairs(json_line)


@settings(max_examples=examples(200))
@given(
    st.lists(
        st.builds(
            make_record,
            client=st.none() | TEXT,
            method=TEXT,
            path=RAW,
            query=RAW,
            referer=st.none() | RAW,
            notes=st.none() | st.dictionaries(TEXT, ORDINARY_VALUES, max_size=3),
            extras=ORDINARY_EXTRAS,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_hostile_bytes_round_trip(records: list[Record]) -> None:
    """A path, query and Referer give back the bytes sent, a method and client their
    text, and every note (whatever its name) makes one pair with a valid key."""
    lines = LogfmtFormat().format_batch(records).splitlines(keepends=True)
    for data, record in zip(lines, records, strict=True):
        pairs = logfmt_pairs(data)
        values = dict(pairs)
        assert unescape(str(values["path"]).encode()) == record.path
        assert unescape(str(values["query"]).encode()) == record.query
        referer = values.get("referer")
        assert (None if referer is None else unescape(referer.encode())) == dict(
            record.request_headers
        ).get(b"referer")
        assert len(pairs) == len(values), "a key written twice"
        assert all(_KEY.fullmatch(key) for key, _ in pairs), pairs
