"""The dev format: short terminal lines, coloured only where colour is wanted, never broken."""

from __future__ import annotations

import math
import os
import re
import select
import tty
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _examples import examples
from _helpers import local_zone
from _records import make_record
from boundlog import AccessLog, DevFormat, Record
from boundlog.formats._apache import make_format
from boundlog.formats._escape import escape

GREEN, CYAN, YELLOW, RED, DIM, RESET = (
    b"\x1b[32m", b"\x1b[36m", b"\x1b[33m", b"\x1b[31m", b"\x1b[2m", b"\x1b[0m"
)  # fmt: skip
SGR = re.compile(rb"\x1b\[\d+m")
# 1700000000 is 2023-11-14T22:13:20Z, 14:13:20 in Los Angeles.
NOVEMBER = {"time": 1700000000.25, "method": "GET", "path": b"/items", "query": b"page=2",
            "status": 201, "duration": 0.0042}  # fmt: skip


@pytest.fixture
def los_angeles() -> Iterator[None]:
    with local_zone("America/Los_Angeles"):
        yield


@pytest.fixture
def plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment that leaves the colour decision to the sink."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


@pytest.mark.usefixtures("los_angeles")
@pytest.mark.parametrize(
    ("changes", "plain", "colored"),
    [
        ({}, b"14:13:20 GET /items?page=2 201 4.2ms\n",
         b"14:13:20 GET /items?page=2 " + GREEN + b"201" + RESET + b" " + DIM + b"4.2ms" + RESET + b"\n"),
        ({"query": b"", "status": 200}, b"14:13:20 GET /items 200 4.2ms\n",
         b"14:13:20 GET /items " + GREEN + b"200" + RESET + b" " + DIM + b"4.2ms" + RESET + b"\n"),
        ({"status": 302, "duration": 0.00004}, b"14:13:20 GET /items?page=2 302 0.0ms\n",
         b"14:13:20 GET /items?page=2 " + CYAN + b"302" + RESET + b" " + DIM + b"0.0ms" + RESET + b"\n"),
        ({"status": 404, "duration": 0.99994}, b"14:13:20 GET /items?page=2 404 999.9ms\n",
         b"14:13:20 GET /items?page=2 " + YELLOW + b"404" + RESET + b" " + DIM + b"999.9ms" + RESET + b"\n"),
        ({"status": 500, "duration": 0.99996}, b"14:13:20 GET /items?page=2 500 1.00s\n",
         b"14:13:20 GET /items?page=2 " + RED + b"500" + RESET + b" " + DIM + b"1.00s" + RESET + b"\n"),
        ({"status": 503, "duration": 1.2449}, b"14:13:20 GET /items?page=2 503 1.24s\n",
         b"14:13:20 GET /items?page=2 " + RED + b"503" + RESET + b" " + DIM + b"1.24s" + RESET + b"\n"),
        ({"status": 101, "duration": 75.0}, b"14:13:20 GET /items?page=2 101 75.00s\n",
         b"14:13:20 GET /items?page=2 101 " + DIM + b"75.00s" + RESET + b"\n"),
        ({"status": 10**20, "duration": math.nan}, b"14:13:20 GET /items?page=2 100000000000000000000 -\n",
         b"14:13:20 GET /items?page=2 100000000000000000000 " + DIM + b"-" + RESET + b"\n"),
        ({"method": "GET\x1b[2J", "path": b"/\x1b]0;owned\x07\n\r", "query": b"a=\xff\\\"b"},
         b'14:13:20 GET\\x1b[2J /\\x1b]0;owned\\x07\\x0a\\x0d?a=\\xff\\x5c\\x22b 201 4.2ms\n',
         b'14:13:20 GET\\x1b[2J /\\x1b]0;owned\\x07\\x0a\\x0d?a=\\xff\\x5c\\x22b ' + GREEN + b"201" + RESET
         + b" " + DIM + b"4.2ms" + RESET + b"\n"),
    ],
)  # fmt: skip
def test_lines_plain_and_colored(changes: dict[str, Any], plain: bytes, colored: bytes) -> None:
    """Time, method, target, status and duration, with colour exactly where it belongs."""
    record = make_record(**{**NOVEMBER, **changes})
    for color, line in ((False, plain), (True, colored)):
        fmt = DevFormat(color=color)
        assert fmt.format_batch([record]) == line
        # In a batch with records of other durations, each line is unchanged.
        other = make_record(**{**NOVEMBER, "duration": 2.5})
        assert fmt.format_batch([other, record, record]) == fmt.format_batch([other]) + line * 2


@pytest.mark.parametrize(("utc", "clock"), [(False, b"14:13:20"), (True, b"22:13:20")])
def test_time_is_local_or_utc(utc: bool, clock: bytes) -> None:
    """The clock time is local unless utc=True; make_format('dev') honours utc too."""
    record = make_record(**NOVEMBER)
    with local_zone("America/Los_Angeles"):
        assert DevFormat(color=False, utc=utc).format_batch([record]).startswith(clock + b" ")
        assert make_format("dev", utc=utc).format_batch([record]).startswith(clock + b" ")


TEXT = st.text(st.one_of(st.sampled_from('\x1b\n\r\x85\u2028"\\ ?%'), st.characters()))
HOSTILE = st.builds(
    make_record,
    time=st.floats(min_value=0, max_value=4102444800.0),
    duration=st.floats(allow_nan=True, allow_infinity=True),
    method=TEXT,
    path=st.binary(),
    query=st.binary(),
    status=st.integers(min_value=0, max_value=10**6),
)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(HOSTILE, max_size=8), st.booleans())
def test_hostile_bytes_never_reach_the_terminal(records: list[Record], color: bool) -> None:
    """Each record is one printable line; the only escape sequences are the format's colours."""
    data = DevFormat(color=color).format_batch(records)
    lines = data.split(b"\n")
    assert lines.pop() == b""
    assert len(lines) == len(records)
    for line, record in zip(lines, records, strict=True):
        colors = SGR.findall(line)
        assert len(colors) == (0 if not color else 2 if not 200 <= record.status < 600 else 4)
        visible = SGR.sub(b"", line)
        assert re.fullmatch(rb"[\x20-\x7e]+", visible), line
        target = escape(record.path) + (b"?" + escape(record.query) if record.query else b"")
        assert b" " + target + b" %d " % record.status in visible


def read_all(fd: int) -> bytes:
    """What is waiting to be read on ``fd``, once nothing more arrives within a second."""
    chunks = []
    while select.select([fd], [], [], 1.0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.usefixtures("plain_environment")
@pytest.mark.parametrize(
    ("environ", "colored"),
    [({}, True), ({"NO_COLOR": "1"}, False), ({"FORCE_COLOR": "0"}, False),
     ({"TERM": "dumb"}, False)],
)  # fmt: skip
def test_a_terminal_sink_gets_colour(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], colored: bool
) -> None:
    """Lines written to a pseudo-terminal are coloured unless the environment says not to."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    controller, terminal = os.openpty()
    try:
        # Raw mode: the terminal passes bytes through without turning \n into \r\n.
        tty.setraw(terminal)
        with AccessLog(terminal, format="dev", utc=True):
            pass  # nothing logged: the log only decides
        with AccessLog(terminal, format=DevFormat(utc=True)) as log:
            log.submit(make_record(**NOVEMBER))
        with AccessLog(terminal, format="dev", utc=True) as log:
            log.submit(make_record(**NOVEMBER))
        data = read_all(controller)
    finally:
        os.close(terminal)
        os.close(controller)
    expected = DevFormat(color=colored, utc=True).format_batch([make_record(**NOVEMBER)])
    assert data == expected * 2
    assert (b"\x1b[" in data) is colored


@pytest.mark.usefixtures("plain_environment")
@pytest.mark.parametrize(
    ("environ", "color", "colored"),
    [({}, None, False), ({"FORCE_COLOR": "1"}, None, True), ({"FORCE_COLOR": "1"}, False, False),
     ({"NO_COLOR": "1"}, True, True), ({}, True, True)],
)  # fmt: skip
def test_a_file_sink_gets_colour_only_when_forced(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    color: bool | None,
    colored: bool,
) -> None:
    """A file is not a terminal: FORCE_COLOR or color=True colour it; color=False never does."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "access.log"
    with AccessLog(str(path), format=DevFormat(color=color, utc=True)) as log:
        log.submit(make_record(**NOVEMBER))
    assert path.read_bytes() == DevFormat(color=colored, utc=True).format_batch(
        [make_record(**NOVEMBER)]
    )


def test_clock_follows_the_second() -> None:
    """Records a second apart get their own clock times, in order, within one batch."""
    records = [make_record(time=when) for when in (1700000000.5, 1700000001.25, 1700000000.999)]
    data = DevFormat(color=False, utc=True).format_batch(records)
    assert [line[:8] for line in data.splitlines()] == [b"22:13:20", b"22:13:21", b"22:13:20"]
