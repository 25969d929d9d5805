"""JsonFormat's options: added header fields, renamed keys, the request id, and bad configuration."""

from __future__ import annotations

import json
import math
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import make_record
from boundlog import AccessLog, ConfigurationError, Extras, JsonFormat, Record, unescape
from boundlog.formats._json import JSON_FIELDS

# 1700000000.25 is 2023-11-14T22:13:20.250Z.
HEAD = (
    '{"time":"2023-11-14T22:13:20.250Z","client":"127.0.0.1","method":"GET","path":"/hello",'
    '"query":"","protocol":"HTTP/1.1","status":200,"bytes_sent":1024,"duration_ms":4.200,'
    '"referer":null,"user_agent":"test-agent/1.0"'
)
REQUEST = [(b"host", b"example.test"), (b"user-agent", b"test-agent/1.0"),
           (b"X-Request-ID", b"req-7"), (b"X-Forwarded-Proto", b"https"),
           (b"accept", b"text/html"), (b"Accept", b"*/*"), (b"cookie", b"session=secret")]  # fmt: skip
RESPONSE = [(b"Content-Type", b"text/plain"), (b"set-cookie", b"a=1"), (b"set-cookie", b"b=2")]


def line(fmt: JsonFormat, record: Record) -> str:
    """The one line ``fmt`` writes for ``record``, checked to be the same inside a batch."""
    data = fmt.format_batch([record])
    assert fmt.format_batch([make_record(), record, record])[-2 * len(data) :] == data * 2
    return data.decode("ascii")


@pytest.mark.parametrize(
    ("options", "tail"),
    [
        ({}, ',"request_id":"req-7","route":null,"trace_id":null,"span_id":null,"completed":null}\n'),
        ({"request_headers": ["X-Forwarded-Proto", "Accept"]},
         ',"request_id":"req-7","route":null,"trace_id":null,"span_id":null,"completed":null,"x_forwarded_proto":"https","accept":"text/html, */*"}\n'),
        ({"response_headers": ["content-type", "Content-Length"]},
         ',"request_id":"req-7","route":null,"trace_id":null,"span_id":null,"completed":null,"response_content_type":"text/plain","response_content_length":null}\n'),
        ({"request_headers": {"X-Forwarded-Proto": "scheme"}, "response_headers": {"Content-Type": "type"}},
         ',"request_id":"req-7","route":null,"trace_id":null,"span_id":null,"completed":null,"scheme":"https","type":"text/plain"}\n'),
        ({"request_headers": ["Cookie"], "response_headers": ["Set-Cookie"]},
         ',"request_id":"req-7","route":null,"trace_id":null,"span_id":null,"completed":null,"cookie":"[redacted]","response_set_cookie":"[redacted]"}\n'),
        ({"request_headers": ["Cookie"], "response_headers": ["Set-Cookie"], "allow_headers": ["set-cookie"]},
         ',"request_id":"req-7","route":null,"trace_id":null,"span_id":null,"completed":null,"cookie":"[redacted]","response_set_cookie":"a=1, b=2"}\n'),
        ({"request_headers": {"user-agent": "agent", "User-Agent": "agent_again"}},
         ',"request_id":"req-7","route":null,"trace_id":null,"span_id":null,"completed":null,"agent":"test-agent/1.0","agent_again":"test-agent/1.0"}\n'),
    ],
)  # fmt: skip
def test_added_header_fields(options: dict[str, Any], tail: str) -> None:
    """Header fields follow the built-in ones, keyed by name or by the mapping, null when absent."""
    record = make_record(request_headers=REQUEST, response_headers=RESPONSE)
    assert line(JsonFormat(utc=True, **options), record) == HEAD + tail


@pytest.mark.parametrize(
    ("request_headers", "response_headers"),
    [
        ({"HTTP_X_REQUEST_ID": "r\xe9q", "HTTP_X_FORWARDED_PROTO": "https",
          "CONTENT_TYPE": "text/plain"}, MappingProxyType({"content-type": "text/html"})),
        ([("x-request-id", "r\xe9q"), ("x-forwarded-proto", "https"), ("content-type", "text/plain")],
         [("Content-Type", "text/html")]),
    ],
)  # fmt: skip
def test_header_sources_of_every_kind(request_headers: Any, response_headers: Any) -> None:
    """A WSGI environ, a header mapping (not a dict: that is an environ) and text pairs agree."""
    fmt = JsonFormat(
        utc=True,
        request_headers=["X-Forwarded-Proto", "Content-Type"],
        response_headers=["Content-Type"],
    )
    record = make_record(request_headers=request_headers, response_headers=response_headers)
    fields = json.loads(line(fmt, record))
    assert fields["request_id"] == "r\\xe9q"  # the latin-1 byte 0xe9 is not UTF-8
    assert fields["x_forwarded_proto"] == "https"
    assert fields["content_type"] == "text/plain"
    assert fields["response_content_type"] == "text/html"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"plain", "plain"),
        (b"caf\xc3\xa9", "caf\u00e9"),
        (b"\xff\xfe", "\\xff\\xfe"),
        (b"\\xff\\xfe", "\\x5cxff\\x5cxfe"),
        (b"caf\xc3\xa9\xff", "caf\\xc3\\xa9\\xff"),
        (b'a"b\\c', 'a"b\\x5cc'),
        (b"two\nlines\\n", "two\nlines\\x5cn"),
        (b"\x1b[31m\x00", "\x1b[31m\x00"),
        (b"\xe2\x80\xa8", "\u2028"),
    ],
)
def test_header_values_are_strict_json_on_one_line(value: bytes, expected: str) -> None:
    """Any bytes in an added field or the request id stay on one ASCII line and read back."""
    fmt = JsonFormat(utc=True, request_headers=["X-Trace"], response_headers=["X-Trace"])
    headers = [(b"x-request-id", value), (b"x-trace", value)]
    record = make_record(request_headers=headers, response_headers=[(b"x-trace", value)])
    text = line(fmt, record)
    assert text.isascii()
    assert text.count("\n") == 1
    fields = json.loads(text)
    assert fields["request_id"] == fields["x_trace"] == fields["response_x_trace"] == expected


# Byte strings weighted towards the ones that could be confused: invalid UTF-8 and the
# text of its escape, backslashes, valid multi-byte characters.
CONFUSABLE = st.lists(
    st.sampled_from([b"\xff", b"\\xff", b"\\", b"x", b"f", b"\xc3", b"\xa9", b"\xc3\xa9", b"\n",
                     b"\xed\xa0\x80", b"\\udcff", b'"'])
).map(b"".join)  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(st.binary(), CONFUSABLE), min_size=1, max_size=6, unique=True))
@example([b"\xff", b"\\xff"])
@example([b"\xc3\xa9", b"\\xc3\\xa9", b"\xc3", b"\\xc3"])
def test_distinct_bytes_give_distinct_json_strings_that_give_them_back(
    values: list[bytes],
) -> None:
    """No two byte strings share a JSON string, and unescape() of a string's UTF-8 gives
    back the bytes: valid UTF-8 is text, an invalid byte \\xhh, a backslash \\x5c."""
    fmt = JsonFormat(utc=True)
    records = [make_record(path=value, user_agent=value) for value in values]
    lines = fmt.format_batch(records).decode("ascii").splitlines()
    strings = [json.loads(text)["path"] for text in lines]
    assert [json.loads(text)["user_agent"] for text in lines] == strings
    assert len(set(strings)) == len(values)
    assert [unescape(string.encode("utf-8")) for string in strings] == values


@pytest.mark.parametrize("field", JSON_FIELDS)
def test_every_built_in_field_can_be_renamed(field: str) -> None:
    """A renamed field keeps its place and value under its new key."""
    record = make_record(request_headers=REQUEST)
    plain = json.loads(line(JsonFormat(utc=True), record), object_pairs_hook=list)
    renamed = json.loads(
        line(JsonFormat(utc=True, rename={field: "renamed"}), record), object_pairs_hook=list
    )
    assert renamed == [("renamed" if key == field else key, value) for key, value in plain]


@pytest.mark.parametrize(
    "key", ['"quoted"', "back\\slash", "100%s%d%%", "caf\u00e9", "new\nline", "@timestamp"]
)
@pytest.mark.parametrize("duration", [0.5, math.nan])
def test_keys_are_escaped(key: str, duration: float) -> None:
    """Any text is a key: escaped once, and never taken for a %-format, for finite or NaN durations."""
    fmt = JsonFormat(
        utc=True,
        rename={"time": key + "t", "bytes_sent": key + "b", "duration_ms": key + "d"},
        request_headers={"X-A": key + "a"},
        response_headers={"X-B": key + "r"},
    )
    record = make_record(
        duration=duration, request_headers=[(b"x-a", b"1")], response_headers=[(b"x-b", b"2")]
    )
    text = line(fmt, record)
    assert text.isascii()
    fields = json.loads(text)
    assert fields[key + "t"] == "2023-11-14T22:13:20.250Z"
    assert fields[key + "b"] == 1024
    assert fields[key + "d"] == (500.0 if duration == 0.5 else None)
    assert (fields[key + "a"], fields[key + "r"]) == ("1", "2")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rename": {"status": "code", "host": "h"}}, r"unknown field\(s\) 'host': the built-in fields are time, .*request_id"),
        ({"rename": {"time": "status"}}, r"field time and field status as 'status'"),
        ({"rename": {"referer": "x", "user_agent": "x"}}, r"field referer and field user_agent as 'x'"),
        ({"rename": {"time": ""}}, r"rename\['time'\] must be a non-empty string key, not ''"),
        ({"rename": [("time", "t")]}, r"rename must map built-in fields to keys"),
        ({"request_headers": ["User-Agent"]}, r"field user_agent and request header User-Agent as 'user_agent'"),
        ({"request_headers": ["X-A", "x-a"]}, r"request header X-A and request header x-a as 'x_a'"),
        ({"request_headers": {"X-Id": "request_id"}}, r"field request_id and request header X-Id as 'request_id'"),
        ({"request_headers": ["Accept"], "response_headers": {"Accept": "accept"}},
         r"request header Accept and response header Accept as 'accept'"),
        ({"request_headers": "X-Forwarded-For"}, r"request_headers must be a list .*write \['X-Forwarded-For'\]"),
        ({"allow_headers": "Cookie"}, r"allow_headers must be a list .*write \['Cookie'\]"),
        ({"response_headers": ["Bad Name"]}, r"'Bad Name' is not a header field name"),
        ({"response_headers": {"X-A": 1}}, r"response_headers\['X-A'\] must be a non-empty string key, not 1"),
        ({"allow_headers": ["Cookie:"]}, r"'Cookie:' is not a header field name"),
    ],
)  # fmt: skip
def test_bad_options_name_what_is_wrong(options: dict[str, Any], message: str) -> None:
    """An unknown field, a shared key or a malformed option is a ConfigurationError that says which."""
    with pytest.raises(ConfigurationError, match=message):
        JsonFormat(**options)


def test_optional_extras_and_server_variables_follow_the_built_in_fields() -> None:
    """``extras=`` adds bytes_received and close_code, ``environ=`` server variables
    (keyed by name or by the mapping), null when a record has none; the log then learns
    them."""
    fmt = JsonFormat(
        extras=["close_code", "bytes_received"], environ={"REMOTE_USER": "user", "tenant": "t"}
    )
    assert fmt.reads_extras == {
        "route",
        "trace",
        "completed",
        "bytes_received",
        "close_code",
        "environ",
    }
    assert fmt.environ_names == {"REMOTE_USER", "tenant"}
    extras = Extras(completed=False, bytes_received=12, close_code=1001, environ={"tenant": 7})
    lines = [
        json.loads(line)
        for line in fmt.format_batch([make_record(extras=extras), make_record()]).splitlines()
    ]
    keys = list(lines[0])
    assert keys[keys.index("completed") :] == [
        "completed",
        "bytes_received",
        "close_code",
        "user",
        "t",
    ]
    assert [list(line.values())[-5:] for line in lines] == [
        [False, 12, 1001, None, 7],
        [None, None, None, None, None],
    ]
    assert JsonFormat().reads_extras == {"route", "trace", "completed"}
    assert JsonFormat().environ_names == frozenset()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"extras": ["route"]}, "extras names unknown field"),
        ({"extras": "close_code"}, "extras must name fields"),
        ({"environ": "REMOTE_USER"}, "environ must name server variables"),
        ({"environ": {"REMOTE_USER": ""}}, "must be a non-empty string key"),
        ({"environ": ["status"]}, "cannot share a key"),
        ({"extras": ["close_code"], "rename": {"status": "close_code"}}, "cannot share a key"),
    ],
)
def test_optional_fields_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        JsonFormat(**options)


def test_a_subclass_reading_no_extras_stands_as_the_performance_page_advises() -> None:
    """``reads_extras = frozenset()`` on a subclass: the log learns no extras (no route,
    no span asked for), and the trace ids come from the ``traceparent`` header."""

    class JsonWithoutExtras(JsonFormat):
        __slots__ = ()
        reads_extras = frozenset()

    fmt = JsonWithoutExtras()
    assert fmt.reads_extras == frozenset()
    assert JsonFormat().reads_extras >= {"route", "trace"}
    log = AccessLog("/dev/null", format=fmt)
    try:
        assert log.reads_extras == frozenset()
    finally:
        log.close()
    traceparent = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    record = make_record(request_headers=[(b"traceparent", traceparent)])
    line = json.loads(fmt.format_batch([record]))
    assert (line["route"], line["trace_id"], line["span_id"]) == (
        None, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    )  # fmt: skip
