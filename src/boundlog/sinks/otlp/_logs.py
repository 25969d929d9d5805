"""OTLP's log messages (opentelemetry-proto's ``logs.proto``): a batch of records as one
``ExportLogsServiceRequest``, and the collector's answer read back.

Each record's LogRecord is made from its line in the ``otel`` schema preset
(``formats/_schemas.py``): the OpenTelemetry log data model with the HTTP semantic
conventions' attributes, escaped and redacted as every line is, and checked by that
preset's tests.  So the two say the same of a request, and what a line in the preset
shows is what a collector receives: the severity from the status (INFO, WARN for 4xx,
ERROR for 5xx), the body ``GET /items 200``, the trace and span ids in the LogRecord's
own fields, the attributes in the preset's order, the application's fields last.  A
null (a field the application set to None, a duration that is not finite) is left out,
as the OpenTelemetry SDK leaves out an attribute it cannot hold.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from ... import _core
from ..._version import __version__
from ._protobuf import (
    DOUBLE,
    FIXED64,
    VARINT,
    bytes_field,
    fields,
    fixed64_field,
    key,
    length_delimited,
    message_field,
    string_field,
    varint,
    varint_field,
)

#: The SeverityNumber of each severity_text the preset writes.
SEVERITY_NUMBERS = {"INFO": 9, "WARN": 13, "ERROR": 17}
#: The instrumentation scope the records come from.
SCOPE_NAME = "boundlog"
_INT64_LEAST, _INT64_MOST = -(1 << 63), (1 << 63) - 1


def _is_int64(value: int) -> bool:
    # Not ``value in range(...)``: for an int subclass that tests each number in turn.
    return _INT64_LEAST <= value <= _INT64_MOST


def any_value(value: object) -> bytes:
    """An ``AnyValue`` holding ``value``, a JSON value; a oneof writes its value even
    when it is the default (``""``, 0, false).  An int beyond int64 is its decimal
    text, which loses nothing."""
    if isinstance(value, str):
        return length_delimited(1, value.encode("utf-8", "backslashreplace"))
    if value is True or value is False:
        return key(2, VARINT) + varint(int(value))
    if isinstance(value, int):
        if _is_int64(value):
            return key(3, VARINT) + varint(value)
        return length_delimited(1, str(value).encode("ascii"))
    if isinstance(value, float):
        return key(4, FIXED64) + DOUBLE.pack(value)
    if isinstance(value, list):
        # ArrayValue { repeated AnyValue values = 1 }
        return length_delimited(5, b"".join(message_field(1, any_value(item)) for item in value))
    if isinstance(value, dict):
        # KeyValueList { repeated KeyValue values = 1 }
        return length_delimited(6, _key_values(value.items(), 1))
    return b""  # null: an empty AnyValue


# Encoded attributes (the whole field) of the scalars that repeat from one request to
# the next (the method, the protocol version, the status, the client, its user agent):
# looked up rather than encoded again.  Bounded: emptied when full, and only values
# short enough to repeat are kept (a client's 16 KB user agents would otherwise hold
# tens of MB here, outside the queue's byte bound, for the life of the process).
_ENCODED: dict[tuple[int, str, type, object], bytes] = {}
_ENCODED_MOST = 4096
_ENCODED_LONGEST = 512


def _key_value(number: int, name: str, value: object) -> bytes:
    """A ``KeyValue { key = 1; value = 2 }`` as field ``number``."""
    return message_field(number, string_field(1, name) + message_field(2, any_value(value)))


def _key_values(items: Iterable[tuple[str, Any]], number: int) -> bytes:
    """Each ``KeyValue`` as field ``number``, nulls left out."""
    out = []
    for name, value in items:
        if value is None:
            continue
        if isinstance(value, list | dict | float):
            # Not kept: a float rarely repeats (and -0.0 == 0.0, whose bytes differ).
            out.append(_key_value(number, name, value))
            continue
        # The type is part of the key: True == 1 are two different values here.
        cache_key = (number, name, type(value), value)
        encoded = _ENCODED.get(cache_key)
        if encoded is None:
            encoded = _key_value(number, name, value)
            if len(encoded) <= _ENCODED_LONGEST:
                if len(_ENCODED) >= _ENCODED_MOST:
                    _ENCODED.clear()
                _ENCODED[cache_key] = encoded
        out.append(encoded)
    return b"".join(out)


def log_record(line: Mapping[str, Any], time_ns: int, observed_ns: int) -> bytes:
    """The ``LogRecord`` of one ``otel`` preset line (parsed): the C core's bytes when
    it is in use and encodes the line (csrc/sinks/otlp.c), else the reference's."""
    if _core.otlp_log_record is not None and type(line) is dict:
        encoded = _core.otlp_log_record(line, time_ns, observed_ns)
        if encoded is not None:
            return encoded
    return log_record_python(line, time_ns, observed_ns)


def log_record_python(line: Mapping[str, Any], time_ns: int, observed_ns: int) -> bytes:
    """The ``LogRecord`` of one ``otel`` preset line (parsed), fields in their numbers'
    order: time (1), severity number (2) and text (3), body (5), attributes (6), trace
    id (9), span id (10), observed time (11).  The reference the C core is held equal
    to (tests/speedups/test_speedups_otlp.py)."""
    severity = line.get("severity_text", "")
    body = line.get("body")
    trace_id = line.get("trace_id")
    span_id = line.get("span_id")
    return b"".join(
        (
            fixed64_field(1, time_ns),
            varint_field(2, SEVERITY_NUMBERS.get(severity, 0)),
            string_field(3, severity),
            b"" if body is None else message_field(5, any_value(body)),
            _key_values(line.get("attributes", {}).items(), 6),
            b"" if trace_id is None else bytes_field(9, bytes.fromhex(trace_id)),
            b"" if span_id is None else bytes_field(10, bytes.fromhex(span_id)),
            fixed64_field(11, observed_ns),
        )
    )


def scope_logs(log_records: Iterable[bytes]) -> bytes:
    """``ScopeLogs { scope = 1; repeated LogRecord log_records = 2 }``."""
    scope = string_field(1, SCOPE_NAME) + string_field(2, __version__)
    return message_field(1, scope) + b"".join(message_field(2, record) for record in log_records)


def export_request(resource: bytes, log_records: Iterable[bytes]) -> bytes:
    """``ExportLogsServiceRequest { repeated ResourceLogs resource_logs = 1 }`` of one
    resource (its encoded ``Resource``) and one scope."""
    resource_logs = message_field(1, resource) + message_field(2, scope_logs(log_records))
    return message_field(1, resource_logs)


def resource(attributes: Mapping[str, str]) -> bytes:
    """``Resource { repeated KeyValue attributes = 1 }``."""
    return _key_values(attributes.items(), 1)


def resource_attributes(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The resource's attributes as the OpenTelemetry SDK takes them from the
    environment: ``OTEL_RESOURCE_ATTRIBUTES`` (``key=value,...``, values
    percent-decoded), then ``OTEL_SERVICE_NAME``, which wins for ``service.name``;
    ``service.name`` is ``unknown_service`` when neither gives one."""
    attributes: dict[str, str] = {}
    for item in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        name, equals, value = item.partition("=")
        if equals and name.strip():
            attributes[name.strip()] = unquote(value.strip())
    service = environ.get("OTEL_SERVICE_NAME", "").strip()
    if service:
        attributes["service.name"] = service
    return {"service.name": attributes.pop("service.name", "unknown_service"), **attributes}


# -- OTLP/JSON: the same messages in protobuf's JSON mapping, with OTLP's exceptions
# (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): lowerCamelCase
# keys, trace and span ids in hex (not base64), enums as numbers, 64-bit integers as
# decimal strings (as protobuf's mapping writes them; receivers take either).


def json_value(value: object) -> dict[str, Any]:
    """``value`` (a JSON value) as an ``AnyValue`` in OTLP/JSON; None for a null."""
    if isinstance(value, str):
        return {"stringValue": _text(value)}
    if value is True or value is False:
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)} if _is_int64(value) else {"stringValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [json_value(item) for item in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": _json_key_values(value.items())}}
    return {}


def _text(value: str) -> str:
    # As a protobuf string: a lone surrogate as its escape, as string_field writes it.
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _json_key_values(items: Iterable[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"key": _text(name), "value": json_value(value)}
        for name, value in items
        if value is not None
    ]


def json_log_record(line: Mapping[str, Any], time_ns: int, observed_ns: int) -> dict[str, Any]:
    """The ``LogRecord`` of one ``otel`` preset line (parsed), in OTLP/JSON; default
    values left out as the protobuf encoding leaves them out."""
    record: dict[str, Any] = {}
    if time_ns:
        record["timeUnixNano"] = str(time_ns)
    if observed_ns:
        record["observedTimeUnixNano"] = str(observed_ns)
    severity = line.get("severity_text", "")
    if SEVERITY_NUMBERS.get(severity):
        record["severityNumber"] = SEVERITY_NUMBERS[severity]
    if severity:
        record["severityText"] = severity
    if line.get("body") is not None:
        record["body"] = json_value(line["body"])
    attributes = _json_key_values(line.get("attributes", {}).items())
    if attributes:
        record["attributes"] = attributes
    if line.get("trace_id"):
        record["traceId"] = line["trace_id"]
    if line.get("span_id"):
        record["spanId"] = line["span_id"]
    return record


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def json_log_record_bytes(line: Mapping[str, Any], time_ns: int, observed_ns: int) -> bytes:
    """``json_log_record`` encoded: the bytes a request holds for the record, so that a
    batch can be cut into requests by their size (``json_export_request``)."""
    return _json_bytes(json_log_record(line, time_ns, observed_ns))


def json_export_request(attributes: Mapping[str, str], log_records: list[bytes]) -> bytes:
    """``ExportLogsServiceRequest`` in OTLP/JSON, as ``export_request`` in protobuf, of
    LogRecords already encoded (``json_log_record_bytes``: a batch is cut into
    requests by their size)."""
    resource = _json_bytes({"attributes": _json_key_values(attributes.items())})
    scope = _json_bytes({"name": SCOPE_NAME, "version": __version__})
    return b"".join(
        (
            b'{"resourceLogs":[{"resource":',
            resource,
            b',"scopeLogs":[{"scope":',
            scope,
            b',"logRecords":[',
            b",".join(log_records),
            b"]}]}]}",
        )
    )


def rejected_json(answer: bytes) -> tuple[int, str]:
    """``rejected`` for an OTLP/JSON answer (an empty body is a full success)."""
    if not answer.strip():
        return 0, ""
    try:
        partial = json.loads(answer).get("partialSuccess") or {}
        return int(partial.get("rejectedLogRecords") or 0), str(partial.get("errorMessage") or "")
    except (ValueError, AttributeError, TypeError) as error:
        raise ValueError(f"not an OTLP/JSON answer: {error}") from None


def rejected(answer: bytes) -> tuple[int, str]:
    """What an ``ExportLogsServiceResponse`` says was rejected: the count of
    ``partial_success.rejected_log_records`` and its ``error_message`` (0 and ``""``
    for a full success).  Raises ValueError for bytes that are not such a message."""
    count, message = 0, ""
    for number, _wire_type, value in fields(answer):
        if number == 1 and isinstance(value, bytes):
            for inner, _inner_type, inner_value in fields(value):
                if inner == 1 and isinstance(inner_value, int):
                    count = inner_value - (1 << 64) if inner_value >= 1 << 63 else inner_value
                elif inner == 2 and isinstance(inner_value, bytes):
                    message = inner_value.decode("utf-8", "replace")
    return count, message
