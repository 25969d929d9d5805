"""The C core's per-record scans before formatting (csrc/selection/select.c) against the
pure-Python reference: the same records kept, the same queries joined.

``Select.filtered_python`` defines what skip_paths (its paths' errors kept, or skipped
too under skip_path_errors), skip_status and min_duration keep,
and ``QueryRedaction.joined_python`` what the redaction scan searches; the C
``select_records`` and ``joined_queries`` must give the same for every batch they
handle, and hand back (None) every batch they do not, which the Python code then does.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import make_record
from _strategies import outcome
from boundlog import Record, _core
from boundlog.selection._filters import Select, make_select
from boundlog.selection._redaction import QueryRedaction

needs_c = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)

PATHS = st.one_of(
    st.sampled_from([b"/", b"/healthz", b"/healthz/", b"/static/app.js", b"/static", b"/s"]),
    st.binary(max_size=12).map(lambda tail: b"/" + tail),
    st.binary(max_size=4),
)
# What a record may hold where the filters look: the usual types, and others that
# only a record made by hand holds (the C code leaves those batches to Python).
PATH_FIELDS = st.one_of(PATHS, PATHS, PATHS, st.just("/healthz"), st.just(None))
STATUS_FIELDS = st.one_of(
    st.integers(100, 599), st.integers(100, 599), st.sampled_from([399, 400]),
    st.just(True), st.just(200.0), st.just(500.0), st.just(None),
    st.integers(min_value=-(2**70), max_value=2**70),
)  # fmt: skip
DURATION_FIELDS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 2), st.just(1), st.just(None)
)
QUERY_FIELDS = st.one_of(
    st.binary(max_size=12), st.just(b""), st.just(b""), st.just(None), st.just(""),
    st.just("a=1"), st.just(bytearray(b"x=1")),
)  # fmt: skip


@st.composite
def records(draw: Any) -> Any:
    record = make_record(
        path=draw(PATH_FIELDS),
        status=draw(STATUS_FIELDS),
        duration=draw(DURATION_FIELDS),
        query=draw(QUERY_FIELDS),
    )
    # A plain tuple (a record submitted by hand), or one of another length.
    shape = draw(st.sampled_from(["record", "record", "record", "tuple", "short"]))
    return record if shape == "record" else tuple(record) if shape == "tuple" else tuple(record)[:5]


BATCHES = st.lists(records(), max_size=12)
SKIP_PATHS = st.lists(
    st.sampled_from(["/healthz", "/static/*", "/", "/s*", "/*", b"/healthz/", "/\xe9"]),
    max_size=3,
)
SKIP_PATH_ERRORS = st.booleans()
SKIP_STATUS = st.lists(st.one_of(st.integers(100, 599), st.just(range(200, 300))), max_size=3)
MIN_DURATION = st.one_of(st.just(0.0), st.floats(0, 2), st.just(0.5))


def _select(
    skip_paths: list[Any],
    skip_status: list[Any],
    min_duration: float,
    skip_path_errors: bool = False,
) -> Select:
    select = make_select(
        skip_paths=skip_paths, skip_path_errors=skip_path_errors, skip_status=skip_status,
        min_duration=min_duration, redact_query=(),
    )  # fmt: skip
    if select is None:  # nothing to filter: a selection that filters nothing
        select = make_select(sample=0.999, redact_query=())
    assert select is not None
    return select


def _c_select(select: Select, batch: list[Any]) -> Any:
    assert _core.select_records is not None
    return _core.select_records(
        batch, select._exact_paths, select._path_prefixes, select._skip_path_errors,
        select._skip_status, select._min_duration,
    )  # fmt: skip


def _same_objects(kept: list[Any]) -> list[int]:
    return [id(record) for record in kept]


@needs_c
@settings(max_examples=examples(1000), deadline=None)
@given(
    batch=BATCHES, skip_paths=SKIP_PATHS, skip_path_errors=SKIP_PATH_ERRORS,
    skip_status=SKIP_STATUS, min_duration=MIN_DURATION,
)  # fmt: skip
@example(
    batch=[make_record(duration=math.nan)], skip_paths=[], skip_path_errors=False,
    skip_status=[], min_duration=0.5,
)  # fmt: skip
@example(
    batch=[
        make_record(path=b"/healthz", status=status)
        for status in (200, 399, 400, 503, 2**70, -(2**70))
    ],
    skip_paths=["/healthz"], skip_path_errors=False, skip_status=[503], min_duration=0.0,
)  # fmt: skip
@example(
    batch=[make_record(path=b"/static/a", status=404, duration=0.1)],
    skip_paths=["/s*"], skip_path_errors=False, skip_status=[], min_duration=0.5,
)  # fmt: skip
def test_c_keeps_the_records_python_keeps(
    batch: list[Any],
    skip_paths: list[Any],
    skip_path_errors: bool,
    skip_status: list[Any],
    min_duration: float,
) -> None:
    select = _select(skip_paths, skip_status, min_duration, skip_path_errors)
    kept = outcome(lambda records: _c_select(select, records), batch)
    reference = outcome(select.filtered_python, batch)
    if kept is None:
        # Left to Python: only for a batch holding a value of a type it does not read.
        assert not all(
            type(record) is Record
            and type(record.path) is bytes
            and type(record.status) is int
            and type(record.duration) is float
            for record in batch
        )
        return
    assert isinstance(kept, list)
    assert isinstance(reference, list)
    assert _same_objects(kept) == _same_objects(reference)


@needs_c
@settings(max_examples=examples(1000), deadline=None)
@given(batch=BATCHES)
def test_c_joins_the_queries_python_joins(batch: list[Any]) -> None:
    assert _core.joined_queries is not None
    joined = outcome(_core.joined_queries, batch)
    reference = outcome(QueryRedaction.joined_python, batch)
    if joined is None:
        assert not all(
            type(record) is Record and (record.query is None or type(record.query) is bytes)
            for record in batch
        )
        return
    assert joined == reference


@needs_c
def test_the_c_path_takes_the_records_integrations_make() -> None:
    batch = [
        make_record(path=b"/healthz", status=200, duration=0.1, query=b"token=1"),
        make_record(path=b"/static/app.js", status=304, duration=0.2, query=b""),
        make_record(path=b"/api", status=500, duration=0.9, query=b"page=2"),
        make_record(path=b"/api", status=204, duration=0.01, query=b""),
        make_record(path=b"/healthz", status=503, duration=0.1, query=b""),
        make_record(path=b"/static/gone.js", status=404, duration=0.01, query=b""),
    ]
    select = _select(["/healthz", "/static/*"], [204], 0.05)
    kept = _c_select(select, batch)
    assert kept is not None
    # The skipped paths' errors are kept, unless too fast for min_duration.
    assert _same_objects(kept) == _same_objects([batch[2], batch[4]])
    everything = _select(["/healthz", "/static/*"], [204], 0.05, skip_path_errors=True)
    kept = _c_select(everything, batch)
    assert kept is not None
    assert _same_objects(kept) == _same_objects([batch[2]])
    assert _core.joined_queries is not None
    assert _core.joined_queries(batch) == b"token=1&page=2"


@needs_c
def test_the_scans_keep_no_reference_to_a_batch_or_its_records() -> None:
    batch = [make_record(path=b"/api", query=b"a=1") for _ in range(100)]
    select = _select(["/healthz"], [404], 0.5)
    assert _core.joined_queries is not None

    def counts() -> list[int]:
        return [sys.getrefcount(record) for record in batch[:3]] + [sys.getrefcount(batch)]

    before = counts()
    for _ in range(2000):
        _c_select(select, batch)
        _core.joined_queries(batch)
    assert counts() == before
