"""The C core (boundlog._speedups) against the pure-Python reference: the same bytes.

The pure-Python ``ApacheFormat.format_batch_python`` defines the common and combined
lines; the C ``format_apache`` must give the same bytes for every batch it handles, and
hand back (None) every batch it does not, which the format then formats in Python.
The JSON lines' equivalence is in tests/speedups/test_speedups_json.py, the templates' in
tests/speedups/test_speedups_templates.py; the leak and thread tests here run all three.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import make_record
from _strategies import (
    NUMBERS,
    RAW,
    RECORD_NOTES,
    TEXT,
    TIMES,
    UNSAFE_IN_LONG_VALUES,
    VALUES,
    outcome,
)
from boundlog import Extras, JsonFormat, Record, Template, _core
from boundlog.formats._apache import ApacheFormat

FORCED_PURE = bool(os.environ.get(_core.NO_EXTENSIONS_VARIABLE))
needs_c = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)

# Every spelling the Python reader accepts, in bytes and in text, and names to skip.
NAMES = st.sampled_from(
    [b"referer", b"Referer", b"REFERER", "referer", "REFERER", "Referer",
     b"user-agent", b"User-Agent", "USER-AGENT", "user-agent", b"host", "HOST",
     b"referer\x00", "r\xe9ferer", "\u0130", b"", ""]
)  # fmt: skip
PAIRS = st.lists(st.tuples(NAMES, VALUES), max_size=5)
ENVIRONS = st.dictionaries(
    st.sampled_from(["HTTP_REFERER", "HTTP_USER_AGENT", "HTTP_HOST", "REMOTE_ADDR"]),
    st.none() | VALUES,
)
HEADERS = st.one_of(PAIRS, PAIRS.map(tuple), ENVIRONS, st.just(()))
RECORDS = st.builds(
    Record,
    time=TIMES,
    duration=st.floats(min_value=0, max_value=10),
    client=st.one_of(st.none(), st.sampled_from(["", "127.0.0.1", "::1", "/a b.sock"]), TEXT),
    method=st.one_of(st.sampled_from(["GET", "HEAD", "head", "POST"]), TEXT),
    path=RAW,
    query=st.one_of(st.just(b""), RAW),
    protocol=st.one_of(st.sampled_from(["HTTP/1.1", "HTTP/2"]), TEXT),
    status=NUMBERS,
    bytes_sent=NUMBERS,
    request_headers=HEADERS,
    response_headers=HEADERS,
    # The Apache lines show no notes: C and Python ignore them alike.
    notes=RECORD_NOTES,
)
PLAIN_RECORDS = st.builds(
    make_record,
    time=st.floats(min_value=1.7e9, max_value=1.7e9 + 3),
    status=st.sampled_from([200, 204, 304, 404]),
    bytes_sent=st.integers(min_value=0, max_value=10**6),
    method=st.sampled_from(["GET", "HEAD"]),
    query=st.sampled_from([b"", b"a=1"]),
    referer=st.none() | st.just(b"https://example.test/"),
)
FORMAT_OPTIONS = st.tuples(st.booleans(), st.booleans())  # combined, utc


def c_lines(fmt: ApacheFormat, records: list[Record]) -> bytes | None:
    assert _core.format_apache is not None
    return _core.format_apache(records, fmt._clock, fmt._names, fmt._environ_keys)


@needs_c
@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORDS, max_size=8), FORMAT_OPTIONS)
def test_c_and_python_give_the_same_bytes(
    records: list[Record], options: tuple[bool, bool]
) -> None:
    combined, utc = options
    fmt = ApacheFormat(combined=combined, utc=utc)
    expected = outcome(fmt.format_batch_python, records)
    c = outcome(lambda batch: c_lines(fmt, batch), records)
    # None: the C core left the batch to Python (a field it does not read).
    assert c is None or c == expected
    assert outcome(fmt.format_batch, records) == expected


@needs_c
@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PLAIN_RECORDS, max_size=8), RECORDS, st.data(), FORMAT_OPTIONS)
def test_a_batch_mixing_plain_and_hostile_records(
    plain: list[Record], hostile: Record, data: st.DataObject, options: tuple[bool, bool]
) -> None:
    combined, utc = options
    fmt = ApacheFormat(combined=combined, utc=utc)
    records = list(plain)
    records.insert(data.draw(st.integers(min_value=0, max_value=len(records))), hostile)
    expected = outcome(fmt.format_batch_python, records)
    c = outcome(lambda batch: c_lines(fmt, batch), records)
    assert c is None or c == expected
    assert outcome(fmt.format_batch, records) == expected


@needs_c
@settings(max_examples=examples(200))
@given(st.lists(PLAIN_RECORDS, min_size=1, max_size=8), FORMAT_OPTIONS)
def test_c_handles_every_ordinary_batch(records: list[Record], options: tuple[bool, bool]) -> None:
    """What servers hand over is formatted in C, never handed back to Python."""
    combined, utc = options
    fmt = ApacheFormat(combined=combined, utc=utc)
    assert c_lines(fmt, records) == fmt.format_batch_python(records)


@needs_c
@pytest.mark.parametrize("combined", [False, True])
def test_a_byte_to_escape_anywhere_in_a_long_value(combined: bool) -> None:
    # The client is an unquoted field (a space is escaped there), the rest quoted.
    fmt = ApacheFormat(combined=combined, utc=True)
    records = [
        make_record(
            client=value.decode("utf-8", "surrogateescape"),
            path=value,
            query=value,
            user_agent=value,
        )
        for value in UNSAFE_IN_LONG_VALUES
    ]
    assert c_lines(fmt, records) == fmt.format_batch_python(records)


@needs_c
def test_every_number_of_digits() -> None:
    # Numbers are written two digits at a time (csrc/common/buffer.c): every count of
    # digits, odd and even, each sign, and the ends of 64 bits.
    numbers = [*range(-1000, 1001), *(10**n + d for n in range(3, 19) for d in (-1, 0, 1))]
    numbers += [-n for n in numbers] + [2**63 - 1, -(2**63)]
    fmt = ApacheFormat(combined=False, utc=True)
    records = [make_record(status=n, bytes_sent=~n) for n in numbers]  # ~n: within 64 bits
    assert c_lines(fmt, records) == fmt.format_batch_python(records)


# Each batch the C core leaves to Python, and why.
HANDED_BACK = {
    "a status past 64 bits": make_record(status=2**64),
    "a byte count past 64 bits": make_record(bytes_sent=-(2**64)),
    "bytes for the client": make_record(client=b"127.0.0.1"),
    "a str subclass": make_record(method=type("Method", (str,), {})("GET")),
    "a time neither float nor int": make_record(time=None),
    "NaN": make_record(time=float("nan")),
    "a header value of None": make_record(request_headers=[(b"referer", None)]),
    "a pair as a list": make_record(request_headers=[[b"referer", b"x"]]),
    "a Mapping, not a dict": make_record(request_headers=type("M", (dict,), {})()),
}


@needs_c
@pytest.mark.parametrize("why", HANDED_BACK)
def test_what_c_does_not_read_is_left_to_python(why: str) -> None:
    fmt = ApacheFormat(combined=True, utc=True)
    records: Any = [make_record(), HANDED_BACK[why]]
    assert c_lines(fmt, records) is None
    assert outcome(fmt.format_batch, records) == outcome(fmt.format_batch_python, records)


@needs_c
def test_c_reads_any_sequence_of_records() -> None:
    fmt = ApacheFormat(combined=True, utc=False)
    records = [make_record(), make_record(status=304, method="HEAD")]
    expected = fmt.format_batch_python(records)
    assert c_lines(fmt, records) == expected
    assert _core.format_apache is not None
    assert _core.format_apache(tuple(records), fmt._clock, fmt._names, fmt._environ_keys) == (
        expected
    )
    assert c_lines(fmt, []) == b""
    with pytest.raises(TypeError):
        _core.format_apache(records, fmt._clock, ["referer"], ())  # type: ignore[arg-type]


def test_the_c_core_is_in_use_unless_forced_off() -> None:
    """A build that silently failed would run the suite on the pure-Python core only."""
    if FORCED_PURE:
        assert _core.speedups is None
        assert _core.description.startswith("pure-Python core: BOUNDLOG_NO_EXTENSIONS=")
    else:
        assert _core.speedups is not None, _core.description
        assert _core.description == "C core"
        assert ApacheFormat.format_batch is not ApacheFormat.format_batch_python
        assert _core.format_json is not None
        assert JsonFormat.format_batch is not JsonFormat.format_batch_python
        assert _core.format_template is not None
        assert Template.format_batch is not Template.format_batch_python


@pytest.mark.parametrize("value", ["1", "0", "yes"])
def test_boundlog_no_extensions_forces_the_python_core(value: str) -> None:
    """Any non-empty value, as aiohttp, yarl and multidict read theirs (even 0)."""
    env = {**os.environ, _core.NO_EXTENSIONS_VARIABLE: value}
    result = subprocess.run(
        [sys.executable, "-c",
         "import sys; from boundlog import _core; "
         "print(_core.speedups, _core.format_apache, 'boundlog._speedups' in sys.modules, "
         "_core.description)"],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert result.stdout.split(" ", 3) == [
        "None", "None", "False", f"pure-Python core: BOUNDLOG_NO_EXTENSIONS={value}\n",
    ]  # fmt: skip


@needs_c
def test_an_empty_variable_keeps_the_c_core() -> None:
    env = {**os.environ, _core.NO_EXTENSIONS_VARIABLE: ""}
    result = subprocess.run(
        [sys.executable, "-c", "from boundlog import _core; print(_core.description)"],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert result.stdout == "C core\n"


@needs_c
@pytest.mark.skipif(not sysconfig.get_config_var("Py_GIL_DISABLED"), reason="GIL build")
def test_the_extension_keeps_the_gil_disabled() -> None:
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c",
         "import sys, boundlog._speedups; print(sys._is_gil_enabled())"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert result.stdout == "False\n"


def _hostile_batch() -> list[Record]:
    # Every path of the C code: plain, escaped, UTF-8 and latin-1 text, repeated and
    # missing fields, an environ, stamps for several seconds, notes, and extras with
    # and without a span and server variables (text, bytes, a number).
    extras = [
        Extras(
            route="/items/{id}",
            trace=(1, 2),
            completed=True,
            bytes_received=5,
            close_code=1000,
            environ={"REMOTE_USER": "ada", "raw_path": b"/p\xff"},
        ),
        None,
        Extras(completed=False, bytes_received=2**40, environ={"REMOTE_USER": 7}),
    ]
    notes = [{"user": "ada", "n": 7, "raw": b"\xff"}, None, {"user": 1.5}]
    return [
        make_record(time=1.7e9 + i % 3 + 0.5, client=["1.2.3.4", None, "a b\ud800"][i % 3],
                    method=["GET", "HEAD", "G\xe9T"][i % 3], path=b'/p"\\\n\xff' * (i % 2),
                    query=[b"", b"q=\x00"][i % 2], status=[200, 304, 101][i % 3],
                    request_headers=[[(b"Referer", "\u20ac"), ("REFERER", "caf\xe9"),
                                      (b"user-agent", b"ua\x7f"), (b"cookie", b"s"),
                                      (b"connection", b"keep-alive"),
                                      (b"authorization", b"Basic YWxpY2U6c2VjcmV0")],
                                     {"HTTP_USER_AGENT": "wsgi\xe9", "HTTP_REFERER": None},
                                     ()][i % 3],
                    response_headers=[[(b"Content-Type", b"t\xff")], {"HTTP_CONTENT_TYPE": "x"},
                                      ()][i % 3],
                    notes=notes[i % 3], extras=extras[i % 3])
        for i in range(1000)
    ]  # fmt: skip


def _c_formatter(name: str, *, utc: bool) -> Callable[[list[Record]], bytes | None]:
    """The C core's function for the format ``name`` (combined, json or template), its
    other arguments bound; the JSON format and the template with added, redacted and
    response header fields, the JSON format with the optional fields and variables, the
    template with every kind of field.  ``packed-combined``, ``-template`` and ``-json``:
    the records as the C hand-off queues them (csrc/record/packed.c), packed, formatted
    and unpacked again (the pure-Python fallback's step)."""
    if name.startswith("packed-"):
        return _packed(_c_formatter(name.removeprefix("packed-"), utc=utc))
    if name == "template":
        template = Template(
            '%h %l %u %t "%r" %>s %b %B %D %T %Tf %(M)s %P %(p)s %{sec}t %{msec_frac}t '
            '%{%Y-%m-%d %z}t "%{Referer}i" "%{Cookie}i" "%{Accept}i" %{Content-Type}o '
            "%X %I %{route}x %{trace_id}x %{span_id}x %{completed}x %{close_code}x "
            "%{REMOTE_USER}e %{raw_path}e %{user}n %{raw}n",
            utc=utc,
        )
        format_template = _core.format_template
        assert format_template is not None
        return lambda records: format_template(records, template._ops, os.getpid())
    if name == "json":
        json = JsonFormat(
            utc=utc, request_headers=["Accept", "Cookie"], response_headers=["Content-Type"],
            extras=["bytes_received", "close_code"], environ=["REMOTE_USER", "raw_path"],
        )  # fmt: skip
        format_json = _core.format_json
        assert format_json is not None
        return lambda records: format_json(
            records, json._clock.parts, json._texts, json._header_fields, json._keys,
            json._trace_header, json._extras_fields,
        )  # fmt: skip
    apache = ApacheFormat(combined=True, utc=utc)
    return lambda records: c_lines(apache, records)


def _packed(
    c_format: Callable[[list[Record]], bytes | None],
) -> Callable[[list[Record]], bytes | None]:
    """``c_format`` of the records packed as the C hand-off packs them."""
    assert _core.speedups is not None
    pack, unpacked = _core.speedups.pack_record, _core.speedups.unpacked

    def usual(record: Record) -> Record:
        # What the request paths make: pairs of bytes (ASGI) or of str (gunicorn's),
        # extras, nothing else to carry.
        headers = record.request_headers
        pairs = [
            (name, value)
            for name, value in (headers if type(headers) in (list, tuple) else ())
            if type(name) is bytes and type(value) is bytes
        ]
        text = [
            (name, value)
            for name, value in (headers if type(headers) in (list, tuple) else ())
            if type(name) is str and type(value) is str and max(map(ord, value), default=0) < 256
        ]
        # Extras pack without server variables (a log that shows none learns none).
        extras = record.extras
        return record._replace(
            request_headers=text if text and record.query else pairs,
            response_headers=(),
            notes=None,
            extras=None if extras is None else extras._replace(environ=None),
        )

    def packed_lines(records: list[Record]) -> bytes | None:
        queued = [pack(usual(record)) or record for record in records]
        unpacked(queued)
        return c_format(queued)

    return packed_lines


C_FORMATS = ["combined", "json", "template", "packed-combined", "packed-template", "packed-json"]


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@needs_c
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="no /proc")
@pytest.mark.parametrize("name", C_FORMATS)
def test_a_million_records_leak_neither_references_nor_memory(name: str) -> None:
    """tracemalloc does not see C allocations: the references held and the process's
    resident memory must both come back after a million records."""
    c_format = _c_formatter(name, utc=False)
    records = _hostile_batch()
    assert c_format(records) is not None  # formatted in C, not handed back
    fields = [value for record in records[:3] for value in record]
    gc.collect()
    before_refs = [sys.getrefcount(value) for value in (records, *records[:3], *fields)]
    for _ in range(20):  # warm the allocator up
        c_format(records)
    # A leak grows the process in every window of 1000 batches; the allocator's own
    # growth (a free-threaded build's per-thread heaps, next to other tests' threads on
    # a loaded machine) need not come back: the least of three windows is the measure.
    windows = []
    for _ in range(3):
        rss = _rss_bytes()
        for _ in range(1000):
            c_format(records)
        windows.append(_rss_bytes() - rss)
        if windows[-1] < 1_000_000:
            break
    grown = min(windows)
    gc.collect()
    assert [sys.getrefcount(value) for value in (records, *records[:3], *fields)] == before_refs
    # A leak of one byte a record would be 1 MB; a leaked line, 200 MB.  Under
    # AddressSanitizer (make asan) freed memory is held in quarantine: no measure there.
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        assert grown < 1_000_000, windows


@needs_c
@pytest.mark.parametrize("name", C_FORMATS)
def test_threads_formatting_while_the_batch_list_changes(name: str) -> None:
    """Without the GIL: the list a caller owns may change while C reads it."""
    c_format = _c_formatter(name, utc=True)
    records = _hostile_batch()[:200]
    headers: list[tuple[bytes, bytes]] = [(b"referer", b"r")] * 50
    shared = [*records, make_record(request_headers=headers)]
    stop = threading.Event()

    def mutate() -> None:
        while not stop.is_set():
            shared.append(make_record())
            del shared[-1]
            headers.append((b"user-agent", b"u"))
            del headers[-1]
            # Let the formatting threads run: a mutator spinning on the lists' locks
            # with more threads than CPUs (parallel test workers) starves them.
            os.sched_yield()

    def format_many() -> None:
        # 50 batches of 201 records on each of three threads, against a mutator that
        # never stops: what goes wrong without the GIL goes wrong within them.
        for _ in range(50):
            data = c_format(shared)
            assert data is not None
            assert data.count(b"\n") in (201, 202)

    threads = [threading.Thread(target=mutate)] + [
        threading.Thread(target=format_many) for _ in range(3)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads[1:]:
            thread.join()
    finally:
        # Even when the test fails or times out: a mutator left spinning would slow
        # every later test on this worker.
        stop.set()
        threads[0].join()
