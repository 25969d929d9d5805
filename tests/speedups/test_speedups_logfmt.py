"""The C core's logfmt lines (csrc/formats/json.c with csrc/formats/logfmt.c) against the
pure-Python reference: the same bytes.

``LogfmtFormat.format_batch_python`` defines a logfmt line; the C ``format_logfmt``
must give the same bytes for every batch it handles, with every option of the format,
and hand back (None) every batch it does not, which the format then formats in Python.
"""

from __future__ import annotations

import math
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
    compared,
    compared_packed,
    hostile_records,
    line_options,
    outcome,
    packable_records,
)
from boundlog import ConfigurationError, Extras, LogfmtFormat, Record, _core

needs_c = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)

RECORDS = hostile_records(LINE_HEADERS)
# Keys a logfmt line takes: printable ASCII but space, =, " and backslash.
KEYS = st.sampled_from(["k", "k.1", "@t", "k:v", "k%d", "%", "[k]", "~"])
OPTIONS = line_options(KEYS)


def logfmt_format(options: dict[str, Any]) -> LogfmtFormat:
    try:
        return LogfmtFormat(**options)
    except ConfigurationError:
        assume(False)  # two fields given one key
        raise


def c_lines(fmt: LogfmtFormat, records: list[Record]) -> bytes | None:
    assert _core.format_logfmt is not None
    return _core.format_logfmt(
        records, fmt._json._clock.parts, fmt._texts, fmt._header_fields, fmt._json._keys,
        fmt._json._trace_header, fmt._extras_fields,
    )  # fmt: skip


def check(fmt: LogfmtFormat, records: list[Record]) -> Any:
    return compared(fmt, lambda batch: c_lines(fmt, batch), records)


@needs_c
@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORDS, max_size=8), OPTIONS)
def test_c_and_python_give_the_same_bytes(records: list[Record], options: dict[str, Any]) -> None:
    check(logfmt_format(options), records)


@needs_c
@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PLAIN_RECORDS, max_size=8), RECORDS, st.data(), OPTIONS)
def test_a_batch_mixing_plain_and_hostile_records(
    plain: list[Record], hostile: Record, data: st.DataObject, options: dict[str, Any]
) -> None:
    records = list(plain)
    records.insert(data.draw(st.integers(min_value=0, max_value=len(records))), hostile)
    check(logfmt_format(options), records)


# The fields applications add: names that are keys as they are and clash with none of
# a line's, values of the JSON scalar types (hostile text and bytes among them).
ORDINARY_NOTES = st.none() | st.dictionaries(
    st.sampled_from(["user", "tenant", "model_id", "a.b", "k:v", "%s"]),
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
    fmt = logfmt_format(options)
    assume(
        not any(notes and fmt._json._keys.intersection(notes) for _, notes, _ in records_and_more)
    )
    assert c_lines(fmt, records) == fmt.format_batch_python(records)


@needs_c
@pytest.mark.parametrize(
    "notes",
    [{"status": 1}, {"a b": 1}, {"": 1}, {"caf\xe9": 1}, {"k\\": 1}, {'k"': 1}, {"k=v": 1},
     {"k\n": 1}, {"\ud800": 1}, {1: "x"}, {"v": [1]}, {"v": 2**64}],
)  # fmt: skip
def test_c_leaves_a_name_to_make_a_key_and_other_values_to_python(notes: dict[Any, Any]) -> None:
    """A note named like a key the line has, or with a name a key cannot be as it is
    (which the reference makes a key), a value that is not a JSON scalar, an int past
    64 bits, a name that is not a str: Python's."""
    fmt = LogfmtFormat()
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
    assert check(logfmt_format(options), records) is not None


@needs_c
@settings(max_examples=examples(300))
@given(st.lists(st.floats() | st.integers(min_value=-(2**60), max_value=2**60), min_size=1))
@example([0.0625e-3, -0.0, 5e-324, 1e308, 999999.9995e-3, float("nan"), float("inf"), 4.5])
def test_durations(durations: list[float]) -> None:
    """Every duration is its milliseconds as "%.3f", left out when not finite, in C."""
    fmt = LogfmtFormat()
    records = [make_record(duration=duration) for duration in durations]
    c = check(fmt, records)
    finite = all(math.isfinite(duration * 1000.0) for duration in durations)
    assert c is not None or not finite


@needs_c
@settings(max_examples=examples(200))
@given(st.lists(JSON_TIMES, min_size=1, max_size=6), st.booleans())
def test_times(times: list[float], utc: bool) -> None:
    check(LogfmtFormat(utc=utc), [make_record(time=when) for when in times])


@needs_c
@pytest.mark.parametrize(
    "record",
    [make_record(status=2**64), make_record(client=b"127.0.0.1"), make_record(time=None),
     make_record(request_headers=None), make_record(extras=Extras(close_code=[1000]))],  # type: ignore[arg-type]
    ids=["status past 64 bits", "bytes client", "time None", "headers None", "a list"],
)  # fmt: skip
def test_what_c_does_not_read_is_left_to_python(record: Record) -> None:
    fmt = LogfmtFormat(utc=True, extras=["close_code"])
    records = [make_record(), record]
    assert c_lines(fmt, records) is None
    assert outcome(fmt.format_batch, records) == outcome(fmt.format_batch_python, records)


@needs_c
@pytest.mark.parametrize(
    "fmt",
    [
        LogfmtFormat(),
        LogfmtFormat(extras=["bytes_received", "close_code"], request_headers=["Cookie"]),
        LogfmtFormat(
            environ={"REMOTE_USER": "user", "raw_path": "raw_path"}, rename={"time": "@t"}
        ),
    ],
    ids=["default", "extras", "environ"],
)
def test_the_logfmt_format_takes_the_c_path(fmt: LogfmtFormat) -> None:
    """Plain records are formatted in C (bytes, not None), by format_batch too."""
    trace = (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7)
    records = [
        make_record(),
        make_record(client=None, referer=b"https://example.test/a b", notes={"tenant": "a c"}),
        make_record(extras=Extras(completed=True, bytes_received=12, close_code=1000, trace=trace)),
        make_record(extras=Extras(environ={"REMOTE_USER": "ada", "raw_path": b"/a\xff"})),
        make_record(
            extras=Extras(route="/items/{id}", environ={"REMOTE_USER": 7, "raw_path": None})
        ),
    ]
    data = c_lines(fmt, records)
    assert isinstance(data, bytes)
    assert data == fmt.format_batch(records) == fmt.format_batch_python(records)
    assert LogfmtFormat.format_batch is not LogfmtFormat.format_batch_python


@needs_c
def test_bad_arguments_are_a_type_error_naming_format_logfmt() -> None:
    fmt = LogfmtFormat()
    assert _core.format_logfmt is not None
    with pytest.raises(TypeError, match="format_logfmt"):
        _core.format_logfmt([], fmt._json._clock.parts, fmt._texts[:-1], (), frozenset(), (), ())
    with pytest.raises(TypeError, match="format_logfmt"):
        _core.format_logfmt([])


@needs_c
@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(packable_records(), st.booleans()), max_size=8), OPTIONS)
def test_packed_records_give_the_reference_lines(
    batch: list[tuple[Record, bool]], options: dict[str, Any]
) -> None:
    """The C hand-off queues the records of a logfmt log packed (csrc/record/packed.c):
    any mix of packed and unpacked records gives the reference's lines of the records,
    route, trace ids, completion and the added extras included; a packed batch of
    ordinary times and durations is formatted in C."""
    fmt = logfmt_format(options)
    c = compared_packed(fmt, lambda records: c_lines(fmt, records), batch)
    if all(0 <= record.time < 4102444800.0 and record.notes is None for record, _ in batch):
        assert c is not None
