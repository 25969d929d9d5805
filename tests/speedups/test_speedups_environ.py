"""The WSGI record in C (``_core.environ_record``, csrc/paths/environ.c) against its reference.

For arbitrary environs (hostile text, characters past latin-1, missing, empty and
non-str variables, RAW_URI, REQUEST_URI or the SCRIPT_NAME + PATH_INFO fallback, a dict
subclass) and request headers (within and over the budget, of every shape), what the
integrations do (the C function, then the Python one when it returns None) must give
the same record, field types included, or the same exception, as
``_environ.environ_record`` alone, with either bound: gunicorn's
``RecordBudget.bounded`` (the C code checks the size) or the WSGI middleware's
``bounded_environ`` (always called).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _examples import examples
from _strategies import notes_dicts
from boundlog import Record, _core
from boundlog._options import MIN_RECORD_BYTES
from boundlog.capture._environ import environ_record
from boundlog.record._budget import RecordBudget
from boundlog.record._record import Extras

pytestmark = pytest.mark.skipif(
    _core.environ_record is None, reason=f"the C core is not in use ({_core.description})"
)

VARIABLES = [
    "RAW_URI", "REQUEST_URI", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "REMOTE_ADDR",
    "REQUEST_METHOD", "SERVER_PROTOCOL",
]  # fmt: skip


class Text(str):
    """A str subclass: the C code leaves it to Python."""


class Environ(dict[str, Any]):
    """A dict subclass: the C code leaves it to Python."""


BIG = st.integers(min_value=0, max_value=3000).map(lambda n: "c" * n)
HOSTILE = st.text(
    st.one_of(
        st.characters(codec="latin-1"),
        st.characters(),  # surrogates, past latin-1
        st.sampled_from('?%/ \x00\r\n\\"'),
    ),
    max_size=12,
)
KEYS = st.sampled_from([*VARIABLES, "HTTP_USER_AGENT", "HTTP_COOKIE", "wsgi.input"])
VALUE = st.one_of(HOSTILE, HOSTILE.map(lambda text: "/a?" + text), st.just(""), BIG)
UNUSUAL = st.one_of(HOSTILE.map(Text), st.sampled_from([None, b"/bytes", 7]))
# Mostly str values (the usual environ), sometimes one that is not.
ENVIRON = st.tuples(
    st.dictionaries(KEYS, VALUE), st.one_of(st.none(), st.tuples(KEYS, UNUSUAL))
).map(lambda drawn: {**drawn[0], **dict([drawn[1]] if drawn[1] else [])})
PAIR = st.tuples(
    st.one_of(st.sampled_from(["User-Agent", "Cookie", "Host"]), st.just(b"cookie")),
    st.one_of(HOSTILE, BIG, st.binary(max_size=8)),
)
# A record's notes, as the middlewares pass them: None or the request's copy.
NOTES = st.one_of(st.none(), notes_dicts())
HEADERS = st.one_of(
    st.lists(PAIR, max_size=4),
    st.lists(PAIR, max_size=4).map(tuple),
    st.just([("a", "b", "c")]),  # not pairs: the reference raises
    st.just(iter([("Host", "x")])),
)


def outcome(call: Any, *args: Any) -> tuple[str, Any]:
    try:
        record = call(*args)
    except Exception as error:
        return "raised", (type(error), str(error))
    assert type(record) is Record
    return "returned", (tuple(record), [type(field) for field in record])


def integration(
    environ: Any, headers: Any, bound: Any, limit: int, notes: Any, extras: Any
) -> Record:
    """What gunicorn.py and wsgi.py do."""
    assert _core.environ_record is not None
    record = _core.environ_record(
        Record, environ, 1.5, 0.25, 200, 10, headers, [("X", "y")], bound, limit, notes, extras
    )
    if record is None:
        record = environ_record(
            environ, 1.5, 0.25, 200, 10, headers, [("X", "y")], bound, notes, extras
        )
    return record


@settings(max_examples=examples(1500), deadline=None)
@given(
    environ=ENVIRON,
    headers=HEADERS,
    limit=st.sampled_from([MIN_RECORD_BYTES, 4096, 1 << 20]),
    reads=st.sampled_from([None, frozenset({b"user-agent", b"cookie"})]),
    subclass=st.booleans(),
    notes=NOTES,
    extras=st.sampled_from([None, Extras(route="/items/{id}", completed=True)]),
)
def test_the_c_record_is_the_reference(
    environ: dict[str, Any],
    headers: Any,
    limit: int,
    reads: Any,
    subclass: bool,
    notes: Any,
    extras: Any,
) -> None:
    budget = RecordBudget(limit, reads)
    if subclass:
        environ = Environ(environ)
    # The WSGI middleware's headers and limit: the environ, measured by the bound
    # itself, or the variables the log reads, measured in C.
    picked = (
        environ
        if reads is None
        else {k: environ.get(k) for k in ("HTTP_COOKIE", "HTTP_USER_AGENT")}
    )
    for bound, passed_limit, given_headers in [
        (budget.bounded, limit, headers),
        (budget.bounded_environ, -1 if reads is None else limit, picked),
    ]:
        if not isinstance(given_headers, (list, tuple, dict)):
            given_headers = iter([("Host", "x")])  # an iterator is used up by each call
        expected = outcome(
            environ_record, environ, 1.5, 0.25, 200, 10, given_headers, [("X", "y")], bound,
            notes, extras,
        )  # fmt: skip
        if not isinstance(given_headers, (list, tuple, dict)):
            given_headers = iter([("Host", "x")])
        assert (
            outcome(integration, environ, given_headers, bound, passed_limit, notes, extras)
            == expected
        )


def test_the_usual_environ_is_done_in_c() -> None:
    """No Python bound is called for a gunicorn request within the budget."""
    assert _core.environ_record is not None
    calls: list[Any] = []

    def bound(*args: Any) -> Any:
        calls.append(args)
        return args

    environ = {"RAW_URI": "/p?q=1", "REQUEST_METHOD": "GET", "REMOTE_ADDR": "10.0.0.1"}
    headers = [("Host", "x")]
    record = _core.environ_record(
        Record, environ, 1.5, 0.25, 200, 10, headers, (), bound, 1000, None, None
    )
    assert record == (
        1.5, 0.25, "10.0.0.1", "GET", b"/p", b"q=1", "HTTP/1.0", 200, 10, headers, (), None, None
    )  # fmt: skip
    assert record is not None
    assert record[9] is headers
    assert calls == []
    # Over the budget: bound decides.
    _core.environ_record(Record, environ, 1.5, 0.25, 200, 10, headers, (), bound, 10, None, None)
    assert calls == [(b"/p", b"q=1", headers)]
    # Unusual: left to Python before anything is called.
    assert (
        _core.environ_record(
            Record, {"RAW_URI": "/\u20ac"}, 1, 0, 200, 0, [], (), bound, 0, None, None
        )
        is None
    )
    assert (
        _core.environ_record(
            Record, {"REMOTE_ADDR": b"x"}, 1, 0, 200, 0, [], (), bound, 0, None, None
        )
        is None
    )
    assert len(calls) == 1
    # The WSGI middleware's picked fields: measured in C, as bounded_environ measures.
    picked = {"HTTP_REFERER": None, "HTTP_USER_AGENT": "curl/8"}
    size = len(b"/p") + len(b"q=1") + 160 + len("curl/8")
    for limit, called in ((size, False), (size - 1, True)):
        calls.clear()
        _core.environ_record(
            Record, environ, 1.5, 0.25, 200, 10, picked, (), bound, limit, None, None
        )
        assert calls == ([(b"/p", b"q=1", picked)] if called else [])


def test_the_c_record_keeps_no_reference() -> None:
    assert _core.environ_record is not None
    environ = {"PATH_INFO": "/p", "QUERY_STRING": "a=1", "REQUEST_METHOD": "GET"}
    headers = [("Cookie", "c" * 100)]
    budget = RecordBudget(MIN_RECORD_BYTES, None)
    notes = {"user": "ada"}
    extras = Extras(route="/p")
    before = (
        sys.getrefcount(headers), sys.getrefcount(environ["PATH_INFO"]), sys.getrefcount(notes),
        sys.getrefcount(extras),
    )  # fmt: skip
    for limit in (MIN_RECORD_BYTES, 0, -1):
        for _ in range(10_000):
            record = _core.environ_record(
                Record, environ, 1.0, 0.0, 200, 0, headers, (), budget.bounded, limit, notes,
                extras,
            )  # fmt: skip
            assert record is not None
            assert record.notes is notes
            assert record.extras is extras
    del record
    assert (
        sys.getrefcount(headers), sys.getrefcount(environ["PATH_INFO"]), sys.getrefcount(notes),
        sys.getrefcount(extras),
    ) == before  # fmt: skip


def test_arguments_are_checked() -> None:
    assert _core.environ_record is not None
    with pytest.raises(TypeError):
        _core.environ_record(Record, {})
    with pytest.raises(TypeError):
        _core.environ_record(dict, {}, 1, 0, 200, 0, [], (), None, 0, None, None)
    with pytest.raises(TypeError):
        _core.environ_record(Record, {}, 1, 0, 200, 0, [], (), None, "0", None, None)
    with pytest.raises(TypeError):
        _core.environ_record(Record, {}, 1, 0, 200, 0, [], (), None, 0, None)
