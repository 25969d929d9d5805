"""Records packed while queued (csrc/record/packed.c): a record of the usual shape packs,
unpacks equal to itself, costs the queue's byte budget the bytes it holds, and is
written by the C core in the very line the pure-Python reference writes for the record;
any other record is queued as it is.  The C hand-off packs only for a log whose writer
formats in C (the common and combined lines, templates, no filter); templates' packed
lines are proven in tests/speedups/test_speedups_templates.py."""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import make_record
from _strategies import (
    EXTRAS,
    HOSTILE_EXTRAS,
    LATIN1,
    NUMBERS,
    PACKABLE_NOTE_VALUES,
    RAW,
    TEXT,
    TIMES,
)
from boundlog import Extras, JsonFormat, LogfmtFormat, Record, Template, _core
from boundlog._options import DEFAULT_BATCH_SIZE, DEFAULT_MAX_QUEUE, DEFAULT_MAX_QUEUE_BYTES
from boundlog.engine._admission import Admission
from boundlog.engine._writer import packs_for
from boundlog.formats._apache import ApacheFormat
from boundlog.formats._schemas import SchemaFormat
from boundlog.record._budget import FIELD_OVERHEAD, RECORD_OVERHEAD, queued_cost, record_cost
from boundlog.selection._filters import make_select

pytestmark = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)

NAMES = st.sampled_from([b"referer", b"Referer", b"REFERER", b"user-agent", b"User-Agent",
                         b"host", b"referer\x00", b""])  # fmt: skip
# Pairs of bytes and gunicorn's pairs of str (the shapes packed), and others that are
# not: a mix of the two, text beyond latin-1, a non-ASCII name.
PAIRS = st.lists(st.tuples(NAMES, RAW), max_size=5)
STR_PAIRS = st.lists(
    st.tuples(st.sampled_from(["HOST", "REFERER", "User-Agent", "r\xe9ferer"]), LATIN1),
    max_size=5,
)
ODD_PAIRS = st.lists(st.tuples(st.sampled_from([b"referer", "referer"]), TEXT), min_size=1)
# What the WSGI paths pick of the environ (str values, of one byte a character when
# packed), and others.
ENVIRONS = st.dictionaries(
    st.sampled_from(["HTTP_REFERER", "HTTP_USER_AGENT", "HTTP_HOST", "HTTP_\xe9"]),
    st.one_of(LATIN1, TEXT, st.none(), st.just(b"bytes")),
    max_size=3,
)
RECORDS = st.builds(
    Record,
    time=st.one_of(TIMES, st.integers(0, 2**40)),
    duration=st.one_of(st.floats(min_value=0, max_value=10), st.just(1)),
    client=st.one_of(st.none(), st.sampled_from(["", "127.0.0.1", "::1"]), TEXT, st.just(b"x")),
    method=st.one_of(st.sampled_from(["GET", "HEAD", "head", "POST"]), TEXT),
    path=st.one_of(RAW, st.just("/text")),
    query=st.one_of(st.just(b""), RAW),
    protocol=st.one_of(st.sampled_from(["HTTP/1.1", "HTTP/2"]), TEXT),
    status=st.one_of(NUMBERS, st.just(True), st.just(2**64)),
    bytes_sent=st.one_of(NUMBERS, st.just(2**70)),
    request_headers=st.one_of(PAIRS, PAIRS.map(tuple), STR_PAIRS, ODD_PAIRS, ENVIRONS),
    response_headers=st.one_of(st.just(()), st.just([]), st.just(((b"server", b"x"),))),
    notes=st.one_of(
        st.none(),
        st.just({"user": "u"}),
        st.dictionaries(TEXT, PACKABLE_NOTE_VALUES, min_size=1, max_size=3),
        st.just({"user": b"u"}),
        st.just({1: "not a str key"}),
        st.just({"n": True, "x": [1]}),
    ),
    extras=st.one_of(st.none(), EXTRAS, HOSTILE_EXTRAS, st.just(Extras(environ={}))),
)


def _notes_pack(notes: Any) -> bool:
    """The notes packed_from_record packs (csrc/record/packed.c, pack_notes)."""
    return notes is None or (
        type(notes) is dict
        and all(
            type(name) is str and type(value) in (type(None), bool, int, float, str)
            for name, value in notes.items()
        )
    )


def _int64(value: Any) -> bool:
    return type(value) is int and -(2**63) <= value < 2**63


def _extras_pack(extras: Any) -> bool:
    """The extras packed_from_record packs (csrc/record/packed.c, pack_extras)."""
    if extras is None:
        return True
    route, trace, completed, received, close_code, environ = extras
    return (
        (route is None or type(route) is str)
        and (
            trace is None
            or (
                type(trace) is tuple
                and len(trace) == 2
                and all(type(n) is int for n in trace)
                and 0 <= trace[0] < 2**128
                and 0 <= trace[1] < 2**64
            )
        )
        and completed in (None, True, False)
        and type(completed) in (type(None), bool)
        and all(n is None or _int64(n) for n in (received, close_code))
        and environ is None
    )


def _packed_cost(record: Record) -> int:
    """What a packed record costs the queue's byte budget (csrc/record/packed.h): the
    bytes it holds of the path, query and header fields (each with its two 4-byte
    sizes; a str of one byte a character), and its notes by record_cost's estimate."""
    headers = record.request_headers
    fields = headers.items() if type(headers) is dict else headers
    size = len(record.path) + len(record.query)
    size += sum(8 + len(name) + len(value) for name, value in fields)
    for name, value in (record.notes or {}).items():
        size += FIELD_OVERHEAD + len(name) + (len(value) if type(value) is str else 0)
    return size


def _usual_shape(record: Record) -> bool:
    """The shape packed_from_record packs (csrc/record/packed.c, packable)."""
    headers = record.request_headers
    return (
        type(record.time) is float
        and type(record.duration) is float
        and (record.client is None or type(record.client) is str)
        and type(record.method) is str
        and type(record.protocol) is str
        and type(record.path) is bytes
        and type(record.query) is bytes
        and all(
            type(n) is int and -(2**63) <= n < 2**63 for n in (record.status, record.bytes_sent)
        )
        and (
            (
                type(headers) in (list, tuple)
                and (
                    all(type(name) is bytes and type(value) is bytes for name, value in headers)
                    or all(
                        type(name) is str
                        and name.isascii()
                        and type(value) is str
                        and all(ord(c) < 256 for c in value)
                        for name, value in headers
                    )
                )
            )
            or (
                type(headers) is dict
                and all(
                    name.isascii() and type(value) is str and all(ord(c) < 256 for c in value)
                    for name, value in headers.items()
                )
            )
        )
        and record.response_headers == ()
        and type(record.response_headers) is tuple
        and _notes_pack(record.notes)
        and _extras_pack(record.extras)
    )


@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS)
def test_a_record_of_the_usual_shape_packs_and_unpacks_equal(record: Record) -> None:
    assert _core.speedups is not None
    packed = _core.speedups.pack_record(record)
    assert (packed is not None) == _usual_shape(record)
    if packed is None:
        return
    unpacked = packed.record()
    assert type(unpacked) is Record
    # Equal, field by field and type by type (floats by their bits: NaN too).
    assert repr(unpacked) == repr(record)
    assert [type(field) for field in unpacked] == [type(field) for field in record]
    assert type(unpacked.request_headers) is type(record.request_headers)
    assert packed.cost == _packed_cost(record) == queued_cost(packed) <= record_cost(record)
    # What it is for: one object the garbage collector neither tracks nor counts.
    assert not gc.is_tracked(packed)
    assert not type(packed).__flags__ & (1 << 14)  # Py_TPFLAGS_HAVE_GC


def _name(name: bytes | str) -> bytes:
    return (name.encode("ascii") if type(name) is str else name).lower()


@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS, st.frozensets(st.sampled_from([b"referer", b"user-agent", b"host", b""])))
def test_a_packed_record_keeps_the_header_fields_named(
    record: Record, keeps: frozenset[bytes]
) -> None:
    """Packed keeping some header fields (a log's request_header_names), a record gives
    back those fields alone, in order, in any case, repeats included (an environ's are
    picked already and all kept), and costs what it holds."""
    assert _core.speedups is not None
    packed = _core.speedups.pack_record(record, keeps)
    assert (packed is not None) == _usual_shape(record)
    if packed is None:
        return
    headers = record.request_headers
    if type(headers) is not dict:
        headers = type(headers)(pair for pair in headers if _name(pair[0]) in keeps)
    expected = record._replace(request_headers=headers)
    unpacked = packed.record()
    assert repr(unpacked) == repr(expected)
    assert type(unpacked.request_headers) is type(headers)
    assert packed.cost == _packed_cost(expected)


def test_a_packed_record_keeps_every_field_of_a_name_in_any_case_and_in_order() -> None:
    assert _core.speedups is not None
    headers = [(b"Referer", b"a"), (b"host", b"h"), (b"REFERER", b"b"), (b"referer", b"c")]
    packed = _core.speedups.pack_record(make_record(request_headers=headers), [b"referer"])
    assert packed is not None
    assert packed.record().request_headers == [headers[0], headers[2], headers[3]]
    # Past the 64 fields whose fate the first pass remembers.
    many = [(b"x-%d" % i, b"v%d" % i) for i in range(70)]
    for i in (3, 63, 64, 69):
        many[i] = (b"Referer", b"r%d" % i)
    packed = _core.speedups.pack_record(make_record(request_headers=many), [b"referer"])
    assert packed is not None
    assert packed.record().request_headers == [many[i] for i in (3, 63, 64, 69)]
    gunicorn = [("HOST", "h"), ("REFERER", "r\xe9"), ("USER-AGENT", "u")]
    packed = _core.speedups.pack_record(make_record(request_headers=gunicorn), [b"referer"])
    assert packed is not None
    assert packed.record().request_headers == [("REFERER", "r\xe9")]


def test_what_a_packed_record_keeps_is_checked() -> None:
    assert _core.speedups is not None
    record = make_record(referer=b"r")
    with pytest.raises(TypeError, match="names are bytes, not str"):
        _core.speedups.pack_record(record, ["referer"])
    with pytest.raises(ValueError, match="lower-case, not b'Referer'"):
        _core.speedups.pack_record(record, [b"Referer"])
    admission = Admission(max_queue=4, batch_size=4, policy="drop", max_queue_bytes=8000)
    with pytest.raises(TypeError, match="names are bytes"):
        _core.speedups.Handoff(admission, packs=True, keeps=["referer"])


def test_the_c_core_charges_a_field_what_the_reference_charges() -> None:
    # One constant in C (record/record.h), read by every C measure of a record's cost.
    from boundlog.record._budget import FIELD_OVERHEAD

    assert _core.speedups.FIELD_OVERHEAD == FIELD_OVERHEAD


@pytest.mark.parametrize(
    "fmt",
    [
        JsonFormat(),
        LogfmtFormat(),
        Template("%h %{user}n %{tenant}n %{admin}n %{team}n %{ratio}n %{city}n %{absent}n"),
    ],
    ids=["json", "logfmt", "template"],
)
def test_records_with_added_fields_pack_and_are_written_in_c(fmt: Any) -> None:
    """A record with fields the application added (``add_fields``) queues packed, and
    the C core writes its line from the Packed: the reference's line."""
    assert _core.speedups is not None
    notes = {"user": "ada", "tenant": 7, "admin": False, "team": None, "ratio": 0.5}
    records = [make_record(notes={**notes, "city": "Zürich"}), make_record(notes=None)]
    packed = [_core.speedups.pack_record(record) for record in records]
    assert all(type(item).__name__ == "Packed" for item in packed)
    assert fmt.format_compiled(packed) == fmt.format_batch_python(records)


def _lines(fmt: ApacheFormat, batch: list[Any]) -> Any:
    try:
        return fmt.format_batch(batch)
    except Exception as error:  # the same exception is the promise
        return type(error), str(error)


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(RECORDS, st.booleans()), max_size=8), st.booleans(), st.booleans())
def test_packed_records_are_written_as_the_reference_writes_the_records(
    batch: list[tuple[Record, bool]], combined: bool, utc: bool
) -> None:
    """Any mix of packed and unpacked records, in C, or given back to Python whole."""
    assert _core.speedups is not None
    fmt = ApacheFormat(combined=combined, utc=utc)
    records = [record for record, _ in batch]
    # Packed as the log's hand-off packs: keeping only the header fields lines read.
    keeps = fmt.request_header_names
    queued = [
        (_core.speedups.pack_record(record, keeps) if pack else None) or record
        for record, pack in batch
    ]
    try:
        expected: Any = fmt.format_batch_python(records)
    except Exception as error:
        expected = type(error), str(error)
    assert _lines(fmt, queued) == expected


def test_a_batch_the_c_core_leaves_to_python_is_unpacked_first() -> None:
    assert _core.speedups is not None
    fmt = ApacheFormat(combined=True, utc=True)
    plain = Record(1.7e9, 0.1, "h", "GET", b"/", b"", "HTTP/1.1", 200, 5, [], (), None, None)
    packed = _core.speedups.pack_record(plain)
    # A time past what C's stamp cache reads: C asks the clock, which raises for it, and
    # leaves the batch to the reference (which raises the same).
    far = _core.speedups.pack_record(plain._replace(time=1e300))
    assert packed is not None
    assert far is not None
    assert _core.format_apache is not None
    assert _core.format_apache([far], fmt._clock, fmt._names, fmt._environ_keys) is None
    with pytest.raises(OverflowError):
        fmt.format_batch([packed, far])
    assert fmt.format_batch([packed, plain]) == fmt.format_batch_python([plain, plain])


def test_the_hand_off_packs_and_the_queue_counts_the_packed_cost() -> None:
    assert _core.speedups is not None
    admission = Admission(max_queue=4, batch_size=4, policy="drop", max_queue_bytes=8000)
    offer = _core.speedups.Handoff(admission, packs=True)
    small = Record(1.7e9, 0.1, "h", "GET", b"/", b"", "HTTP/1.1", 200, 5,
                   [(b"host", b"x")], (), None, None)  # fmt: skip
    large = small._replace(request_headers=[(b"referer", b"r" * 2000)])
    odd = small._replace(notes={"user": b"not a JSON scalar"})
    assert offer(small)
    assert offer(large)
    assert offer(odd)
    queued = list(admission._pending)
    assert [type(item).__name__ for item in queued] == ["Packed", "Packed", "Record"]
    # The large one's cost over its share (8000 // 8) is charged until it is taken:
    # what it holds, not record_cost's estimate of a Record.
    assert admission._charged == _packed_cost(large) - 1000 == 1 + 8 + 7 + 2000 - 1000
    taken = admission.take()
    assert taken == queued
    assert admission._charged == 0
    assert [item.record() if type(item) is _core.Packed else item for item in taken] == [
        small,
        large,
        odd,
    ]
    # A hand-off made without packs queues records as they are.
    plain = _core.speedups.Handoff(admission)
    assert plain(small)
    assert admission.take() == [small]


# What Firefox sends for a page reached by a link on the same site, with a session
# cookie: an ordinary request of a browser.
FIREFOX_HEADERS = [
    (b"host", b"shop.example"),
    (b"user-agent", b"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"),
    (b"accept", b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    (b"accept-language", b"en-GB,en;q=0.5"),
    (b"accept-encoding", b"gzip, deflate, br, zstd"),
    (b"referer", b"https://shop.example/catalogue/lamps?page=2"),
    (b"connection", b"keep-alive"),
    (b"cookie", b"session=4f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f; theme=dark; consent=1"),
    (b"upgrade-insecure-requests", b"1"),
    (b"sec-fetch-dest", b"document"),
    (b"sec-fetch-mode", b"navigate"),
    (b"sec-fetch-site", b"same-origin"),
    (b"sec-fetch-user", b"?1"),
    (b"priority", b"u=0, i"),
]


def test_a_browsers_ordinary_request_is_within_its_share_of_the_byte_budget() -> None:
    """With the defaults, a record up to 1 KiB (max_queue_bytes / (2 x max_queue)) is
    queued without the Admission's slow path (its lock, the excess map, and the writer
    giving the excess back): a browser's ordinary request is, once packed, where
    record_cost's 160 bytes a header field put it over.  What the packed record holds
    in memory is within what it is charged and RECORD_OVERHEAD."""
    assert _core.speedups is not None
    admission = Admission(max_queue=DEFAULT_MAX_QUEUE, batch_size=DEFAULT_BATCH_SIZE,
                          policy="drop", max_queue_bytes=DEFAULT_MAX_QUEUE_BYTES)  # fmt: skip
    record = make_record(path=b"/catalogue/lamp-42", query=b"ref=list",
                         request_headers=FIREFOX_HEADERS)  # fmt: skip
    packed = _core.speedups.pack_record(record)
    assert packed is not None
    assert packed.cost <= admission._share == 1048 < record_cost(record)
    assert sys.getsizeof(packed) <= RECORD_OVERHEAD + packed.cost
    assert _core.speedups.Handoff(admission, packs=True)(record)
    assert admission._charged == 0
    assert [item.record() for item in admission.take()] == [record]


def test_only_a_writer_formatting_in_c_takes_packed_records() -> None:
    combined = ApacheFormat(combined=True, utc=False)
    assert packs_for(combined, None)
    assert not packs_for(combined, make_select(skip_paths=["/health"]))
    assert packs_for(JsonFormat(), None)
    assert packs_for(LogfmtFormat(), None)
    assert packs_for(Template("%h %{route}x"), None)
    # Formats whose lines are made in Python read Records.
    assert not packs_for(SchemaFormat("ecs"), None)

    # A subclass formats as its class does, unless it formats in its own way.
    class Quiet(JsonFormat):
        __slots__ = ()
        reads_extras = frozenset()

    class Mine(ApacheFormat):
        __slots__ = ()

        def format_batch(self, records: Any) -> bytes:
            return b"".join(b"%d\n" % record.status for record in records)

    class Compiled(Template):
        __slots__ = ()

        def format_compiled(self, records: Any) -> bytes | None:
            return None

    assert packs_for(Quiet(), None)
    assert not packs_for(Mine(combined=True, utc=False), None)
    assert not packs_for(Compiled("%h"), None)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"", b"a=1", b"token=s3cret&x=1", b"pass%77ord=x", b"q=token"]),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_the_default_query_redaction_reads_packed_records(batch: list[tuple[bytes, bool]]) -> None:
    """The default log (combined, queries redacted) queues packed records: the redaction
    joins their queries in C, and rewrites the rare batch that needs it as Records."""
    assert _core.speedups is not None
    assert _core.joined_queries is not None
    select = make_select()
    assert select is not None
    assert select.takes_packed
    fmt = ApacheFormat(combined=True, utc=True)
    assert packs_for(fmt, select)
    base = Record(1.7e9, 0.1, "h", "GET", b"/", b"", "HTTP/1.1", 200, 5, [], (), None, None)
    records = [base._replace(query=query) for query, _ in batch]
    queued = [
        (_core.speedups.pack_record(record) if pack else None) or record
        for record, (_, pack) in zip(records, batch, strict=True)
    ]
    assert _core.joined_queries(queued) == b"&".join(filter(None, (q for q, _ in batch)))
    expected = fmt.format_batch_python(select(list(records), print))
    assert fmt.format_batch(select(queued, print)) == expected
    if any(b"s3cret" in query or b"=x" in query for query, _ in batch):
        assert b"[redacted]" in expected


def test_filters_other_than_the_redaction_read_records() -> None:
    for options in ({"skip_paths": ["/health"]}, {"min_duration": 0.5}, {"sample": 0.5},
                    {"keep": lambda record: True}, {"trusted_proxies": ["10.0.0.0/8"]},
                    {"skip_status": [404]}):  # fmt: skip
        select = make_select(**options)
        assert select is not None
        assert not select.takes_packed, options


def test_the_record_of_a_wsgi_request_packs() -> None:
    """The WSGI paths pick the environ's header fields into a dict of their own: such a
    record packs, and its line is the reference's."""
    assert _core.speedups is not None
    assert _core.environ_record is not None
    environ = {"RAW_URI": "/p?q=1", "REQUEST_METHOD": "GET", "REMOTE_ADDR": "10.0.0.1"}
    picked = {"HTTP_REFERER": "https://r.test/\xe9", "HTTP_USER_AGENT": 'agent "x"'}
    record = _core.environ_record(
        Record, environ, 1.7e9, 0.25, 200, 10, picked, (), None, 1000, None, None
    )
    packed = _core.speedups.pack_record(record)
    assert packed is not None
    assert packed.record() == record
    assert packed.cost == _packed_cost(record)
    fmt = ApacheFormat(combined=True, utc=True)
    assert fmt.format_batch([packed]) == fmt.format_batch_python([record])
    assert b'"https://r.test/\\xe9" "agent \\x22x\\x22"' in fmt.format_batch([packed])
