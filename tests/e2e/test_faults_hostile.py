"""Hostile requests end to end: raw bytes on a socket, through uvicorn and gunicorn.

Each request carries one hostile value (quotes, backslashes, control bytes, CR, LF, NUL,
DEL, invalid UTF-8, characters ``str.splitlines()`` breaks on, a 64 KiB value, a header
injection attempt) in its path, query, Referer or User-Agent.  The servers refuse many
of them with a 4xx of their own and never call the application: then there is no line,
which is right.  Every request a server did hand to the application must produce
exactly one line, on which the combined format's fields unescape to the bytes the
server received, the JSON format is valid JSON with the same values, and the logfmt
format parses (as go-logfmt reads it) to them too.

What a hostile value costs the writer is tested in process: the calls made to format a
batch do not grow with the bytes a client chooses, and the memory held while formatting
stays within twice the output.
"""

from __future__ import annotations

import gc
import json
import re
import socket
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NamedTuple

import pytest
from logfmtkv import parse_pairs

from _records import make_record
from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    fault_environment,
    gunicorn_fault_command,
    parse_combined_line,
    read_log_lines,
    read_until_closed,
    running_server,
    uvicorn_fault_command,
)
from boundlog import Record, Template, unescape
from boundlog.formats._apache import Format, make_format

HOSTILE_VALUES = {
    "quotes": b'say "hi"',
    "backslashes": b"back\\slash\\",
    "controls": b"\x01\x02\x1b[31mred",
    "tab": b"a\tb",
    "del": b"\x7f",
    "nul": b"\x00nul",
    "cr": b"cr\rx",
    "lf": b"lf\nx",
    "invalid-utf8": b"\xff\xfe\xc3",
    "utf8": b"caf\xc3\xa9",
    "line-separator": b"\xe2\x80\xa8",
    "next-line": b"\xc2\x85",
    "file-separators": b"\x1c\x1d\x1e",
    "64-kib": b"b" * 65536,
    "space": b"a b",
    "percent-encoded-crlf": b"%0d%0a%00",
}
FIELDS = ("path", "query", "referer", "user_agent")
# A header value that tries to add a line of its own: a server that accepts it sees a
# value ending before the CR LF, and a second header.
INJECTION = b"a\r\nX-Injected: 1"
AGENT = b"hostile-test"

SERVERS: dict[str, Callable[[int], list[str]]] = {
    "uvicorn-httptools": uvicorn_fault_command,
    "uvicorn-h11": lambda port: [
        "h11" if part == "httptools" else part for part in uvicorn_fault_command(port)
    ],
    "gunicorn": gunicorn_fault_command("-k", "gthread", "-w", "1"),
}
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3}) ")


class Hostile(NamedTuple):
    """One request, and the values the server hands to the application if it accepts it."""

    path: bytes
    query: bytes
    referer: bytes | None
    user_agent: bytes

    def request(self, sent_header: bytes | None = None) -> bytes:
        target = self.path + (b"?" + self.query if self.query else b"")
        headers = [b"GET " + target + b" HTTP/1.1", b"Host: " + LOOPBACK.encode()]
        if self.referer is not None:
            headers.append(b"Referer: " + (sent_header or self.referer))
        headers.append(b"User-Agent: " + self.user_agent)
        headers.append(b"Connection: close")
        return b"\r\n".join(headers) + b"\r\n\r\n"


def _hostile_requests() -> list[tuple[Hostile, bytes]]:
    """Each request with the bytes sent for it; ``/h/N`` opens every path."""
    requests = []
    for value in HOSTILE_VALUES.values():
        for field in FIELDS:
            number = b"/h/%d" % len(requests)
            hostile = Hostile(
                path=number + b"/" + value if field == "path" else number,
                query=value if field == "query" else b"n=1",
                referer=value if field == "referer" else None,
                user_agent=value if field == "user_agent" else AGENT,
            )
            requests.append((hostile, hostile.request()))
    injected = Hostile(b"/h/%d" % len(requests), b"", INJECTION.split(b"\r\n")[0], AGENT)
    requests.append((injected, injected.request(sent_header=INJECTION)))
    return requests


def _accepted(port: int, request: bytes) -> bool:
    """Send one request; whether the application answered it (not the server itself)."""
    with socket.create_connection((LOOPBACK, port), timeout=CLIENT_TIMEOUT) as sock:
        sock.sendall(request)
        try:
            response = read_until_closed(sock)
        except ConnectionResetError:
            return False
    status = _STATUS_LINE.match(response)
    _head, _, body = response.partition(b"\r\n\r\n")
    return status is not None and status[1] == b"200" and body.startswith(b"ok ")


def _combined_values(line: bytes) -> tuple[int, tuple[bytes | None, ...]]:
    """The request's number, and the four values a combined line holds, unescaped."""
    fields, _ = parse_combined_line(line)
    path, _, query = unescape(fields.target).partition(b"?")
    referer = None if fields.referer == b"-" else unescape(fields.referer)
    return int(path.split(b"/")[2]), (path, query, referer, unescape(fields.user_agent))


def _json_values(line: bytes) -> tuple[int, tuple[bytes | None, ...]]:
    """The request's number, and the four values of a line that must be valid JSON, as the
    bytes they stand for (their text's UTF-8, with its \\xhh escapes unescaped)."""
    assert re.fullmatch(rb"[\x20-\x7e]*", line), f"not printable ASCII: {line!r}"
    entry = json.loads(line)
    values = entry["path"], entry["query"], entry["referer"], entry["user_agent"]
    return int(entry["path"].split("/")[2]), tuple(
        None if value is None else unescape(value.encode()) for value in values
    )


def _logfmt_values(line: bytes) -> tuple[int, tuple[bytes | None, ...]]:
    """The request's number, and the four values of a line that must parse as logfmt
    (as go-logfmt reads it), as the bytes they stand for, as in a JSON line."""
    assert re.fullmatch(rb"[\x20-\x7e]*", line), f"not printable ASCII: {line!r}"
    entry = dict(parse_pairs(line.decode("ascii"), strict=True))
    values = entry["path"], entry["query"], entry.get("referer"), entry["user_agent"]
    assert entry["path"] is not None
    return int(entry["path"].split("/")[2]), tuple(
        None if value is None else unescape(value.encode()) for value in values
    )


PARSERS: dict[str, Callable[[bytes], tuple[int, tuple[object, ...]]]] = {
    "combined": _combined_values,
    "json": _json_values,
    "logfmt": _logfmt_values,
}
EXPECTATIONS: dict[str, Callable[[Hostile], tuple[object, ...]]] = {
    "combined": tuple,
    "json": tuple,
    "logfmt": tuple,
}


@pytest.mark.parametrize("log_format", ["combined", "json", "logfmt"])
@pytest.mark.parametrize("server_name", SERVERS)
def test_hostile_requests_make_one_faithful_line_each(
    tmp_path: Path, server_name: str, log_format: str
) -> None:
    """Every accepted hostile request gives one line that decodes to exactly what was sent."""
    log_path = tmp_path / "access.log"
    # A budget above the 64 KiB value, which would be cut otherwise (see test_budget.py).
    options = {"sink": str(log_path), "format": log_format, "max_record_bytes": 1 << 20}
    environment = fault_environment(options, tmp_path)
    requests = _hostile_requests()
    with running_server(SERVERS[server_name], environment, tmp_path / "out") as server:
        accepted = {
            number: hostile
            for number, (hostile, request) in enumerate(requests)
            if _accepted(server.port, request)
        }
        server.stop()
    # Some are accepted by every server: the test must not pass by refusing them all.
    assert len(accepted) >= 20, sorted(accepted)

    parse = PARSERS[log_format]
    logged: dict[int, tuple[object, ...]] = {}
    for line in read_log_lines(log_path):
        number, values = parse(line)
        assert number not in logged, f"request {number} logged twice"
        logged[number] = values
    assert sorted(logged) == sorted(accepted), "one line for each accepted request, no other"
    expect = EXPECTATIONS[log_format]
    for number, hostile in accepted.items():
        assert logged[number] == expect(hostile), number


# Every byte, then the ones that have escapes of their own, then text: a client's worst.
HOSTILE_BYTES = bytes(range(256)) + b'""\\\\\t\n\r  ' + "caf\u00e9 \u2028".encode()
HOSTILE_FORMATS: dict[str, Callable[[], Format]] = {
    "combined": lambda: make_format("combined", utc=True),
    "json": lambda: make_format("json", utc=True),
    "logfmt": lambda: make_format("logfmt", utc=True),
    "dev": lambda: make_format("dev", utc=True),
    "ecs": lambda: make_format("ecs", utc=True),
    "gcp": lambda: make_format("gcp", utc=True),
    "otel": lambda: make_format("otel", utc=True),
    "template": lambda: Template('%h "%r" "%{User-Agent}i" %(u)s %(a)s', utc=True),
}


def _hostile_batch(size: int, count: int = 16) -> list[Record]:
    """``count`` records whose path, query, Referer and User-Agent hold ``size`` hostile bytes."""
    value = (HOSTILE_BYTES * (size // len(HOSTILE_BYTES) + 1))[:size]
    return [
        make_record(path=b"/" + value, query=value, referer=value, user_agent=value)
        for _ in range(count)
    ]


def _calls_to_format(fmt: Format, records: list[Record]) -> int:
    """How many Python and C functions formatting ``records`` calls."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    # A collection would run other objects' finalizers inside the count.
    gc.disable()
    sys.setprofile(count)
    try:
        fmt.format_batch(records)
    finally:
        sys.setprofile(None)
        gc.enable()
    return calls


@pytest.mark.parametrize("name", HOSTILE_FORMATS)
def test_a_hostile_value_costs_no_more_calls_the_longer_it_is(name: str) -> None:
    """Escaping is a fixed number of C-level passes over a value: formatting a batch whose
    fields hold 64 KiB of hostile bytes makes exactly the calls that 1 KiB does (no
    function runs per byte, as a regular expression's callback did)."""
    fmt = HOSTILE_FORMATS[name]()
    fmt.format_batch(_hostile_batch(100))  # caches filled: the time stamp, distinct values
    assert _calls_to_format(fmt, _hostile_batch(65536)) == _calls_to_format(
        fmt, _hostile_batch(1024)
    )


@pytest.mark.parametrize("name", HOSTILE_FORMATS)
def test_formatting_hostile_values_holds_at_most_twice_the_output(name: str) -> None:
    """A batch of 16 records with 64 KiB of hostile bytes in four fields each (about 4 MiB
    of lines) is formatted holding no more than the lines' pieces and the lines: no copy
    of the batch per step of escaping."""
    fmt = HOSTILE_FORMATS[name]()
    records = _hostile_batch(65536)
    fmt.format_batch(records[:1])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        output = fmt.format_batch(records)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert len(output) > 1 << 20
    assert peak <= 2 * len(output) + (256 << 10), (peak, len(output))
