"""gunicorn's logger class's access in C (``_core.gunicorn_access``,
csrc/paths/gunicorn_access.c) against its reference, ``Logger.access`` in Python.

For arbitrary requests as gunicorn's workers hand them over (a ``timedelta`` of any
size and sign, the ASGI worker's stand-in for one, a subclass; a status gunicorn's table
knows, one it does not, None, an int, a str subclass; ``resp.sent`` of None or 0; a
``req`` with headers or the pairs themselves; usual and unusual environs; logged inside
an ``except`` block or not; a format that reads the extras and the response headers or
none), the logger with its C access must hand over the same record, or raise the same
error, as the logger running the reference alone: every field the same, the time
within the clock's reading around the call, less the duration.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import CapturingFormat
from boundlog import Record, _core
from boundlog.gunicorn import Logger

pytestmark = pytest.mark.skipif(
    _core.gunicorn_access is None, reason=f"the C core is not in use ({_core.description})"
)

gunicorn_config = pytest.importorskip("gunicorn.config")


class Text(str):
    """A str subclass: the C access leaves it to the reference."""


class Delta(timedelta):
    """A timedelta subclass: the C access leaves it to the reference."""


class NoExtras(CapturingFormat):
    """A format that reads no extras: no extras are learnt."""

    reads_extras: frozenset[str] = frozenset()


class _Capturing(Logger):
    """The logger class with the test's format."""

    fmt: CapturingFormat

    def log_options(self, cfg: Any) -> dict[str, Any]:
        return {**super().log_options(cfg), "format": self.fmt}


@pytest.fixture(scope="module")
def loggers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Logger]]:
    """Loggers by format, each with its C access."""
    made = {}
    for name, fmt in (
        ("everything", CapturingFormat(frozenset({b"user-agent"}), frozenset({b"x-id"}))),
        ("nothing", NoExtras(frozenset(), frozenset())),
    ):
        cfg = gunicorn_config.Config()
        cfg.set("accesslog", str(tmp_path_factory.mktemp("gunicorn") / "access.log"))
        logger_class = type(f"Capturing_{name}", (_Capturing,), {"fmt": fmt})
        made[name] = logger_class(cfg)
        assert made[name]._compiled_access is not None
    yield made
    for logger in made.values():
        assert logger.boundlog is not None
        logger.boundlog.close()


STATUS = st.sampled_from(
    ["200 OK", "404 Not Found", "299 Custom", "abc", "", None, 200, 404, 2.5, Text("200 OK")]
)
REQUEST_TIME = st.one_of(
    st.timedeltas(),
    st.timedeltas(min_value=timedelta(seconds=-5), max_value=timedelta(seconds=5)),
    st.builds(Delta, microseconds=st.integers(0, 10**7)),
    st.builds(
        SimpleNamespace,
        seconds=st.integers(0, 100),
        microseconds=st.integers(0, 999_999),
    ),
)
TEXT = st.text(max_size=10)
ENVIRON = st.fixed_dictionaries(
    {"REQUEST_METHOD": st.sampled_from(["GET", "POST"]), "PATH_INFO": TEXT},
    optional={
        "RAW_URI": TEXT.map(lambda text: "/" + text),
        "QUERY_STRING": TEXT,
        "REMOTE_ADDR": st.sampled_from(["127.0.0.1", ""]),
        "SERVER_PROTOCOL": st.one_of(st.just("HTTP/1.1"), st.just(7), TEXT.map(Text)),
        "boundlog.route": st.just("/items/{id}"),
    },
)
PAIRS = st.lists(
    st.tuples(st.sampled_from(["User-Agent", "X-Id", "Host"]), st.text(max_size=6)), max_size=3
)
RESP = st.builds(
    SimpleNamespace,
    status=STATUS,
    sent=st.sampled_from([0, None, 1024, 1 << 70]),
    headers=PAIRS,
) | st.builds(SimpleNamespace, status=STATUS, sent=st.just(5))
REQ = st.one_of(st.builds(SimpleNamespace, headers=PAIRS), PAIRS, st.builds(SimpleNamespace))


def handed_over(logger: Logger, compiled: bool, args: tuple[Any, ...], failing: bool) -> Any:
    """What ``logger`` hands over for the request ``args`` (inside an ``except`` block
    when ``failing``), with its C access or the reference alone: the record's fields
    but its time, with the bounds of its time; or the error raised."""
    log = logger.boundlog
    assert log is not None
    saved = logger._compiled_access
    if not compiled:
        logger._compiled_access = None
    try:
        before = time.time()
        try:
            if failing:
                try:
                    raise ConnectionResetError("the client went away")
                except ConnectionResetError:
                    logger.access(*args)
            else:
                logger.access(*args)
        except Exception as error:
            return "raised", type(error), str(error)
        after = time.time()
    finally:
        logger._compiled_access = saved
    log.flush()
    fmt = logger.fmt  # type: ignore[attr-defined]
    (record,) = fmt.records
    fmt.records.clear()
    assert type(record) is Record
    fields = record._asdict()
    received = fields.pop("time")
    assert before - record.duration - 1e-6 <= received <= after - record.duration + 1e-6
    return "handed", fields, [type(field) for field in fields.values()]


@settings(max_examples=examples(600), deadline=None)
@given(
    which=st.sampled_from(["everything", "nothing"]),
    resp=RESP,
    req=REQ,
    environ=ENVIRON,
    request_time=REQUEST_TIME,
    failing=st.booleans(),
)
def test_the_c_access_hands_over_what_the_reference_does(
    loggers: dict[str, Logger],
    which: str,
    resp: Any,
    req: Any,
    environ: dict[str, Any],
    request_time: Any,
    failing: bool,
) -> None:
    logger = loggers[which]
    args = (resp, req, environ, request_time)
    expected = handed_over(logger, False, args, failing)
    assert handed_over(logger, True, args, failing) == expected


def test_the_usual_request_is_handed_over_in_c(loggers: dict[str, Logger]) -> None:
    """The C access takes the request gunicorn's gthread worker hands over (the
    reference is not run), and leaves one it does not read to the reference."""
    logger = loggers["everything"]
    compiled = logger._compiled_access
    assert compiled is not None
    resp = SimpleNamespace(status="200 OK", sent=1024, headers=[("X-Id", "7")])
    req = SimpleNamespace(headers=[("User-Agent", "curl/8")])
    environ = {"REQUEST_METHOD": "GET", "RAW_URI": "/a?b=1", "REMOTE_ADDR": "127.0.0.1"}
    assert compiled(resp, req, environ, timedelta(microseconds=1500)) is True
    assert compiled(resp, req, environ, SimpleNamespace(seconds=0, microseconds=1)) is False
    assert compiled(resp, req, environ, timedelta(days=10**6)) is False
    logger.boundlog.flush()  # type: ignore[union-attr]
    (record,) = logger.fmt.records  # type: ignore[attr-defined]
    logger.fmt.records.clear()  # type: ignore[attr-defined]
    assert (record.status, record.bytes_sent, record.duration, record.path) == (
        200, 1024, 0.0015, b"/a",
    )  # fmt: skip
    assert record.response_headers == [("X-Id", "7")]


def test_the_c_access_leaks_no_reference(loggers: dict[str, Logger]) -> None:
    """What a request hands the C access is referenced as often after a thousand
    requests, handed over or left to the reference, as before."""
    logger = loggers["everything"]
    compiled = logger._compiled_access
    assert compiled is not None
    assert logger.boundlog is not None
    resp = SimpleNamespace(status="200 OK", sent=1024, headers=[("X-Id", "7")])
    req = SimpleNamespace(headers=[("User-Agent", "curl/8")])
    environ = {"REQUEST_METHOD": "GET", "RAW_URI": "/a?b=1", "REMOTE_ADDR": "127.0.0.1"}
    delta = timedelta(microseconds=1500)
    stand_in = SimpleNamespace(seconds=0, microseconds=1)
    unusual = SimpleNamespace(status=Text("200 OK"), sent=0)
    watched = (resp, req, environ, delta, stand_in, unusual, resp.status, resp.headers,
               req.headers, unusual.status, *environ.values())  # fmt: skip

    def requests(count: int) -> None:
        for _ in range(count):
            assert compiled(resp, req, environ, delta) is True
            assert compiled(resp, req, environ, stand_in) is False
            assert compiled(unusual, req, environ, delta) is False
            assert compiled(SimpleNamespace(), req, environ, delta) is False  # no status
        logger.boundlog.flush()  # type: ignore[union-attr]
        logger.fmt.records.clear()  # type: ignore[attr-defined]

    requests(100)
    gc.collect()
    before = [sys.getrefcount(value) for value in watched]
    requests(1000)
    gc.collect()
    assert [sys.getrefcount(value) for value in watched] == before
