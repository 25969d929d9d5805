"""The C core's JSON lines (csrc/formats/json.c) against the pure-Python reference: the same bytes.

``JsonFormat.format_batch_python`` defines a JSON line; the C ``format_json`` must give
the same bytes for every batch it handles, with every option of the format, and hand
back (None) every batch it does not, which the format then formats in Python.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import make_record
from _strategies import (
    HOSTILE_TEXT_RECORDS,
    JSON_TIMES,
    LINE_HEADERS,
    ORDINARY_EXTRAS,
    ORDINARY_VALUES,
    PLAIN_RECORDS,
    TEXT,
    UNSAFE_IN_LONG_VALUES,
    compared,
    compared_packed,
    hostile_records,
    line_options,
    outcome,
    packable_records,
)
from boundlog import ConfigurationError, Extras, JsonFormat, Record, _core

needs_c = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)

RECORDS = hostile_records(LINE_HEADERS)
# Keys of every kind: quotes, backslashes, %, non-ASCII, a lone surrogate, a newline.
KEYS = st.one_of(st.sampled_from(["k", 'k"', "k\\", "k%d", "%", "caf\xe9", "\ud800", "k\n"]), TEXT)
OPTIONS = line_options(KEYS)


def json_format(options: dict[str, Any]) -> JsonFormat:
    try:
        return JsonFormat(**options)
    except ConfigurationError:
        assume(False)  # two fields given one key
        raise


def c_lines(fmt: JsonFormat, records: list[Record]) -> bytes | None:
    assert _core.format_json is not None
    return _core.format_json(
        records, fmt._clock.parts, fmt._texts, fmt._header_fields, fmt._keys, fmt._trace_header,
        fmt._extras_fields,
    )  # fmt: skip


def check(fmt: JsonFormat, records: list[Record]) -> Any:
    return compared(fmt, lambda batch: c_lines(fmt, batch), records)


@needs_c
def test_a_byte_to_escape_anywhere_in_a_long_value() -> None:
    fmt = JsonFormat()
    records = [
        make_record(client=value.decode("latin-1"), path=value, query=value, user_agent=value)
        for value in UNSAFE_IN_LONG_VALUES
    ]
    assert check(fmt, records) is not None


@needs_c
@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORDS, max_size=8), OPTIONS)
def test_c_and_python_give_the_same_bytes(records: list[Record], options: dict[str, Any]) -> None:
    check(json_format(options), records)


@needs_c
@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PLAIN_RECORDS, max_size=8), RECORDS, st.data(), OPTIONS)
def test_a_batch_mixing_plain_and_hostile_records(
    plain: list[Record], hostile: Record, data: st.DataObject, options: dict[str, Any]
) -> None:
    records = list(plain)
    records.insert(data.draw(st.integers(min_value=0, max_value=len(records))), hostile)
    check(json_format(options), records)


# The fields applications add (boundlog.add_fields): names that clash with no key,
# hostile text among them, and values of the JSON scalar types, ints within 64 bits.
ORDINARY_NOTES = st.none() | st.dictionaries(
    st.sampled_from(["user", "tenant", "model_id", "caf\xe9", 'q"', "b\\s", "\ud800", "k\n"]),
    ORDINARY_VALUES,
    min_size=1,
    max_size=4,
)


@needs_c
@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(PLAIN_RECORDS, ORDINARY_NOTES, ORDINARY_EXTRAS), min_size=1, max_size=8),
    OPTIONS,
)
def test_c_handles_every_ordinary_batch(
    records_and_more: list[tuple[Record, Any, Any]], options: dict[str, Any]
) -> None:
    """What servers hand over, with the fields applications usually add and what
    integrations learn, is formatted in C, never handed back to Python."""
    records = [
        record._replace(notes=notes, extras=extras) for record, notes, extras in records_and_more
    ]
    fmt = json_format(options)
    # A note named like a variable's key is prefixed: the reference's (as tested above).
    assume(not any(notes and fmt._keys.intersection(notes) for _, notes, _ in records_and_more))
    assert c_lines(fmt, records) == fmt.format_batch_python(records)


@needs_c
def test_c_leaves_a_clash_and_other_values_to_python() -> None:
    """A note named like a key the line has (the reference prefixes it), a value that
    is not a JSON scalar, an int past 64 bits, a key that is not a str: Python's."""
    fmt = JsonFormat()
    for notes in [{"status": 1}, {"v": [1]}, {"v": 2**64}, {1: "x"}, {"v": True, "x": (1,)}]:
        records = [make_record(), make_record(notes=notes)]
        assert c_lines(fmt, records) is None
        assert fmt.format_batch(records) == fmt.format_batch_python(records)


@needs_c
@settings(max_examples=examples(300))
@given(
    st.lists(HOSTILE_TEXT_RECORDS, min_size=1, max_size=6),
    OPTIONS,
)
def test_c_formats_hostile_text_and_bytes(records: list[Record], options: dict[str, Any]) -> None:
    """Hostile bytes, surrogates, control characters, non-ASCII, None: all in C."""
    assert check(json_format(options), records) is not None


@needs_c
@settings(max_examples=examples(300))
@given(st.lists(st.floats() | st.integers(min_value=-(2**60), max_value=2**60), min_size=1))
@example(
    [0.0625e-3, 0.1875e-3, 0.0005, -0.0, 5e-324, 1e308, 999999.9995e-3, 0.1, float("nan"), 1e6, 4.5]
)
def test_durations(durations: list[float]) -> None:
    """Every duration is its milliseconds as "%.3f" (null when not finite), in C."""
    fmt = JsonFormat()
    records = [make_record(duration=duration) for duration in durations]
    c = check(fmt, records)
    finite = all(math.isfinite(duration * 1000.0) for duration in durations)
    assert c is not None or not finite


@needs_c
@settings(max_examples=examples(300))
@given(st.lists(JSON_TIMES, min_size=1, max_size=6), st.booleans())
@example([1_600_000_000.9999995, 1_600_000_000.25], True)
@example([-0.9999996, -1.5, 0.0005], False)
@example([1_700_000_000 + k / 1000 + 0.0005 for k in range(0, 1000, 37)], True)
def test_times(times: list[float], utc: bool) -> None:
    """Times column-wise, or one by one when one is negative or rounds up: as Python."""
    fmt = JsonFormat(utc=utc)
    records = [make_record(time=when) for when in times]
    c = check(fmt, records)
    readable = all(
        type(when) is int or (type(when) is float and abs(when) < 1e15) for when in times
    )
    assert c is not None or not readable or any(abs(when) >= 2**40 for when in times)


# Each batch the C core leaves to Python, and why.
HANDED_BACK = {
    "a status past 64 bits": make_record(status=2**64),
    "a byte count past 64 bits": make_record(bytes_sent=-(2**64)),
    "a duration too big for a float": make_record(duration=10**400),
    "a duration of another type": make_record(duration="1"),
    "bytes for the client": make_record(client=b"127.0.0.1"),
    "text for the path": make_record(path="/"),
    "a str subclass": make_record(method=type("Method", (str,), {})("GET")),
    "a bool status": make_record(status=True),
    "a time neither float nor int": make_record(time=None),
    "NaN": make_record(time=float("nan")),
    "a time past the years C reads": make_record(time=1e16),
    "an int time past 64 bits": make_record(time=2**64),
    "a time the clock refuses": make_record(time=2**62),
    "a header value of None": make_record(request_headers=[(b"referer", None)]),
    "a pair as a list": make_record(request_headers=[[b"referer", b"x"]]),
    "a Mapping, not a dict": make_record(request_headers=type("M", (dict,), {})()),
    "headers of None": make_record(request_headers=None),
    "a record too short": tuple(make_record())[:-1],
}


@needs_c
@pytest.mark.parametrize("why", HANDED_BACK)
def test_what_c_does_not_read_is_left_to_python(why: str) -> None:
    fmt = JsonFormat(utc=True)
    records: Any = [make_record(), HANDED_BACK[why]]
    assert c_lines(fmt, records) is None
    assert outcome(fmt.format_batch, records) == outcome(fmt.format_batch_python, records)


@needs_c
def test_response_headers_are_read_only_when_a_line_shows_them() -> None:
    record = make_record(response_headers=None)  # type: ignore[arg-type]
    assert c_lines(JsonFormat(), [record]) == JsonFormat().format_batch_python([record])
    fmt = JsonFormat(response_headers=["Content-Type"])
    assert c_lines(fmt, [record]) is None


@needs_c
def test_c_reads_any_sequence_of_records() -> None:
    fmt = JsonFormat(request_headers={"Accept": "accept"}, response_headers=["Set-Cookie"])
    records = [make_record(), make_record(status=304, method="HEAD", client=None)]
    expected = fmt.format_batch_python(records)
    assert c_lines(fmt, records) == expected
    assert _core.format_json is not None
    assert _core.format_json(
        tuple(records), fmt._clock.parts, fmt._texts, fmt._header_fields, fmt._keys,
        fmt._trace_header, fmt._extras_fields,
    ) == (expected)  # fmt: skip
    assert c_lines(fmt, []) == b""
    with pytest.raises(TypeError):
        _core.format_json(
            records, fmt._clock.parts, fmt._texts[:-1], fmt._header_fields, fmt._keys,
            fmt._trace_header, (),
        )  # fmt: skip
    with pytest.raises(TypeError):
        _core.format_json(
            records, fmt._clock.parts, fmt._texts, (("x",),), fmt._keys, fmt._trace_header, (),  # type: ignore[arg-type]
        )  # fmt: skip
    with pytest.raises(TypeError):
        _core.format_json(
            records, fmt._clock.parts, fmt._texts, fmt._header_fields, fmt._keys, (b"x",), (),  # type: ignore[arg-type]
        )  # fmt: skip
    # An index past Extras's fields, a name that is not a str, an item too short.
    bad = [((b",", 6),), ((b",", -1),), ((b",", 2**64),), ((b",", b"x"),), ((b",",),)]
    for extras_fields in bad:
        with pytest.raises(TypeError):
            _core.format_json(
                records, fmt._clock.parts, fmt._texts, fmt._header_fields, fmt._keys,
                fmt._trace_header, extras_fields,  # type: ignore[arg-type]
            )  # fmt: skip
    with pytest.raises(TypeError):
        _core.format_json(records, fmt._clock.parts, fmt._texts)  # type: ignore[call-arg]


# Each batch the C core leaves to Python for a line with the optional fields and a
# variable, and why.
EXTRAS_HANDED_BACK = {
    "extras of another size": make_record(extras=tuple(Extras())[:-1]),  # type: ignore[arg-type]
    "extras as a list": make_record(extras=list(Extras())),  # type: ignore[arg-type]
    "a count past 64 bits": make_record(extras=Extras(bytes_received=2**64)),
    "a bool subclass of int": make_record(extras=Extras(close_code=type("C", (int,), {})(1000))),
    "a list": make_record(extras=Extras(close_code=[1000])),  # type: ignore[arg-type]
    "a variable that is a tuple": make_record(extras=Extras(environ={"REMOTE_USER": (1,)})),
    "a variable that is a str subclass": make_record(
        extras=Extras(environ={"REMOTE_USER": type("User", (str,), {})("ada")})
    ),
    "an environ not a dict": make_record(
        extras=Extras(environ=MappingProxyType({"REMOTE_USER": "ada"}))
    ),
}


@needs_c
@pytest.mark.parametrize("why", EXTRAS_HANDED_BACK)
def test_what_c_does_not_read_of_the_extras_is_left_to_python(why: str) -> None:
    fmt = JsonFormat(extras=["bytes_received", "close_code"], environ=["REMOTE_USER"])
    records: Any = [make_record(), EXTRAS_HANDED_BACK[why]]
    assert c_lines(fmt, records) is None
    assert outcome(fmt.format_batch, records) == outcome(fmt.format_batch_python, records)


@needs_c
@pytest.mark.parametrize(
    "fmt",
    [
        JsonFormat(),
        JsonFormat(extras=["bytes_received", "close_code"]),
        JsonFormat(environ={"REMOTE_USER": "user", "raw_path": "raw_path"}, rename={"time": "@t"}),
    ],
    ids=["default", "extras", "environ"],
)
def test_the_json_format_takes_the_c_path(fmt: JsonFormat) -> None:
    """Plain records are formatted in C (bytes, not None), by format_batch too, with
    the optional fields and variables of every usual kind."""
    records = [
        make_record(),
        make_record(client=None, referer=b"https://example.test/"),
        make_record(extras=Extras(completed=True, bytes_received=12, close_code=1000)),
        make_record(extras=Extras(environ={"REMOTE_USER": "ada", "raw_path": b"/a\xff"})),
        make_record(extras=Extras(environ={"REMOTE_USER": 7, "raw_path": None})),
    ]
    data = c_lines(fmt, records)
    assert isinstance(data, bytes)
    assert data == fmt.format_batch(records) == fmt.format_batch_python(records)
    assert JsonFormat.format_batch is not JsonFormat.format_batch_python


@needs_c
@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(packable_records(), st.booleans()), max_size=8), OPTIONS)
def test_packed_records_give_the_reference_lines(
    batch: list[tuple[Record, bool]], options: dict[str, Any]
) -> None:
    """The C hand-off queues the records of a JSON log packed (csrc/record/packed.c):
    any mix of packed and unpacked records gives the reference's lines of the records,
    route, trace ids, completion and the added extras included; a packed batch of
    ordinary times and durations is formatted in C."""
    fmt = json_format(options)
    c = compared_packed(fmt, lambda records: c_lines(fmt, records), batch)
    if all(0 <= record.time < 4102444800.0 and record.notes is None for record, _ in batch):
        assert c is not None
