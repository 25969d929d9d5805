"""The schema presets, format="ecs", "gcp" and "otel": each field checked against the
schema's published definition, strict JSON whatever a client sends, and one real server.

The definitions are written out here from the schemas' references (ECS 8.11's field
reference, Cloud Logging's LogEntry and HttpRequest, the OpenTelemetry log data model),
and taken from the schemas' own packages where they publish them: the
``opentelemetry-semantic-conventions`` attribute names (with opentelemetry-sdk, in the
test extra), OpenTelemetry's ``SeverityNumber``, and ``ecs-logging``'s conventions for the
top-level keys of an ECS log line.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import ecs_logging
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry._logs import SeverityNumber
from opentelemetry.semconv._incubating.attributes import http_attributes as incubating_http
from opentelemetry.semconv.attributes import (
    client_attributes,
    http_attributes,
    network_attributes,
    url_attributes,
    user_agent_attributes,
)
from opentelemetry.semconv.metrics import http_metrics

from _examples import examples
from _records import make_record
from _servers import (
    CLIENT_TIMEOUT,
    HOLD_UNTIL_CLOSE,
    LOOPBACK,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    LoggedExchange,
    build_exchanges,
    expected_json,
    json_value_bytes,
    read_log_lines,
    running_server,
    send_exchanges,
    server_environment,
)
from _strategies import EXTRAS, RAW, RECORD_NOTES, TEXT
from boundlog import AccessLog, ConfigurationError, Extras, Record, unescape
from boundlog.formats._apache import FORMATS, make_format
from boundlog.formats._schemas import ECS_VERSION, OTEL_METHODS, SchemaFormat
from boundlog.gunicorn import _format_for

SCHEMAS = ("ecs", "gcp", "otel")
SETTINGS = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
RFC3339_UTC_MS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")

# 1700000000.25 is 2023-11-14T22:13:20.250Z.
RECORD = make_record(query=b"page=2", referer=b"https://example.com/", duration=0.0042, status=404)
ECS_LINE = (
    '{"@timestamp":"2023-11-14T22:13:20.250Z","log.level":"warning","message":"GET /hello 404",'
    '"ecs.version":"8.11.0","event":{"kind":"event","category":["web"],"type":["access"],'
    '"outcome":"failure","duration":4200000},"http":{"request":{"method":"GET",'
    '"referrer":"https://example.com/"},"response":{"status_code":404,"body":{"bytes":1024}},'
    '"version":"1.1"},"url":{"path":"/hello","query":"page=2","original":"/hello?page=2"},'
    '"client":{"address":"127.0.0.1","ip":"127.0.0.1"},"user_agent":{"original":"test-agent/1.0"}}\n'
)
GCP_LINE = (
    '{"time":"2023-11-14T22:13:20.250Z","severity":"WARNING","message":"GET /hello 404",'
    '"httpRequest":{"requestMethod":"GET","requestUrl":"/hello?page=2","status":404,'
    '"responseSize":"1024","userAgent":"test-agent/1.0","remoteIp":"127.0.0.1",'
    '"referer":"https://example.com/","latency":"0.004200s","protocol":"HTTP/1.1"}}\n'
)
OTEL_LINE = (
    '{"timestamp":"2023-11-14T22:13:20.250Z","severity_text":"WARN","severity_number":13,'
    '"body":"GET /hello 404","attributes":{"http.request.method":"GET","url.path":"/hello",'
    '"url.query":"page=2","http.response.status_code":404,"http.response.body.size":1024,'
    '"network.protocol.version":"1.1","client.address":"127.0.0.1",'
    '"user_agent.original":"test-agent/1.0","http.request.header.referer":["https://example.com/"],'
    '"http.server.request.duration":0.004200}}\n'
)
LINES = {"ecs": ECS_LINE, "gcp": GCP_LINE, "otel": OTEL_LINE}


def strict_json(line: bytes) -> dict[str, Any]:
    """One line as a JSON object, refusing NaN and Infinity and duplicate keys."""
    assert line.isascii(), line
    assert b"\n" not in line, line

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        assert len(keys) == len(set(keys)), keys
        return dict(pairs)

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in {line!r}")

    entry = json.loads(line, object_pairs_hook=no_duplicates, parse_constant=refuse)
    assert type(entry) is dict, line
    return entry


def lines_of(data: bytes, count: int) -> list[bytes]:
    assert data.endswith(b"\n") or not data
    lines = data.split(b"\n")[:-1]
    assert len(lines) == count, data
    return lines


def flattened(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a":{"b":1}}`` as ``{"a.b": 1}``: ECS fields by their dotted names."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            flat.update(flattened(item, prefix + key + "."))
        else:
            assert prefix + key not in flat, key
            flat[prefix + key] = item
    return flat


def utc_time(text: str) -> float:
    assert RFC3339_UTC_MS.fullmatch(text), text
    return datetime.fromisoformat(text).timestamp()


def is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


# -- the definitions ------------------------------------------------------------------------

# ECS 8.11 field reference (https://www.elastic.co/guide/en/ecs/8.11/ecs-field-reference.html):
# each field the lines may hold, its type, and the values it allows where ECS lists them.
# keyword, wildcard and match_only_text are JSON strings; long a JSON integer; date an
# ISO 8601 string; ip an IPv4 or IPv6 address; the categorization fields are arrays.
HEX32 = re.compile(r"[0-9a-f]{32}")
HEX16 = re.compile(r"[0-9a-f]{16}")
ECS_DEFINITIONS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "@timestamp": ("date", lambda v: isinstance(v, str) and bool(RFC3339_UTC_MS.fullmatch(v))),
    "log.level": ("keyword", lambda v: v in ("info", "warning", "error")),
    "message": ("match_only_text", lambda v: isinstance(v, str)),
    "ecs.version": ("keyword", lambda v: v == ECS_VERSION),
    "event.kind": ("keyword", lambda v: v == "event"),
    "event.category": ("keyword[]", lambda v: v == ["web"]),
    "event.type": ("keyword[]", lambda v: v == ["access"]),
    "event.outcome": ("keyword", lambda v: v in ("success", "failure", "unknown")),
    "event.duration": ("long", lambda v: v is None or (type(v) is int and v >= 0)),
    "http.request.method": ("keyword", lambda v: isinstance(v, str)),
    "http.request.referrer": ("keyword", lambda v: isinstance(v, str)),
    "http.response.status_code": ("long", lambda v: type(v) is int),
    "http.response.body.bytes": ("long", lambda v: type(v) is int),
    "http.version": ("keyword", lambda v: isinstance(v, str)),
    "url.path": ("wildcard", lambda v: isinstance(v, str)),
    "url.query": ("keyword", lambda v: isinstance(v, str) and v != ""),
    "url.original": ("wildcard", lambda v: isinstance(v, str)),
    "client.address": ("keyword", lambda v: isinstance(v, str)),
    "client.ip": ("ip", lambda v: isinstance(v, str) and is_ip(v)),
    "user_agent.original": ("keyword", lambda v: isinstance(v, str)),
    "trace.id": ("keyword", lambda v: isinstance(v, str) and bool(HEX32.fullmatch(v))),
    "span.id": ("keyword", lambda v: isinstance(v, str) and bool(HEX16.fullmatch(v))),
}
ECS_ALWAYS = {
    "@timestamp", "log.level", "message", "ecs.version", "event.kind", "event.category",
    "event.type", "event.outcome", "event.duration", "http.request.method",
    "http.response.status_code", "http.response.body.bytes", "http.version", "url.path",
    "url.original",
}  # fmt: skip

# LogEntry's HttpRequest (https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#HttpRequest)
# in the proto3 JSON mapping: int64 is a string, int32 a number, Duration a string of
# seconds with up to 9 decimals and an "s".
INT64 = re.compile(r"-?\d+")
DURATION = re.compile(r"\d+(?:\.\d{1,9})?s")
GCP_HTTP_REQUEST: dict[str, Callable[[Any], bool]] = {
    "requestMethod": lambda v: isinstance(v, str),
    "requestUrl": lambda v: isinstance(v, str),
    "requestSize": lambda v: isinstance(v, str) and bool(INT64.fullmatch(v)),
    "status": lambda v: type(v) is int,
    "responseSize": lambda v: isinstance(v, str) and bool(INT64.fullmatch(v)),
    "userAgent": lambda v: isinstance(v, str),
    "remoteIp": lambda v: isinstance(v, str) and is_ip(v),
    "serverIp": lambda v: isinstance(v, str),
    "referer": lambda v: isinstance(v, str),
    "latency": lambda v: isinstance(v, str) and bool(DURATION.fullmatch(v)),
    "cacheLookup": lambda v: type(v) is bool,
    "cacheHit": lambda v: type(v) is bool,
    "cacheValidatedWithOriginServer": lambda v: type(v) is bool,
    "cacheFillBytes": lambda v: isinstance(v, str) and bool(INT64.fullmatch(v)),
    "protocol": lambda v: isinstance(v, str),
}
# LogSeverity's names; the special fields of structured logging
# (https://cloud.google.com/logging/docs/structured-logging#special-payload-fields).
GCP_SEVERITIES = {"DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL",
                  "ALERT", "EMERGENCY"}  # fmt: skip
GCP_TOP_LEVEL = {"time", "severity", "message", "httpRequest"}
GCP_TRACE = {"logging.googleapis.com/trace", "logging.googleapis.com/spanId"}

# The semantic conventions' attribute names and types, from their package.
OTEL_ATTRIBUTES: dict[str, Callable[[Any], bool]] = {
    http_attributes.HTTP_REQUEST_METHOD: lambda v: v in {m.value for m in http_attributes.HttpRequestMethodValues},
    http_attributes.HTTP_REQUEST_METHOD_ORIGINAL: lambda v: isinstance(v, str),
    url_attributes.URL_PATH: lambda v: isinstance(v, str),
    url_attributes.URL_QUERY: lambda v: isinstance(v, str) and v != "",
    http_attributes.HTTP_RESPONSE_STATUS_CODE: lambda v: type(v) is int,
    incubating_http.HTTP_RESPONSE_BODY_SIZE: lambda v: type(v) is int,
    network_attributes.NETWORK_PROTOCOL_VERSION: lambda v: isinstance(v, str),
    client_attributes.CLIENT_ADDRESS: lambda v: isinstance(v, str),
    user_agent_attributes.USER_AGENT_ORIGINAL: lambda v: isinstance(v, str),
    # string[]: a header's values.
    f"{http_attributes.HTTP_REQUEST_HEADER_TEMPLATE}.referer": (
        lambda v: isinstance(v, list) and len(v) == 1 and isinstance(v[0], str)
    ),
    # The metric's name, in its unit (seconds), as a double.
    http_metrics.HTTP_SERVER_REQUEST_DURATION: lambda v: v is None or (type(v) is float and v >= 0),
    http_attributes.HTTP_ROUTE: lambda v: isinstance(v, str),
}  # fmt: skip
OTEL_SEVERITIES = {
    "INFO": SeverityNumber.INFO.value,
    "WARN": SeverityNumber.WARN.value,
    "ERROR": SeverityNumber.ERROR.value,
}


def check_ecs(entry: dict[str, Any]) -> dict[str, Any]:
    # ecs-logging's spec: these first, log.level and ecs.version as top-level dotted keys.
    assert list(entry)[:4] == ["@timestamp", "log.level", "message", "ecs.version"], entry
    fields = flattened(entry)
    for name, value in fields.items():
        assert name in ECS_DEFINITIONS, name
        kind, valid = ECS_DEFINITIONS[name]
        assert valid(value), (name, kind, value)
    assert set(fields) >= ECS_ALWAYS, ECS_ALWAYS - set(fields)
    return fields


def check_gcp(entry: dict[str, Any]) -> dict[str, Any]:
    assert set(entry) - GCP_TRACE == GCP_TOP_LEVEL, entry
    if GCP_TRACE & set(entry):
        assert HEX32.fullmatch(entry["logging.googleapis.com/trace"].rsplit("/", 1)[-1])
        assert HEX16.fullmatch(entry["logging.googleapis.com/spanId"])
    assert entry["severity"] in GCP_SEVERITIES
    utc_time(entry["time"])
    assert isinstance(entry["message"], str)
    request = entry["httpRequest"]
    for name, value in request.items():
        assert name in GCP_HTTP_REQUEST, name
        assert GCP_HTTP_REQUEST[name](value), (name, value)
    assert {"requestMethod", "requestUrl", "status", "responseSize", "protocol"} <= set(request)
    return entry


def check_otel(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ["timestamp", "severity_text", "severity_number", "body", "attributes"]
    if "trace_id" in entry:
        keys[4:4] = ["trace_id", "span_id"]
        assert HEX32.fullmatch(entry["trace_id"])
        assert HEX16.fullmatch(entry["span_id"])
    assert list(entry) == keys
    utc_time(entry["timestamp"])
    assert OTEL_SEVERITIES[entry["severity_text"]] == entry["severity_number"]
    assert isinstance(entry["body"], str)
    for name, value in entry["attributes"].items():
        assert name in OTEL_ATTRIBUTES, name
        assert OTEL_ATTRIBUTES[name](value), (name, value)
    return entry


CHECKS = {"ecs": check_ecs, "gcp": check_gcp, "otel": check_otel}


def severity(status: int) -> int:
    return 2 if status >= 500 else 1 if status >= 400 else 0


def check_against_record(name: str, entry: dict[str, Any], record: Record) -> None:
    """Every value of ``entry`` is the record's, by the JSON format's escaping rule."""
    path, query = record.path, record.query
    sent = (
        0
        if record.method == "HEAD"
        or record.status in (204, 304)
        or (100 <= record.status < 200 and record.status != 101)
        else record.bytes_sent
    )
    agent = dict((k, v) for k, v in record.request_headers).get(b"user-agent")
    referer = dict((k, v) for k, v in record.request_headers).get(b"referer")
    target = path + b"?" + query if query else path
    message = b"%s %s %d" % (record.method.encode("utf-8", "surrogatepass"), path, record.status)
    level = severity(record.status)
    if name == "ecs":
        fields = flattened(entry)
        assert fields["log.level"] == ("info", "warning", "error")[level]
        assert fields["event.outcome"] == ("success", "failure", "failure")[level]
        assert unescape(fields["message"].encode()) == message
        assert unescape(fields["url.path"].encode()) == path
        assert unescape(fields["url.original"].encode()) == target
        assert unescape(fields.get("url.query", "").encode()) == query
        assert fields["http.response.status_code"] == record.status
        assert fields["http.response.body.bytes"] == sent
        if math.isfinite(record.duration):
            assert abs(fields["event.duration"] - record.duration * 1e9) <= 0.5 + record.duration
        assert (fields.get("client.address") is None) == (record.client is None)
        assert unescape(fields.get("user_agent.original", "").encode()) == (agent or b"")
        assert unescape(fields.get("http.request.referrer", "").encode()) == (referer or b"")
    elif name == "gcp":
        request = entry["httpRequest"]
        assert entry["severity"] == ("INFO", "WARNING", "ERROR")[level]
        assert unescape(entry["message"].encode()) == message
        assert unescape(request["requestUrl"].encode()) == target
        assert request["status"] == record.status
        assert int(request["responseSize"]) == sent
        assert unescape(request.get("userAgent", "").encode()) == (agent or b"")
        assert unescape(request.get("referer", "").encode()) == (referer or b"")
        if math.isfinite(record.duration):
            assert abs(float(request["latency"][:-1]) - record.duration) <= 5e-7 * (
                1 + record.duration
            )
    else:
        attributes = entry["attributes"]
        assert entry["severity_text"] == ("INFO", "WARN", "ERROR")[level]
        assert unescape(entry["body"].encode()) == message
        assert unescape(attributes["url.path"].encode()) == path
        assert unescape(attributes.get("url.query", "").encode()) == query
        assert attributes["http.response.status_code"] == record.status
        assert attributes["http.response.body.size"] == sent
        method = attributes.get("http.request.method_original", attributes["http.request.method"])
        assert unescape(method.encode()) == record.method.encode("utf-8", "surrogatepass")
        assert unescape(attributes.get("user_agent.original", "").encode()) == (agent or b"")


# -- lines ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMAS)
def test_the_documented_line_field_by_field(name: str) -> None:
    """A 404 with a query, a Referer and a User-Agent: the exact line, alone and in a batch."""
    fmt = make_format(name, utc=False)
    assert fmt.format_batch([RECORD]).decode() == LINES[name]
    assert fmt.format_batch([make_record(), RECORD, RECORD]).decode().endswith(LINES[name] * 2)
    entry = CHECKS[name](strict_json(LINES[name].encode().rstrip(b"\n")))
    check_against_record(name, entry, RECORD)


@pytest.mark.parametrize("name", SCHEMAS)
def test_fields_a_request_may_lack_are_left_out(name: str) -> None:
    """No query, Referer, User-Agent or client: those fields are absent, not null or empty."""
    record = make_record(client=None, user_agent=None, request_headers=[])
    entry = CHECKS[name](strict_json(make_format(name, utc=True).format_batch([record])[:-1]))
    text = json.dumps(entry)
    for absent in ("query", "referer", "referrer", "user_agent", "userAgent", "client", "remoteIp"):
        assert f'"{absent}' not in text, (absent, text)
        assert f".{absent}" not in text, (absent, text)


@pytest.mark.parametrize(
    ("status", "ecs", "gcp", "otel"),
    [(100, "info", "INFO", "INFO"), (200, "info", "INFO", "INFO"), (304, "info", "INFO", "INFO"),
     (399, "info", "INFO", "INFO"), (400, "warning", "WARNING", "WARN"),
     (499, "warning", "WARNING", "WARN"), (500, "error", "ERROR", "ERROR"),
     (599, "error", "ERROR", "ERROR")],
)  # fmt: skip
def test_severity_from_status(status: int, ecs: str, gcp: str, otel: str) -> None:
    """5xx is an error, 4xx a warning, anything else information, in each schema's words."""
    record = make_record(status=status)
    line = {
        name: strict_json(make_format(name, utc=True).format_batch([record])[:-1])
        for name in SCHEMAS
    }
    assert line["ecs"]["log.level"] == ecs
    assert line["gcp"]["severity"] == gcp
    assert line["otel"]["severity_text"] == otel
    assert line["otel"]["severity_number"] == OTEL_SEVERITIES[otel]


@pytest.mark.parametrize(
    ("client", "ip"),
    [("127.0.0.1", True), ("::1", True), ("2001:db8::8a2e:370:7334", True),
     ("/run/app.sock", False), ("", False), ("fe80::1%eth0", False), ("example.com", False)],
)  # fmt: skip
def test_only_an_ip_address_goes_in_an_ip_field(client: str, ip: bool) -> None:
    """ECS client.ip and GCP remoteIp only for an IP address; the address as reported
    (a Unix socket's path too) stays in ECS client.address and OTel client.address."""
    record = make_record(client=client)
    ecs = flattened(strict_json(make_format("ecs", utc=True).format_batch([record])[:-1]))
    gcp = strict_json(make_format("gcp", utc=True).format_batch([record])[:-1])
    otel = strict_json(make_format("otel", utc=True).format_batch([record])[:-1])
    assert ecs["client.address"] == client
    assert ("client.ip" in ecs) == ip
    assert ("remoteIp" in gcp["httpRequest"]) == ip
    assert otel["attributes"]["client.address"] == client


@pytest.mark.parametrize(
    ("method", "attributes"),
    [("GET", {"http.request.method": "GET"}), ("PATCH", {"http.request.method": "PATCH"}),
     ("get", {"http.request.method": "_OTHER", "http.request.method_original": "get"}),
     ("PROPFIND", {"http.request.method": "_OTHER", "http.request.method_original": "PROPFIND"})],
)  # fmt: skip
def test_otel_methods_it_does_not_know_are_other(method: str, attributes: dict[str, str]) -> None:
    """The semantic conventions: a method they do not list (case-sensitively) is _OTHER,
    with the method as sent in http.request.method_original."""
    assert {m.value for m in http_attributes.HttpRequestMethodValues} == OTEL_METHODS | {"_OTHER"}
    entry = strict_json(
        make_format("otel", utc=True).format_batch([make_record(method=method)])[:-1]
    )
    assert {
        k: v for k, v in entry["attributes"].items() if k.startswith("http.request.method")
    } == attributes


@pytest.mark.parametrize(
    ("protocol", "version"),
    [("HTTP/1.0", "1.0"), ("HTTP/1.1", "1.1"), ("HTTP/2", "2"), ("QUIC", "QUIC")],
)
def test_versions_without_the_protocol_name(protocol: str, version: str) -> None:
    """ECS http.version and OTel network.protocol.version are "1.1"; GCP keeps "HTTP/1.1"."""
    record = make_record(protocol=protocol)
    ecs = strict_json(make_format("ecs", utc=True).format_batch([record])[:-1])
    gcp = strict_json(make_format("gcp", utc=True).format_batch([record])[:-1])
    otel = strict_json(make_format("otel", utc=True).format_batch([record])[:-1])
    assert ecs["http"]["version"] == version
    assert otel["attributes"]["network.protocol.version"] == version
    assert gcp["httpRequest"]["protocol"] == protocol


@pytest.mark.parametrize(
    ("duration", "nanoseconds", "latency", "seconds"),
    [(0.0, 0, "0.000000s", 0.0), (0.123456, 123456000, "0.123456s", 0.123456),
     (1.5, 1500000000, "1.500000s", 1.5), (3600.0000004, 3600000000400, "3600.000000s", 3600.0),
     (float("nan"), None, None, None), (float("inf"), None, None, None)],
)  # fmt: skip
def test_durations_in_each_schemas_unit(
    duration: float, nanoseconds: int | None, latency: str | None, seconds: float | None
) -> None:
    """ECS event.duration in integer nanoseconds, GCP latency as a Duration, OTel in
    seconds; a duration that is not finite is null, or no latency."""
    records = [make_record(duration=duration), make_record()]
    ecs = strict_json(make_format("ecs", utc=True).format_batch(records).split(b"\n")[0])
    gcp = strict_json(make_format("gcp", utc=True).format_batch(records).split(b"\n")[0])
    otel = strict_json(make_format("otel", utc=True).format_batch(records).split(b"\n")[0])
    assert ecs["event"]["duration"] == nanoseconds
    assert gcp["httpRequest"].get("latency") == latency
    assert otel["attributes"]["http.server.request.duration"] == seconds


def test_a_duration_past_a_floats_range_is_null() -> None:
    """An integer duration too big for a float (no server hands one over) is null, or no
    latency, rather than failing the batch."""
    records = [make_record(duration=10**400), make_record()]
    for name, read in [("ecs", lambda e: e["event"]["duration"]),
                       ("gcp", lambda e: e["httpRequest"].get("latency")),
                       ("otel", lambda e: e["attributes"]["http.server.request.duration"])]:  # fmt: skip
        data = make_format(name, utc=True).format_batch(records)
        assert read(strict_json(lines_of(data, 2)[0])) is None
        assert read(strict_json(lines_of(data, 2)[1])) is not None


def test_bodies_servers_discard_count_no_bytes() -> None:
    """HEAD and 304 responses show 0 body bytes, as in every other format."""
    records = [make_record(method="HEAD", bytes_sent=7), make_record(status=304, bytes_sent=7)]
    for name, read in [("ecs", lambda e: e["http"]["response"]["body"]["bytes"]),
                       ("gcp", lambda e: e["httpRequest"]["responseSize"]),
                       ("otel", lambda e: e["attributes"]["http.response.body.size"])]:  # fmt: skip
        data = make_format(name, utc=True).format_batch(records)
        assert [read(strict_json(line)) for line in lines_of(data, 2)] == (
            ["0", "0"] if name == "gcp" else [0, 0]
        )


def test_ecs_top_level_keys_are_laid_out_as_ecs_logging_writes_them() -> None:
    """ecs-logging's own formatter puts @timestamp, log.level and message first, and
    log.level and ecs.version as dotted top-level keys: so do the ecs lines (the
    version is this module's, since ecs-logging still declares 1.6.0)."""
    record = logging.LogRecord("access", logging.WARNING, __file__, 1, "GET /hello 404", None, None)
    record.created, record.msecs = RECORD.time, 250.0
    theirs = json.loads(ecs_logging.StdlibFormatter().format(record))
    ours = strict_json(ECS_LINE.encode().rstrip(b"\n"))
    assert list(theirs)[:3] == list(ours)[:3] == ["@timestamp", "log.level", "message"]
    assert "ecs.version" in theirs
    assert "ecs.version" in ours
    for key in ("@timestamp", "log.level", "message"):
        assert theirs[key] == ours[key], key


def test_utc_is_always_on() -> None:
    """Each schema's time is UTC, whatever utc= says (every built-in format takes it)."""
    for name in SCHEMAS:
        assert make_format(name, utc=False).format_batch([RECORD]) == make_format(
            name, utc=True
        ).format_batch([RECORD])


# -- any record, any client -------------------------------------------------------------------

HEADER_VALUES = st.none() | RAW
RECORDS = st.builds(
    make_record,
    time=st.floats(min_value=0, max_value=4102444800.0),
    duration=st.one_of(st.floats(min_value=0, max_value=1e6), st.just(float("nan"))),
    client=st.one_of(st.none(), st.sampled_from(["", "127.0.0.1", "::1", "/run/app.sock"]), TEXT),
    method=st.one_of(st.sampled_from(["GET", "HEAD", "get", "PROPFIND"]), TEXT),
    path=RAW,
    query=RAW,
    protocol=st.one_of(st.sampled_from(["HTTP/1.1", "HTTP/2"]), TEXT),
    status=st.one_of(st.integers(min_value=100, max_value=599), st.integers(min_value=0, max_value=10**30)),
    bytes_sent=st.integers(min_value=0, max_value=10**30),
    referer=HEADER_VALUES,
    user_agent=HEADER_VALUES,
    notes=RECORD_NOTES,
    extras=EXTRAS,
)  # fmt: skip


@pytest.mark.parametrize("name", SCHEMAS)
@SETTINGS
@given(st.lists(RECORDS, max_size=8))
def test_any_batch_is_one_valid_object_per_record(name: str, records: list[Record]) -> None:
    """Whatever the records hold, each line is one strict, ASCII JSON object with the
    schema's fields and types, giving back the client's exact bytes."""
    fmt = make_format(name, utc=True)
    data = fmt.format_batch(records)
    assert data == b"".join(fmt.format_batch([record]) for record in records)
    for line, record in zip(lines_of(data, len(records)), records, strict=True):
        entry = CHECKS[name](without_notes(name, strict_json(line), record))
        check_against_record(name, entry, record)


def without_notes(name: str, entry: dict[str, Any], record: Record) -> dict[str, Any]:
    """``entry`` without the record's notes, which must be its last custom fields, each
    named as the note is (prefixed ``app.`` where the object had the name already)."""
    notes = record.notes or {}
    custom = entry["attributes"] if name == "otel" else entry
    keys = list(custom)
    for note, key in zip(notes, keys[len(keys) - len(notes) :], strict=True):
        expected = str(note).encode("utf-8", "surrogatepass")
        bare = key
        while unescape(bare.encode()) != expected and bare.startswith("app."):
            bare = bare.removeprefix("app.")
        assert unescape(bare.encode()) == expected, (key, note)
        del custom[key]
    return entry


HOSTILE = [
    b"\n", b"\r\n", b'"', b'\\', b'\\"', b"\x00", b"\x1b[31m", b"\x7f", b"\xff\xfe", b"\xc0\x80",
    b"\xed\xa0\x80", "\u2028\u0085".encode(), b'","status":1,"x":"', b"}\n{", b"\\u0000",
]  # fmt: skip


@pytest.mark.parametrize("name", SCHEMAS)
@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_client_never_breaks_a_line(name: str, value: bytes) -> None:
    """Newlines, quotes, invalid UTF-8, control characters and JSON of the client's own,
    in every field a client controls, leave one valid line holding the exact bytes."""
    text = value.decode("latin-1")
    record = make_record(
        method="GET" + text, path=b"/" + value, query=value, protocol="HTTP/" + text,
        client=text, referer=value, user_agent=value,
    )  # fmt: skip
    data = make_format(name, utc=True).format_batch([make_record(), record, make_record()])
    lines = lines_of(data, 3)
    for line in lines:
        CHECKS[name](strict_json(line))
    check_against_record(name, strict_json(lines[1]), record)


# -- configuration --------------------------------------------------------------------------


def test_the_presets_are_formats_by_name() -> None:
    """FORMATS lists them, make_format and AccessLog take them, an unknown name lists them."""
    assert set(SCHEMAS) <= set(FORMATS)
    for name in SCHEMAS:
        fmt = make_format(name, utc=False)
        assert isinstance(fmt, SchemaFormat)
        assert repr(fmt) == f"SchemaFormat({name!r})"
        assert fmt.request_header_names == {b"user-agent", b"referer", b"traceparent"}
        assert fmt.response_header_names == frozenset()
    with pytest.raises(ConfigurationError, match=r"'xml'.*json, ecs, gcp, otel"):
        make_format("xml", utc=True)
    with pytest.raises(ConfigurationError, match=r"'xml'.*ecs, gcp, otel"):
        SchemaFormat("xml")


@pytest.mark.parametrize("name", SCHEMAS)
def test_gunicorn_access_logformat_takes_the_names(name: str) -> None:
    """--access-logformat ecs (gcp, otel) chooses the preset, as json does."""
    assert _format_for(name, utc=False) == name
    with pytest.raises(ConfigurationError, match=r"ecs, gcp, otel"):
        _format_for("elastic", utc=False)


def test_access_log_writes_preset_lines(tmp_path: Path) -> None:
    """AccessLog(format="gcp") writes the lines, its records keeping only the headers it reads."""
    path = tmp_path / "access.log"
    with AccessLog(str(path), "gcp", utc=True) as log:
        assert log.submit(RECORD)
    assert path.read_text() == GCP_LINE


# -- a real server --------------------------------------------------------------------------


def parse_ecs_line(line: bytes) -> tuple[LoggedExchange, float]:
    fields = check_ecs(strict_json(line))
    referer = fields.get("http.request.referrer")
    agent = fields.get("user_agent.original")
    return (
        LoggedExchange(
            fields["http.request.method"],
            json_value_bytes(fields["url.original"]),
            "HTTP/" + fields["http.version"],
            fields["http.response.status_code"],
            fields["http.response.body.bytes"],
            None if referer is None else json_value_bytes(referer),
            None if agent is None else json_value_bytes(agent),
            fields["client.address"],
        ),
        utc_time(fields["@timestamp"]),
    )


def uvicorn_command(port: int) -> list[str]:
    return [
        PYTHON, "-m", "uvicorn", "tests.apps.asgi_app:app", "--no-access-log",
        "--host", LOOPBACK, "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip


def test_uvicorn_writes_ecs_lines_that_parse(tmp_path: Path) -> None:
    """uvicorn serving through the ASGI middleware with format="ecs": one valid ECS line per
    logged request, each with the request's exact fields."""
    exchanges = build_exchanges(120)
    log_path = tmp_path / "access.log"
    environment = server_environment(log_path, "ecs", HOLD_UNTIL_CLOSE)
    with running_server(uvicorn_command, environment, tmp_path / "server.out") as server:
        started = time.time()
        send_exchanges(server.port, exchanges)
        finished = time.time()
        assert server.stop() in UVICORN_CLEAN_EXITS, server.output()
        assert "boundlog:" not in server.output()
    lines = read_log_lines(log_path)
    logged = Counter()
    for line in lines:
        fields, when = parse_ecs_line(line)
        assert int(started) <= when <= finished
        logged[fields] += 1
    expected = Counter(expected_json(exchange) for exchange in exchanges if exchange.logged)
    assert logged == expected
    # An empty query or a missing header leaves its field out (the JSON format's null).
    assert any(b'"query"' not in line for line in lines)
    assert any(b'"referrer"' in line for line in lines)


@pytest.mark.parametrize(
    "request_headers",
    [
        [(b"user-agent", b"t/1"), (b"referer", b"https://r/")],
        [("USER-AGENT", "t/1"), ("REFERER", "https://r/")],
        {"HTTP_USER_AGENT": "t/1", "HTTP_REFERER": "https://r/", "PATH_INFO": "/"},
        [(b"User-Agent", b"t/1"), (b"Referer", b"https://r/")],
    ],
    ids=["asgi", "gunicorn", "wsgi-environ", "mixed-case"],
)
@pytest.mark.parametrize("name", SCHEMAS)
def test_header_sources_of_every_kind(name: str, request_headers: Any) -> None:
    """ASGI's byte pairs, gunicorn's upper-case text pairs and a WSGI environ give the same line."""
    expected = make_format(name, utc=True).format_batch(
        [make_record(user_agent=b"t/1", referer=b"https://r/")]
    )
    record = make_record(request_headers=request_headers)
    assert make_format(name, utc=True).format_batch([record]) == expected


@pytest.mark.parametrize(
    "headers",
    [
        [(b"x-request-id", b"r-1"), (b"authorization", b"Bearer s")],
        [("X-REQUEST-ID", "r-1"), ("AUTHORIZATION", "Bearer s")],
        {"HTTP_X_REQUEST_ID": "r-1", "HTTP_AUTHORIZATION": "Bearer s", "PATH_INFO": "/"},
    ],
    ids=["asgi", "gunicorn", "wsgi-environ"],
)
def test_otel_writes_the_picked_headers_as_http_header_attributes(headers: Any) -> None:
    """request_headers and response_headers add ``http.request.header.<name>`` and
    ``http.response.header.<name>`` (lower case, a list of one string) after the built-in
    attributes and before the application's; a credential is redacted unless allowed; an
    absent one is left out; an application's field of the same name is prefixed."""
    record = make_record(
        request_headers=headers,
        response_headers=[(b"content-type", b"text/plain")],
        notes={"http.request.header.x-request-id": 7},
    )
    fmt = SchemaFormat("otel", request_headers=["X-Request-ID", "Authorization", "X-Absent"],
                       response_headers=["Content-Type"])  # fmt: skip
    attributes = strict_json(fmt.format_batch([record]).rstrip(b"\n"))["attributes"]
    assert list(attributes.items())[-4:] == [
        ("http.request.header.x-request-id", ["r-1"]),
        ("http.request.header.authorization", ["[redacted]"]),
        ("http.response.header.content-type", ["text/plain"]),
        ("app.http.request.header.x-request-id", 7),
    ]
    allowed = SchemaFormat(
        "otel", request_headers=["Authorization"], allow_headers=["Authorization"]
    )
    assert strict_json(allowed.format_batch([record]).rstrip(b"\n"))["attributes"][
        "http.request.header.authorization"
    ] == ["Bearer s"]
    assert fmt.request_header_names >= {b"x-request-id", b"authorization", b"x-absent"}
    assert fmt.response_header_names == {b"content-type"}


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_picked_header_never_breaks_an_otel_line(value: bytes) -> None:
    """A picked header's value is escaped as every value a client sends is."""
    record = make_record(request_headers=[(b"x-request-id", value)])
    fmt = SchemaFormat("otel", request_headers=["X-Request-ID"])
    [written] = strict_json(fmt.format_batch([record]).rstrip(b"\n"))["attributes"][
        "http.request.header.x-request-id"
    ]
    assert unescape(written.encode()) == value


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("ecs", {"request_headers": ["X-Request-ID"]}, "are for SchemaFormat('otel')"),
        ("otel", {"request_headers": ["Referer"]}, "always writes Referer"),
        ("otel", {"request_headers": "X-Request-ID"}, "write ['X-Request-ID']"),
        ("otel", {"response_headers": ["Bad Name"]}, "not a header field name"),
    ],
)
def test_picked_headers_a_schema_cannot_write_are_refused(
    name: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        SchemaFormat(name, **options)


def test_gunicorn_access_logformat_gcp_writes_gcp_lines(tmp_path: Path) -> None:
    """gunicorn with --access-logformat gcp: each request a Cloud Logging line."""
    log_path = tmp_path / "access.log"

    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "--logger-class", "boundlog.gunicorn.Logger",
            "-b", f"{LOOPBACK}:{port}", "-w", "1", "-k", "gthread", "--log-level", "warning",
            "--access-logfile", str(log_path), "--access-logformat", "gcp",
            "tests.apps.bare_wsgi:app",
        ]  # fmt: skip

    requests = [
        ("GET", "/bytes/5?n=1", {"Referer": "https://example.com/"}),
        ("HEAD", "/bytes/7", {}),
        ("GET", "/no/such/page", {}),
    ]
    with running_server(command, {}, tmp_path / "gunicorn.out") as server:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            for method, target, headers in requests:
                client.request(method, target, headers={"User-Agent": "t/1", **headers})
        assert server.stop() == 0, server.output()
    entries = [check_gcp(strict_json(line)) for line in read_log_lines(log_path)]
    summary = sorted(
        (e["severity"], e["message"], e["httpRequest"]["requestUrl"], e["httpRequest"]["status"],
         e["httpRequest"]["responseSize"], e["httpRequest"].get("referer"),
         e["httpRequest"]["userAgent"], e["httpRequest"]["remoteIp"], e["httpRequest"]["protocol"])
        for e in entries
    )  # fmt: skip
    assert summary == [
        ("INFO", "GET /bytes/5 200", "/bytes/5?n=1", 200, "5", "https://example.com/", "t/1",
         LOOPBACK, "HTTP/1.1"),
        ("INFO", "HEAD /bytes/7 200", "/bytes/7", 200, "0", None, "t/1", LOOPBACK, "HTTP/1.1"),
        ("WARNING", "GET /no/such/page 404", "/no/such/page", 404, "10", None, "t/1", LOOPBACK,
         "HTTP/1.1"),
    ]  # fmt: skip


# -- trace ids and the application's fields --------------------------------------------------

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01".encode()


def preset_line(name: str, record: Record) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(make_format(name, utc=True).format_batch([record]))
    return entry


@pytest.mark.parametrize("source", ["span", "header"])
def test_each_preset_writes_the_trace_where_its_schema_keeps_it(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ECS's trace.id and span.id, OpenTelemetry's trace_id and span_id, Cloud Logging's
    trace (the trace's resource name when GOOGLE_CLOUD_PROJECT names the project) and
    spanId: from the request's span, else its traceparent header."""
    if source == "span":
        record = make_record(extras=Extras(trace=(int(TRACE_ID, 16), int(PARENT_ID, 16))))
    else:
        record = make_record(request_headers=[(b"traceparent", TRACEPARENT)])
    ecs = preset_line("ecs", record)
    assert (ecs["trace"], ecs["span"]) == ({"id": TRACE_ID}, {"id": PARENT_ID})
    otel = preset_line("otel", record)
    assert (otel["trace_id"], otel["span_id"]) == (TRACE_ID, PARENT_ID)
    assert "trace_id" not in otel["attributes"]
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    gcp = preset_line("gcp", record)
    assert gcp["logging.googleapis.com/trace"] == TRACE_ID
    assert gcp["logging.googleapis.com/spanId"] == PARENT_ID
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", 'my-"project%s')
    gcp = preset_line("gcp", record)
    assert gcp["logging.googleapis.com/trace"] == f'projects/my-"project%s/traces/{TRACE_ID}'


def test_no_trace_no_trace_fields() -> None:
    record = make_record(request_headers=[(b"traceparent", b"00-" + b"0" * 32 + b"-01")])
    assert "trace" not in preset_line("ecs", record)
    assert "trace_id" not in preset_line("otel", record)
    assert not [key for key in preset_line("gcp", record) if key.startswith("logging.")]


def test_otel_writes_the_route_as_http_route() -> None:
    line = preset_line("otel", make_record(extras=Extras(route="/items/{item_id}")))
    assert line["attributes"]["http.route"] == "/items/{item_id}"
    assert "http.route" not in preset_line("otel", make_record())["attributes"]


def test_the_applications_fields_go_where_each_schema_keeps_custom_fields() -> None:
    """Top-level in ECS and Cloud Logging (its jsonPayload), attributes in OpenTelemetry;
    a name the line already has is prefixed app., never overwriting."""
    notes = {"user": "ada", "tenant": 7, "http": "x", "severity": "y", "url.path": "z"}
    record = make_record(notes=notes)
    ecs = preset_line("ecs", record)
    assert (ecs["user"], ecs["tenant"], ecs["app.http"], ecs["severity"]) == ("ada", 7, "x", "y")
    assert ecs["http"]["request"]["method"] == "GET"
    # ECS reads a dotted name as a path: url.path is the line's own.
    assert (ecs["app.url.path"], "url.path" in ecs) == ("z", False)
    gcp = preset_line("gcp", record)
    assert (gcp["user"], gcp["http"], gcp["app.severity"]) == ("ada", "x", "y")
    assert gcp["severity"] == "INFO"
    attributes = preset_line("otel", record)["attributes"]
    assert (attributes["user"], attributes["app.url.path"]) == ("ada", "z")
    assert attributes["url.path"] == "/hello"


def test_an_ecs_field_named_by_the_path_of_one_of_the_lines_own_cannot_forge_it() -> None:
    """Elasticsearch and ecs-logging read a dotted name as a path into objects: an
    application's ``http.response.status_code`` was the line's status a second time,
    its ``event.outcome`` the line's outcome; ``message.x`` would make ``message`` an
    object, which the index refuses.  Each is prefixed ``app.``; a name that starts
    elsewhere is kept."""
    notes = {
        "http.response.status_code": 999, "event.outcome": "success", "url.path": "/evil",
        "message.x": 1, "log.level": "debug", "user.name": "ada",
    }  # fmt: skip
    ecs = preset_line("ecs", make_record(notes=notes))
    expanded: dict[str, Any] = {}
    for key, value in ecs.items():
        # As ecs-logging's and Elasticsearch's readers do (Elasticsearch's dotted names).
        *parents, leaf = key.split(".")
        node = expanded
        for parent in parents:
            node = node.setdefault(parent, {})
        assert leaf not in node, key
        node[leaf] = value
    assert expanded["http"]["response"]["status_code"] == 200
    assert expanded["app"]["http"]["response"]["status_code"] == 999
    assert expanded["app"]["event"]["outcome"] == "success"
    assert expanded["user"]["name"] == "ada"


def test_ecs_logging_reads_the_trace_and_the_fields_as_its_own() -> None:
    """ecs-logging's own formatter puts extra fields and the trace in the same places."""
    record = make_record(
        extras=Extras(trace=(int(TRACE_ID, 16), int(PARENT_ID, 16))), notes={"user": "ada"}
    )
    ours = preset_line("ecs", record)
    log_record = logging.LogRecord("access", logging.INFO, __file__, 1, "m", None, None)
    log_record.__dict__.update({"user": "ada", "trace.id": TRACE_ID, "span.id": PARENT_ID})
    theirs = json.loads(ecs_logging.StdlibFormatter().format(log_record))
    assert theirs["user"] == ours["user"]
    assert theirs["trace"] == ours["trace"]
    assert theirs["span"] == ours["span"]
