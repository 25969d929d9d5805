"""OTLP's log messages as boundlog writes them (sinks/otlp/_logs.py, _protobuf.py),
against the OpenTelemetry SDK's own encoder and the official opentelemetry-proto
messages: the same bytes for the same records, and messages the official classes read
back field for field."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry._logs import LogRecord as SdkLogRecord
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from _collectors import otlp_json_request
from _examples import examples
from _records import make_record
from _strategies import LINE_HEADERS, RAW, TEXT
from boundlog import Record
from boundlog._version import __version__
from boundlog.formats._schemas import SchemaFormat
from boundlog.sinks.otlp import _logs
from boundlog.sinks.otlp._logs import (
    SCOPE_NAME,
    any_value,
    export_request,
    json_export_request,
    json_log_record_bytes,
    log_record,
    rejected,
    resource,
    resource_attributes,
)
from boundlog.sinks.otlp._protobuf import varint

OTEL = SchemaFormat("otel")
OBSERVED = 1_700_000_001_000_000_000
RESOURCE = {"service.name": "shop", "deployment.environment.name": "test"}


def _valid(text: str) -> str:
    """A string as protobuf can hold it: a lone surrogate as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _sdk_value(value: Any) -> Any:
    if isinstance(value, str):
        return _valid(value)
    if isinstance(value, list):
        return tuple(_sdk_value(item) for item in value)
    return value


def _time_ns(record: Record) -> int:
    seconds = record.time
    return int(seconds * 1e9) if math.isfinite(seconds) and 0 <= seconds < 1.8e10 else 0


def ours(records: list[Record]) -> bytes:
    lines = OTEL.format_batch(records).decode("ascii").splitlines()
    return export_request(
        resource(RESOURCE),
        [
            log_record(json.loads(line), _time_ns(record), OBSERVED)
            for line, record in zip(lines, records, strict=True)
        ],
    )


def the_sdk_s(records: list[Record]) -> bytes:
    """The same records as the OpenTelemetry SDK's LogRecords, encoded by its exporter."""
    lines = OTEL.format_batch(records).decode("ascii").splitlines()
    scope = InstrumentationScope(SCOPE_NAME, __version__)
    readable = []
    for line, record in zip(lines, records, strict=True):
        fields = json.loads(line)
        attributes = {
            _valid(name): _sdk_value(value)
            for name, value in fields["attributes"].items()
            if value is not None
        }
        sdk_record = SdkLogRecord(
            timestamp=_time_ns(record),
            observed_timestamp=OBSERVED,
            trace_id=int(fields["trace_id"], 16) if "trace_id" in fields else 0,
            span_id=int(fields["span_id"], 16) if "span_id" in fields else 0,
            severity_text=fields["severity_text"],
            severity_number=SeverityNumber(fields["severity_number"]),
            body=_valid(fields["body"]),
            attributes=attributes,
        )
        readable.append(ReadableLogRecord(sdk_record, Resource(RESOURCE), scope))
    return encode_logs(readable).SerializeToString()


# Application fields the SDK can hold too: JSON scalars, ints within int64.
SDK_NOTES = st.dictionaries(
    st.text(max_size=8),
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
    ),
    max_size=4,
)


# Records as servers make them, with hostile bytes and text wherever a client or the
# application puts them, and the application's fields as the SDK can hold them too.
RECORDS = st.builds(
    make_record,
    time=st.floats(min_value=0, max_value=4e9),
    duration=st.floats(allow_nan=True, allow_infinity=True),
    client=st.one_of(st.none(), st.sampled_from(["127.0.0.1", "::1", ""]), TEXT),
    method=st.one_of(st.sampled_from(["GET", "POST", "BREW"]), TEXT),
    path=RAW,
    query=RAW,
    protocol=st.sampled_from(["HTTP/1.1", "HTTP/2", "HTTP/1.0"]),
    status=st.integers(100, 599),
    bytes_sent=st.integers(0, 1 << 40),
    request_headers=LINE_HEADERS,
    notes=st.none() | SDK_NOTES,
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(RECORDS, min_size=1, max_size=5))
def test_the_bytes_equal_the_sdk_encoder_s(records: list[Record]) -> None:
    assert ours(records) == the_sdk_s(records)


def test_a_record_reads_back_field_for_field() -> None:
    traceparent = b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01"
    record = make_record(
        path=b"/items/\xff",
        query=b"a=1",
        status=503,
        request_headers=[(b"traceparent", traceparent), (b"user-agent", b"curl/8")],
        notes={"user": "ada", "count": 3, "ratio": 0.5, "ok": True, "gone": None},
    )
    request = ExportLogsServiceRequest.FromString(ours([record]))
    (resource_logs,) = request.resource_logs
    assert {kv.key: kv.value.string_value for kv in resource_logs.resource.attributes} == RESOURCE
    (scope_logs,) = resource_logs.scope_logs
    assert (scope_logs.scope.name, scope_logs.scope.version) == (SCOPE_NAME, __version__)
    (log,) = scope_logs.log_records
    assert log.time_unix_nano == int(record.time * 1e9)
    assert log.observed_time_unix_nano == OBSERVED
    assert (log.severity_number, log.severity_text) == (17, "ERROR")
    assert log.body.string_value == "GET /items/\\xff 503"
    assert log.trace_id == bytes.fromhex("1" * 32)
    assert log.span_id == bytes.fromhex("2" * 16)
    attributes = {kv.key: kv.value for kv in log.attributes}
    assert attributes["http.request.method"].string_value == "GET"
    assert attributes["url.path"].string_value == "/items/\\xff"
    assert attributes["url.query"].string_value == "a=1"
    assert attributes["http.response.status_code"].int_value == 503
    assert attributes["user_agent.original"].string_value == "curl/8"
    assert attributes["user"].string_value == "ada"
    assert attributes["count"].int_value == 3
    assert attributes["ratio"].double_value == 0.5
    assert attributes["ok"].bool_value is True
    assert "gone" not in attributes


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(RECORDS, min_size=1, max_size=5))
def test_otlp_json_says_what_the_protobuf_says(records: list[Record]) -> None:
    lines = OTEL.format_batch(records).decode("ascii").splitlines()
    as_json = json_export_request(
        RESOURCE,
        [
            json_log_record_bytes(json.loads(line), _time_ns(record), OBSERVED)
            for line, record in zip(lines, records, strict=True)
        ],
    )
    assert otlp_json_request(as_json) == ExportLogsServiceRequest.FromString(ours(records))


@pytest.mark.parametrize(
    ("value", "field", "expected"),
    [
        ("", "string_value", ""),
        (0, "int_value", 0),
        (-1, "int_value", -1),
        (False, "bool_value", False),
        (0.0, "double_value", 0.0),
        (1 << 70, "string_value", str(1 << 70)),
        ("\ud800", "string_value", "\\ud800"),
    ],
)
def test_a_value_is_written_even_when_it_is_the_default(
    value: object, field: str, expected: object
) -> None:
    decoded = AnyValue.FromString(any_value(value))
    assert decoded.WhichOneof("value") == field
    assert getattr(decoded, field) == expected


def test_a_list_and_a_mapping_are_an_array_and_a_key_value_list() -> None:
    decoded = AnyValue.FromString(any_value({"a": ["x", 1], "b": None}))
    (pair,) = decoded.kvlist_value.values
    assert pair.key == "a"
    assert [item.WhichOneof("value") for item in pair.value.array_value.values] == [
        "string_value",
        "int_value",
    ]


def test_the_resource_comes_from_the_sdk_s_variables() -> None:
    environ = {
        "OTEL_RESOURCE_ATTRIBUTES": "service.name=ignored, team=a%2Cb,broken, =x",
        "OTEL_SERVICE_NAME": "shop",
    }
    assert resource_attributes(environ) == {"service.name": "shop", "team": "a,b"}
    assert resource_attributes({}) == {"service.name": "unknown_service"}


def test_a_partial_success_is_read_back() -> None:
    answer = ExportLogsServiceResponse()
    answer.partial_success.rejected_log_records = 3
    answer.partial_success.error_message = "too old"
    assert rejected(answer.SerializeToString()) == (3, "too old")
    assert rejected(b"") == (0, "")
    with pytest.raises(ValueError, match="cut short"):
        rejected(b"\x0a\x05" + varint(1))


def test_the_reference_encoder_keeps_only_short_values_for_reuse() -> None:
    """Its cache of encoded attributes holds values that repeat (a method, a status, a
    browser's user agent), never a client's long one: 4,000 requests with 16 KB user
    agents left 55 MB there after the log closed."""
    for number in range(64):
        line = {"attributes": {"user_agent.original": f"{number:05d}" + "x" * 16_000}}
        _logs.log_record_python(line, 0, 0)
    assert max(map(len, _logs._ENCODED.values()), default=0) <= _logs._ENCODED_LONGEST
