"""Hypothesis strategies and helpers the C core's equivalence tests share
(tests/speedups/test_speedups.py, tests/speedups/test_speedups_json.py, tests/speedups/test_speedups_logfmt.py,
tests/speedups/test_speedups_templates.py)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from hypothesis import strategies as st

from _records import make_record
from boundlog import Record
from boundlog.formats._json import JSON_FIELDS, OPTIONAL_EXTRAS
from boundlog.record._record import Extras

# Text and bytes weighted towards what breaks lines, quoting and encodings: line
# breaks, quotes, backslashes, spaces, NUL, DEL, latin-1, lone surrogates, astral.
SPECIAL = '\n\r\x0b\x0c\x1c\x85\u2028"\\ %?-\x00\x7f\xe9\xff\ud800\udc00\U0001f600'
TEXT = st.text(st.one_of(st.sampled_from(SPECIAL), st.characters(exclude_categories=())))
LATIN1 = st.text(st.characters(max_codepoint=0xFF))
# Bytes around the edges of well-formed UTF-8 (Unicode's table 3-7): overlong forms,
# surrogates, the last code point and past it, cut sequences, stray continuations.
UTF8_EDGES = [
    b"\xc0\x80", b"\xc1\xbf", b"\xc2\x80", b"\xdf\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf",
    b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xee\x80\x80", b"\xef\xbf\xbf",
    b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80", b"\xbf", b"\xff", b"\\", b'"',
    b"\n", b"\x00", b"\x1f", b"\x7f", b"a",
]  # fmt: skip
RAW = st.one_of(
    st.binary(),
    TEXT.map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.lists(st.sampled_from(UTF8_EDGES)).map(b"".join),
)
#: traceparent values: valid ones of each version, and each way of breaking one.
_HEX = st.text("0123456789abcdef", min_size=1, max_size=1)
TRACEPARENTS = st.one_of(
    st.tuples(
        st.sampled_from(["00", "01", "ff", "0A", "cc"]),
        st.sampled_from(
            [
                "4bf92f3577b34da6a3ce929d0e0e4736",
                "0" * 32,
                "4BF92F3577B34DA6A3CE929D0E0E4736",
                "4bf92f",
            ]
        ),
        st.sampled_from(["00f067aa0ba902b7", "0" * 16, "00f067aa0ba902b"]),
        st.sampled_from(["01", "00", "1", "zz"]),
        st.sampled_from(
            ["", "-x", "x", "-", ", 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "\n"]
        ),
        st.sampled_from(["-", "_"]),
    ).map(lambda p: f"{p[0]}-{p[1]}{p[5]}{p[2]}-{p[3]}{p[4]}"),
    st.lists(_HEX, min_size=55, max_size=58).map("".join),
)
VALUES = st.one_of(
    RAW, TEXT, LATIN1, TRACEPARENTS, TRACEPARENTS.map(lambda value: value.encode("latin-1"))
)
#: Every spelling of the header fields JSON and logfmt lines read, in bytes and in text,
#: and names to skip.
HEADER_SPELLINGS = st.sampled_from(
    [b"referer", b"Referer", "REFERER", b"user-agent", "User-Agent", b"x-request-id",
     b"X-Request-ID", "X-REQUEST-ID", b"traceparent", "Traceparent", "TRACEPARENT", b"cookie", "Cookie", b"authorization", b"accept",
     "ACCEPT", b"content-type", "Content-Type", b"set-cookie", "Set-Cookie",
     b"x-forwarded-for", b"host", b"referer\x00", "r\xe9ferer", "\u0130", b""]
)  # fmt: skip
HEADER_PAIRS = st.lists(st.tuples(HEADER_SPELLINGS, VALUES), max_size=6)
HEADER_ENVIRONS = st.dictionaries(
    st.sampled_from(
        ["HTTP_REFERER", "HTTP_USER_AGENT", "HTTP_X_REQUEST_ID", "HTTP_COOKIE", "HTTP_ACCEPT",
         "HTTP_TRACEPARENT",
         "CONTENT_TYPE", "HTTP_CONTENT_TYPE", "HTTP_SET_COOKIE", "REMOTE_ADDR"]
    ),
    st.none() | VALUES,
)  # fmt: skip
#: A record's request or response headers: a list or tuple of pairs, an environ, none.
LINE_HEADERS = st.one_of(HEADER_PAIRS, HEADER_PAIRS.map(tuple), HEADER_ENVIRONS, st.just(()))
TIMES = st.one_of(
    st.floats(min_value=0, max_value=4102444800.0),
    st.floats(min_value=-1e9, max_value=4102444800.0),
    # Around a second's end, where datetime rounds up to the next second.
    st.integers(min_value=1_600_000_000, max_value=1_600_000_003).flatmap(
        lambda second: st.sampled_from([second + 0.9999994, second + 0.9999995, second + 1e-7])
    ),
    st.integers(min_value=0, max_value=2**31),
)
NUMBERS = st.one_of(
    st.sampled_from([0, 1, 100, 101, 199, 200, 204, 304, 404, 500, 599]),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
)

# Durations: any float (NaN, infinities, negative, huge, subnormal), exact ties at the
# third decimal of a millisecond, and ints (one too big for a float).
DURATIONS = st.one_of(
    st.floats(),
    st.floats(min_value=0, max_value=10),
    st.integers(min_value=0, max_value=2**24).map(lambda k: k / 16 / 1000),
    st.integers(min_value=0, max_value=10**6).map(lambda k: k / 1e6),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.just(10**400),
)
# Times: the Apache tests' ones, and negative ones, whole seconds' ends, the limits.
JSON_TIMES = st.one_of(
    TIMES,
    st.floats(min_value=-3.0, max_value=3.0),
    st.integers(min_value=-3, max_value=3).flatmap(
        lambda second: st.sampled_from([second - 4e-7, second - 5e-7, second + 0.9999995])
    ),
    st.sampled_from([-0.0, 1e15, -1e15, 9.9e14, float("nan"), float("inf"), 2**62, -(2**63)]),
)


# A note's value: the JSON scalars (hostile text, floats that are not finite, ints past
# 64 bits and past what int() writes, bools), and values of other types (written as
# their str()), one whose str() raises.
class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


NOTE_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.just(10**5000), st.floats(), TEXT,
    st.sampled_from([b"bytes", (1, 2), ["a"], {"k": 1}, Unprintable()]),
)  # fmt: skip
# Names: hostile text, and the names a JSON line has already (a clash is prefixed).
NOTE_NAMES = st.one_of(
    TEXT, st.sampled_from(["status", "app.status", "path", "user", "request_id", "x_trace"])
)


#: A note's value of the kinds a packed record keeps (RecordBudget.notes turns any
#: other into its text): the JSON scalars, ints past 64 bits and floats not finite too.
PACKABLE_NOTE_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.just(10**400), st.floats(), TEXT
)
#: Notes a packed record keeps: None, or names (hostile, and the line's own keys, which
#: JSON prefixes) to such values.
PACKABLE_NOTES = st.none() | st.dictionaries(
    NOTE_NAMES, PACKABLE_NOTE_VALUES, min_size=1, max_size=3
)


def notes_dicts() -> st.SearchStrategy[dict[str, Any]]:
    """A record's notes as the middlewares copy them (never empty: None then)."""
    return st.dictionaries(NOTE_NAMES, NOTE_VALUES, min_size=1, max_size=4)


#: The server variables records' extras hold (Extras.environ).
ENVIRON_NAMES = ["REMOTE_USER", "user", "x"]
_TRACES = (
    st.none()
    | st.tuples(st.integers(0, (1 << 128) - 1), st.integers(0, (1 << 64) - 1))
    | st.tuples(st.integers(), st.integers())
)
#: A record's extras: what an integration learnt of the exchange for a log that asks.
EXTRAS = st.builds(
    Extras,
    route=st.none() | st.sampled_from(["/items/{item_id}", "/"]) | TEXT,
    trace=_TRACES,
    completed=st.none() | st.booleans(),
    bytes_received=st.none() | st.integers(min_value=0, max_value=10**12) | st.integers(),
    close_code=st.none() | st.integers(min_value=1000, max_value=4999) | st.integers(),
    environ=st.none()
    | st.dictionaries(st.sampled_from(ENVIRON_NAMES), st.none() | TEXT | st.integers()),
)
#: Values of the JSON scalar types, ints within 64 bits, and bytes: what notes and
#: server variables usually hold.
ORDINARY_VALUES = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | TEXT | RAW
)
#: What integrations learn: a route, valid ids, a completion, counts, and variables of
#: the usual kinds (a WSGI environ's str, an ASGI scope's bytes, ints, bools).
ORDINARY_EXTRAS = st.none() | st.builds(
    Extras,
    route=st.none() | TEXT,
    trace=st.none() | st.tuples(st.integers(1, (1 << 128) - 1), st.integers(1, (1 << 64) - 1)),
    completed=st.none() | st.booleans(),
    bytes_received=st.none() | st.integers(min_value=0, max_value=10**12),
    close_code=st.none() | st.integers(min_value=1000, max_value=4999),
    environ=st.none() | st.dictionaries(st.sampled_from(ENVIRON_NAMES), ORDINARY_VALUES),
)
#: Extras as the formats' C core may be handed them: every field also any value an
#: application or server may put there (a note's kinds, bytes of every kind), the
#: variables too, and an environ that is empty or not a dict.
HOSTILE_EXTRAS = st.builds(
    Extras,
    route=st.none() | st.sampled_from(["/items/{item_id}", "/"]) | TEXT | NOTE_VALUES,
    trace=_TRACES,
    completed=st.none() | st.booleans() | NOTE_VALUES,
    bytes_received=st.none() | st.integers(min_value=0, max_value=10**12) | NOTE_VALUES,
    close_code=st.none() | st.integers(min_value=1000, max_value=4999) | NOTE_VALUES,
    environ=st.none()
    | st.just({})
    | st.dictionaries(st.sampled_from(ENVIRON_NAMES), NOTE_VALUES | RAW)
    | st.just(MappingProxyType({"x": "1"})),
)
# Every record a test builds with st.builds(Record, ...) without naming its extras gets
# these: None, or extras of every kind.
st.register_type_strategy(Extras, EXTRAS)

#: A record's notes field: None (most records) or a dict.
RECORD_NOTES = st.one_of(st.none(), notes_dicts())


def hostile_records(
    headers: st.SearchStrategy[Any], notes: st.SearchStrategy[Any] = RECORD_NOTES
) -> st.SearchStrategy[Record]:
    """Records of every kind a format may be handed: hostile text and bytes, None where a
    server may leave a field empty or none should, odd times and durations, integers past
    64 bits, request and response headers drawn from ``headers``, notes, and extras."""
    return st.builds(
        Record,
        time=JSON_TIMES,
        duration=DURATIONS,
        client=st.one_of(st.none(), st.sampled_from(["", "127.0.0.1", "::1", "/a b.sock"]), TEXT),
        method=st.one_of(st.none(), st.sampled_from(["GET", "HEAD", "head", "POST"]), TEXT),
        path=st.one_of(st.none(), RAW),
        query=st.one_of(st.just(b""), st.none(), RAW),
        protocol=st.one_of(st.none(), st.sampled_from(["HTTP/1.1", "HTTP/2"]), TEXT),
        status=NUMBERS | st.integers(),
        bytes_sent=NUMBERS | st.integers(),
        request_headers=headers,
        response_headers=headers,
        notes=notes,
        extras=st.none() | HOSTILE_EXTRAS,
    )


#: Records whose every text and bytes field is hostile (surrogates, controls, non-ASCII,
#: invalid UTF-8, None), for the C lines of a JSON or logfmt format.
HOSTILE_TEXT_RECORDS = st.builds(
    make_record,
    client=st.none() | TEXT,
    method=TEXT,
    protocol=TEXT,
    path=RAW,
    query=RAW,
    request_headers=HEADER_PAIRS,
)
#: Records as servers hand them over, for a JSON or logfmt line.
PLAIN_RECORDS = st.builds(
    make_record,
    time=st.floats(min_value=1.7e9, max_value=1.7e9 + 3),
    duration=st.floats(min_value=0, max_value=30),
    client=st.sampled_from(["127.0.0.1", "::1", None]),
    status=st.sampled_from([200, 204, 304, 404]),
    bytes_sent=st.integers(min_value=0, max_value=10**6),
    method=st.sampled_from(["GET", "HEAD"]),
    query=st.sampled_from([b"", b"a=1"]),
    referer=st.none() | st.just(b"https://example.test/"),
)
_HEADER_OPTION_NAMES = ["X-Request-ID", "Cookie", "Referer", "Accept", "Content-Type",
                        "Set-Cookie", "Authorization", "user-agent", "X-Forwarded-For"]  # fmt: skip


def line_options(keys: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Every option of JsonFormat (and LogfmtFormat), the keys given drawn from ``keys``."""
    header_option = st.one_of(
        st.lists(st.sampled_from(_HEADER_OPTION_NAMES), unique_by=str.lower, max_size=4),
        st.dictionaries(
            st.sampled_from(_HEADER_OPTION_NAMES), keys.map(lambda key: "h:" + key), max_size=4
        ),
    )
    return st.fixed_dictionaries(
        {"utc": st.booleans()},
        optional={
            "request_headers": header_option,
            "response_headers": header_option,
            "rename": st.dictionaries(
                st.sampled_from(JSON_FIELDS), keys.map(lambda key: "r:" + key)
            ),
            "allow_headers": st.lists(st.sampled_from(["Cookie", "Set-Cookie", "Authorization"])),
            "extras": st.lists(st.sampled_from(OPTIONAL_EXTRAS)),
            # The variables records hold, and one none does.
            "environ": st.one_of(
                st.lists(st.sampled_from([*ENVIRON_NAMES, "absent"]), unique=True),
                st.dictionaries(
                    st.sampled_from([*ENVIRON_NAMES, "absent"]), keys.map(lambda key: "e:" + key)
                ),
            ),
        },
    )


#: Long values with one byte to escape (or one just plain) at each place: the C core
#: reads a value eight bytes at a time until a word may hold such a byte
#: (csrc/formats/escape.c), so each place in and across the words is tried.
UNSAFE_IN_LONG_VALUES = [
    b"a" * place + unsafe + b"z" * (19 - place)
    for unsafe in (
        b"\x00",
        b"\x1f",
        b" ",
        b"!",
        b'"',
        b"\\",
        b"~",
        b"\x7f",
        b"\x80",
        b"\xc3\xa9",
        b"\xff",
    )
    for place in range(18)
]


def compared(fmt: Any, c_lines: Any, records: list[Record]) -> Any:
    """``c_lines(records)``, the C core's lines of a format (None if handed back), checked
    against the format's reference, ``format_batch_python``, as is ``format_batch``."""
    expected = outcome(fmt.format_batch_python, records)
    c = outcome(c_lines, records)
    assert c is None or c == expected
    assert outcome(fmt.format_batch, records) == expected
    return c


def outcome(function: Any, records: list[Record]) -> Any:
    """What ``function(records)`` returns, or the type of what it raises."""
    try:
        return function(records)
    except Exception as error:
        return type(error)


#: Extras of the shape the C hand-off packs (csrc/record/packed.c): the usual kinds, no
#: environ.
PACKABLE_EXTRAS = st.none() | st.builds(
    Extras,
    route=st.none() | st.sampled_from(["/items/{item_id}", "/"]) | TEXT,
    trace=st.none() | st.tuples(st.integers(0, (1 << 128) - 1), st.integers(0, (1 << 64) - 1)),
    completed=st.none() | st.booleans(),
    bytes_received=st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
    close_code=st.none() | st.integers(min_value=1000, max_value=4999),
    environ=st.none(),
)
_PACKABLE_NAMES = st.sampled_from(
    ["referer", "Referer", "user-agent", "x-request-id", "X-Request-ID", "traceparent",
     "Traceparent", "cookie", "authorization", "accept", "content-type", "host", ""]
)  # fmt: skip
_LATIN1_VALUES = st.one_of(LATIN1, TRACEPARENTS)
#: Request header fields of the shapes packed: bytes pairs (ASGI), str pairs (gunicorn's:
#: ASCII names, values of one byte a character), the environ fields the WSGI paths pick.
PACKABLE_HEADERS = st.one_of(
    st.lists(st.tuples(_PACKABLE_NAMES.map(str.encode), RAW | TRACEPARENTS.map(str.encode))),
    st.lists(st.tuples(_PACKABLE_NAMES.map(str.upper), _LATIN1_VALUES)).map(tuple),
    st.dictionaries(
        st.sampled_from(
            ["HTTP_REFERER", "HTTP_USER_AGENT", "HTTP_X_REQUEST_ID", "HTTP_TRACEPARENT",
             "HTTP_COOKIE", "CONTENT_TYPE"]
        ),
        _LATIN1_VALUES,
    ),
)  # fmt: skip


def packable_records(
    headers: st.SearchStrategy[Any] = PACKABLE_HEADERS,
) -> st.SearchStrategy[Record]:
    """Records of the shape the C hand-off packs: hostile texts and bytes, every float time
    and duration, ``headers`` as the request's, no response header fields, notes of the
    kinds packed, and extras of the usual kinds."""
    return st.builds(
        Record,
        time=JSON_TIMES.filter(lambda when: type(when) is float),
        duration=DURATIONS.filter(lambda duration: type(duration) is float),
        client=st.one_of(st.none(), st.sampled_from(["", "127.0.0.1", "/a b.sock"]), TEXT),
        method=st.one_of(st.sampled_from(["GET", "HEAD", "head"]), TEXT),
        path=RAW,
        query=st.one_of(st.just(b""), RAW),
        protocol=st.one_of(st.sampled_from(["HTTP/1.0", "HTTP/1.1"]), TEXT),
        status=NUMBERS,
        bytes_sent=NUMBERS,
        request_headers=headers,
        response_headers=st.just(()),
        notes=PACKABLE_NOTES,
        extras=PACKABLE_EXTRAS,
    )


def packed_batch(
    batch: list[tuple[Record, bool]], keeps: frozenset[bytes] | None = None
) -> tuple[list[Record], list[Any], list[Any]]:
    """The records of ``batch``, each packed keeping the header fields ``keeps`` names
    (as a log's hand-off keeps those its lines read), and the queue of them packed where
    its flag says so (a mix, as a queue holds when some records came before the log
    packed)."""
    from boundlog import _core

    assert _core.speedups is not None
    records = [record for record, _ in batch]
    packed = [_core.speedups.pack_record(record, keeps) for record in records]
    assert all(item is not None for item in packed)  # the strategy's promise
    queued = [item if pack else record for (record, pack), item in zip(batch, packed, strict=True)]
    return records, packed, queued


def compared_packed(fmt: Any, c_lines: Any, batch: list[tuple[Record, bool]]) -> Any:
    """The lines of ``batch`` packed (``packed_batch``, keeping the header fields the
    format reads) checked against the format's
    reference for the records: ``format_batch`` of the mixed queue, and the C core's
    lines (``c_lines``) of each packed record alone, which are the reference's unless
    it hands the record back (None: a time or duration it leaves to Python).  Returns
    the C core's lines of the whole packed batch (None if handed back)."""
    # Packed as the log's hand-off packs: keeping only the header fields lines read.
    records, packed, queued = packed_batch(batch, fmt.request_header_names)
    expected = outcome(fmt.format_batch_python, records)
    assert outcome(fmt.format_batch, queued) == expected
    for record, item in zip(records, packed, strict=True):
        alone = outcome(c_lines, [item])
        assert alone is None or alone == outcome(fmt.format_batch_python, [record])
    c = outcome(c_lines, packed)
    assert c is None or c == expected
    return c
