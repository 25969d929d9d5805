"""The C core's OTLP LogRecord (csrc/sinks/otlp.c) against the pure-Python reference:
the same protobuf bytes.

``_logs.log_record_python`` defines the LogRecord of an ``otel`` preset line (it is
itself held equal to the OpenTelemetry SDK's encoder by tests/unit/sinks/
test_otlp_protobuf.py); the C ``otlp_log_record`` must give the same bytes for every
line json.loads can give back, and hand back (None) anything else, which the reference
then encodes.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from _examples import examples
from _strategies import HOSTILE_TEXT_RECORDS, NOTE_NAMES, TEXT, notes_dicts
from boundlog import SchemaFormat, _core
from boundlog.sinks.otlp._logs import log_record, log_record_python

needs_c = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)
pytestmark = needs_c

#: What json.loads gives back: text with lone surrogates (a ``\ud800`` escape), ints of
#: any size, floats of every kind, nulls, and lists and objects of them.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from([2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**40])
    | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)  # fmt: skip
HEX_IDS = st.none() | st.text("0123456789abcdefABCDEF", max_size=32).filter(
    lambda text: len(text) % 2 == 0
)
NANOSECONDS = st.integers(min_value=0, max_value=2**64 - 1)

LINES = st.fixed_dictionaries(
    {},
    optional={
        "severity_text": st.sampled_from(["INFO", "WARN", "ERROR", "", "DEBUG"]) | TEXT,
        "body": JSON_VALUES,
        "attributes": st.dictionaries(st.one_of(NOTE_NAMES, st.just("")), JSON_VALUES, max_size=6),
        "trace_id": HEX_IDS,
        "span_id": HEX_IDS,
        "timestamp": st.just("2026-12-05T09:00:00.000Z"),
    },
)


def encoded(line: dict[str, Any], time_ns: int, observed_ns: int) -> bytes | None:
    assert _core.otlp_log_record is not None
    return _core.otlp_log_record(line, time_ns, observed_ns)


@settings(max_examples=examples(600), suppress_health_check=[HealthCheck.too_slow])
@given(LINES, NANOSECONDS, NANOSECONDS)
@example({"attributes": {"a" * 200: "b" * 20000}}, 0, 0)  # lengths of two and three bytes
@example({"body": [[[[1]]]], "trace_id": "", "span_id": ""}, 1, 2**64 - 1)
@example({"attributes": {"x": -1, "y": -0.0, "z": float("nan"), "n": None}}, 5, 5)
def test_any_line_json_gives_back_is_the_reference_s_bytes(
    line: dict[str, Any], time_ns: int, observed_ns: int
) -> None:
    """Every line of JSON values is encoded in C (never handed back), byte for byte as
    the reference encodes it."""
    assert encoded(line, time_ns, observed_ns) == log_record_python(line, time_ns, observed_ns)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(HOSTILE_TEXT_RECORDS, min_size=1, max_size=6),
    st.lists(notes_dicts(), min_size=6, max_size=6),
)
def test_every_otel_preset_line_is_encoded_in_c(records: list[Any], notes: list[Any]) -> None:
    """The lines the OTLP sink encodes, from hostile records with any application
    fields and picked headers: each in C, as the reference encodes it."""
    records = [record._replace(notes=note) for record, note in zip(records, notes, strict=False)]
    fmt = SchemaFormat("otel", request_headers=["X-Request-ID", "Cookie"])
    for line in fmt.format_batch(records).splitlines():
        parsed = json.loads(line)
        assert encoded(parsed, 1, 2) is not None
        assert log_record(parsed, 1, 2) == log_record_python(parsed, 1, 2)


class Text(str):
    pass


class Number(int):
    pass


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "line",
    [
        {"attributes": {"k": Text("v")}},
        {"attributes": {"k": Number(3)}},
        {"attributes": {"k": (1, 2)}},
        {"attributes": {1: "v"}},
        {"attributes": {"k": b"bytes"}},
        {"body": object()},
        {"attributes": {"k": nested(70)}},
        {"trace_id": "0a f7"},
        {"trace_id": "zz"},
        {"trace_id": 12},
        {"severity_text": None},
    ],
    ids=["str-subclass", "int-subclass", "tuple", "int-key", "bytes", "object", "deep",
         "hex-with-space", "not-hex", "not-text", "null-severity"],
)  # fmt: skip
def test_what_json_loads_does_not_make_is_left_to_the_reference(line: dict[str, Any]) -> None:
    """Handed back, so that the reference decides: its bytes, or its error."""
    assert encoded(line, 1, 2) is None
    try:
        expected: Any = log_record_python(line, 1, 2)
    except (TypeError, ValueError, AttributeError) as error:
        expected = type(error)
    try:
        got: Any = log_record(line, 1, 2)
    except (TypeError, ValueError, AttributeError) as error:
        got = type(error)
    assert got == expected


@pytest.mark.parametrize("time_ns", [-1, 2**64, 1.5])
def test_a_time_that_is_no_fixed64_is_left_to_the_reference(time_ns: Any) -> None:
    assert encoded({}, time_ns, 0) is None
    assert encoded({}, 0, time_ns) is None


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="no /proc")
def test_many_records_leak_neither_references_nor_memory() -> None:
    line = {
        "severity_text": "WARN",
        "body": "GET /x 404",
        "attributes": {"a": "\ud800", "b": 10**30, "c": [1.5, None, {"d": True}], "e": -7},
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "b7ad6b7169203331",
    }
    values = [line, *line["attributes"].values()]
    assert encoded(line, 1, 2) is not None
    gc.collect()
    before = [sys.getrefcount(value) for value in values]
    for _ in range(200):
        encoded(line, 1, 2)
    with open("/proc/self/statm") as statm:
        rss = int(statm.read().split()[1])
    for _ in range(100_000):
        encoded(line, 1, 2)
    with open("/proc/self/statm") as statm:
        grown = (int(statm.read().split()[1]) - rss) * os.sysconf("SC_PAGE_SIZE")
    gc.collect()
    assert [sys.getrefcount(value) for value in values] == before
    # A leak of a byte a record would be 100 KB; a leaked record, 20 MB.  Under
    # AddressSanitizer freed memory is held in quarantine: no measure there.
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        assert grown < 2_000_000
