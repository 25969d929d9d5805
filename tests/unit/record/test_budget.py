"""The byte budget per record: what a queued record keeps of what a client sent.

Each integration keeps an ordinary request's objects as the server gave them, and cuts
a record over ``max_record_bytes`` down (see ``boundlog.record._budget``).  These tests build
records the way the integrations do, from hostile requests, and check what they keep,
what the lines show, and what formatting a batch of them costs in memory.
"""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc
from typing import Any

import pytest
from gunicorn.config import Config

import boundlog
from _records import make_record
from boundlog import AccessLog, ConfigurationError, JsonFormat, unescape
from boundlog._options import DEFAULT_MAX_RECORD_BYTES
from boundlog.asgi import AccessLogMiddleware, _record
from boundlog.formats._apache import make_format
from boundlog.gunicorn import Logger
from boundlog.record._budget import CUT_MARKER, RECORD_OVERHEAD, RecordBudget, client_bytes
from boundlog.wsgi import AccessLogMiddleware as WsgiMiddleware

MIB = 1024 * 1024
COMBINED_NAMES = frozenset((b"referer", b"user-agent"))
BROWSER_HEADERS = [
    (b"host", b"example.com"),
    (b"connection", b"keep-alive"),
    (
        b"user-agent",
        b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/124.0 Safari/537.36",
    ),
    (b"accept", b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    (b"accept-encoding", b"gzip, deflate, br, zstd"),
    (b"accept-language", b"en-US,en;q=0.9"),
    (b"referer", b"https://example.com/index.html"),
    (b"cookie", b"session=" + b"a" * 4000),
]


def asgi_scope(headers: list[tuple[bytes, bytes]], path: bytes = b"/p", query: bytes = b"") -> Any:
    return {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "path": path.decode("latin-1"),
        "raw_path": path,
        "query_string": query,
        "headers": headers,
        "client": ("10.0.0.1", 5000),
    }


def asgi_record(scope: Any, budget: RecordBudget) -> Any:
    return _record(scope, 1_700_000_000.0, 200, 10, {}, False, budget)


def marker_at_end(value: bytes, original: int) -> bool:
    """Whether ``value`` ends in the marker that counts what was cut of ``original`` bytes."""
    head, _, tail = value.rpartition(b"[...")
    return tail == b"%d bytes cut]" % (original - len(head))


def test_an_ordinary_request_keeps_the_servers_objects() -> None:
    """Within the budget the record holds the server's header list itself: no copy."""
    headers = list(BROWSER_HEADERS)
    scope = asgi_scope(headers, b"/some/page", b"a=1")
    record = asgi_record(scope, RecordBudget(DEFAULT_MAX_RECORD_BYTES, COMBINED_NAMES))
    assert record[9] is headers
    assert record[4] is scope["raw_path"]
    assert client_bytes(record[4], record[5], record[9]) < DEFAULT_MAX_RECORD_BYTES // 2


def test_a_1_mib_user_agent_keeps_at_most_the_budget_and_shows_the_marker(tmp_path: Any) -> None:
    """The cut record keeps only the fields the log reads; the line ends the value marked."""
    agent = b"A" * MIB
    headers = [(b"host", b"h"), (b"user-agent", agent), (b"cookie", b"c" * MIB)]
    budget = RecordBudget(DEFAULT_MAX_RECORD_BYTES, COMBINED_NAMES)
    record = asgi_record(asgi_scope(headers), budget)

    assert client_bytes(record[4], record[5], record[9]) <= DEFAULT_MAX_RECORD_BYTES
    ((name, kept),) = record[9]
    assert name == b"user-agent"
    assert kept.startswith(b"A" * 8000)
    assert marker_at_end(kept, MIB)
    combined = make_format("combined", utc=True).format_batch([record])
    assert combined.endswith(b'"-" "' + kept + b'"\n')
    line = json.loads(JsonFormat(utc=True).format_batch([record]))
    assert line["user_agent"].encode() == kept


def test_a_cut_keeps_utf8_sequences_whole_and_the_short_fields_as_they_are() -> None:
    """The longest fields share what the short ones leave; no UTF-8 sequence is split."""
    agent = "é".encode() * (MIB // 2)
    referer = b"https://example.com/from"
    path = b"/" + b"p" * MIB
    headers = [(b"referer", referer), (b"user-agent", agent)]
    record = asgi_record(asgi_scope(headers, path), RecordBudget(16384, COMBINED_NAMES))
    kept = dict(record[9])
    assert kept[b"referer"] == referer
    cut_agent = kept[b"user-agent"]
    assert cut_agent.rpartition(b"[...")[0].decode("utf-8")  # decodes: no split sequence
    assert marker_at_end(cut_agent, len(agent))
    assert marker_at_end(record[4], len(path))
    # The two long values share the room equally, up to the marker and a UTF-8 step.
    assert abs(len(cut_agent) - len(record[4])) <= 3


def test_forwarding_headers_keep_their_end_from_a_whole_element() -> None:
    """Proxies append the hops that matter: a cut X-Forwarded-For keeps its last entries."""
    names = COMBINED_NAMES | {b"x-forwarded-for"}
    forwarded = b", ".join(b"198.51.100.%d" % (i % 250) for i in range(20000)) + b", 203.0.113.7"
    headers = [(b"x-forwarded-for", forwarded), (b"user-agent", b"u" * MIB)]
    record = asgi_record(asgi_scope(headers), RecordBudget(16384, names))
    kept = dict(record[9])[b"x-forwarded-for"]
    assert kept.endswith(b", 203.0.113.7")
    marker, _, rest = kept.partition(b", ")
    assert marker == CUT_MARKER % (len(forwarded) - len(rest))
    assert rest.startswith(b"198.51.100.")
    assert all(entry.count(b".") == 3 for entry in rest.split(b", "))


def test_repeated_fields_are_joined_and_bounded_like_one() -> None:
    """10,000 User-Agent lines are one field for the log: joined, then cut to the budget."""
    headers = [(b"user-agent", b"agent-%d" % i) for i in range(10000)]
    record = asgi_record(asgi_scope(headers), RecordBudget(16384, COMBINED_NAMES))
    ((_, kept),) = record[9]
    assert kept.startswith(b"agent-0, agent-1, ")
    assert client_bytes(record[4], record[5], record[9]) <= 16384


@pytest.mark.parametrize("fields", [10, 10_000])
def test_a_log_that_reads_any_field_keeps_forwarding_headers_and_what_fits(fields: int) -> None:
    """With names None every field may matter: they are kept, forwarding first, within budget."""
    headers = [(b"x-pad-%d" % i, b"v" * 3000) for i in range(fields)]
    headers.append((b"X-Forwarded-For", b"192.0.2.1"))
    record = asgi_record(asgi_scope(headers, b"/" * MIB, b"q" * MIB), RecordBudget(16384, None))
    kept = record[9]
    assert kept[0] == (b"X-Forwarded-For", b"192.0.2.1")
    assert len(kept) > 1
    assert client_bytes(record[4], record[5], kept) <= 16384


@pytest.mark.parametrize("limit", [4096, 16384, 65536])
@pytest.mark.parametrize("names", [COMBINED_NAMES, None], ids=["combined", "any"])
def test_whatever_is_sent_a_cut_record_fits_its_budget(
    limit: int, names: frozenset[bytes] | None
) -> None:
    """Sizes from empty to 1 MiB in every field, in text (gunicorn) and bytes (ASGI)."""
    budget = RecordBudget(limit, names)
    for size in (0, 1, 100, 5000, 70000, MIB):
        for text in (False, True):
            value = "v" * size if text else b"v" * size
            headers = [
                (b"User-Agent" if not text else "USER-AGENT", value),
                (b"referer" if not text else "REFERER", value),
                (b"x-long-" + b"n" * size if not text else "X-" + "N" * size, value),
            ]
            path, query, kept = budget.pairs(b"/" * size, b"q" * size, headers)
            assert client_bytes(path, query, kept) <= limit, (size, text)
            assert all(type(value) is type(headers[0][1]) for _, value in kept)


def test_wsgi_picked_fields_and_whole_environs_are_cut_to_the_budget() -> None:
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/",
        "HTTP_USER_AGENT": "u" * MIB,
        "HTTP_COOKIE": "c" * MIB,
        "wsgi.input": object(),
    }
    picked = {"HTTP_USER_AGENT": environ["HTTP_USER_AGENT"], "HTTP_REFERER": None}
    _, _, kept = RecordBudget(16384, COMBINED_NAMES).bounded_environ(b"/", b"", picked)
    assert kept["HTTP_REFERER"] is None
    assert len(kept["HTTP_USER_AGENT"]) < 16384
    assert kept["HTTP_USER_AGENT"].endswith("bytes cut]")
    _, _, whole = RecordBudget(16384, None).bounded_environ(b"/", b"", environ)
    assert set(whole) == {"HTTP_USER_AGENT", "HTTP_COOKIE"}
    assert sum(map(len, whole.values())) < 16384
    # An ordinary environ is kept as it is.
    ordinary = {**environ, "HTTP_USER_AGENT": "u", "HTTP_COOKIE": "c"}
    assert RecordBudget(16384, None).bounded_environ(b"/", b"", ordinary)[2] is ordinary


def test_the_wsgi_middleware_cuts_what_it_keeps(tmp_path: Any) -> None:
    """End to end in process: the line shows the agent's start and the marker."""
    log_path = tmp_path / "access.log"
    with AccessLog(str(log_path), utc=True) as log:

        def application(environ: Any, start_response: Any) -> list[bytes]:
            start_response("200 OK", [])
            return [b"ok"]

        app = WsgiMiddleware(application, log=log)
        environ = {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": "/x",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "10.0.0.1",
            "HTTP_USER_AGENT": "u" * MIB,
        }
        body = app(environ, lambda status, headers: None)
        list(body)
        body.close()  # type: ignore[attr-defined]
    (line,) = log_path.read_bytes().splitlines()
    agent = unescape(line.rpartition(b' "')[2][:-1])
    assert agent.startswith(b"u" * 8000)
    assert marker_at_end(agent, MIB)
    assert len(line) < 16384


@pytest.mark.parametrize("value", [0, 4095, -1, 2.5e4, "16384", True, None])
def test_max_record_bytes_must_be_a_whole_number_of_at_least_4096(value: object) -> None:
    with pytest.raises(ConfigurationError, match="max_record_bytes must be a whole number"):
        AccessLog("/dev/null", max_record_bytes=value)  # type: ignore[arg-type]


def test_max_record_bytes_sets_the_budget_the_middlewares_use() -> None:
    with AccessLog("/dev/null", max_record_bytes=4096) as log:
        middleware = AccessLogMiddleware(lambda scope, receive, send: None, log=log)  # type: ignore[arg-type,return-value]
        assert middleware._budget.limit == log.max_record_bytes == 4096
        headers = [(b"user-agent", b"u" * 8000)]
        record = asgi_record(asgi_scope(headers), middleware._budget)
        assert client_bytes(record[4], record[5], record[9]) <= 4096


def _record_cost(record: Any) -> int:
    """What tracemalloc sees a record and everything only it holds cost, in bytes."""
    seen: set[int] = set()
    total = 0
    stack = [record]
    while stack:
        item = stack.pop()
        if id(item) in seen or item is None or isinstance(item, (int, float)):
            continue
        seen.add(id(item))
        # __sizeof__ leaves out the garbage collector's header of a tracked object.
        total += item.__sizeof__() + (16 if gc.is_tracked(item) else 0)
        if isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


def test_what_a_record_costs_is_within_the_documented_overheads() -> None:
    """RECORD_OVERHEAD and FIELD_OVERHEAD cover what the estimate leaves out."""
    for headers in (
        BROWSER_HEADERS,
        [(b"user-agent", b"u" * MIB)],
        [(b"a%d" % i, b"") for i in range(1000)],
    ):
        record = asgi_record(
            asgi_scope([(bytes(name), bytes(value)) for name, value in headers]),
            RecordBudget(DEFAULT_MAX_RECORD_BYTES, COMBINED_NAMES),
        )
        estimate = client_bytes(record[4], record[5], record[9])
        assert _record_cost(record) <= RECORD_OVERHEAD + estimate


BATCH = 256
# A formatted line is at most 6 bytes per client byte (JSON's \u00XX escapes; \xHH is 4)
# plus the fields no client controls.
LINE_BOUND = 6 * DEFAULT_MAX_RECORD_BYTES + 1024
# Formatting holds the columns, the escaped values and the joined batch at once.
FORMAT_FACTOR = 4


@pytest.mark.parametrize("name", ["combined", "json"])
def test_formatting_a_batch_of_1_mib_user_agents_peaks_below_the_bound(name: str) -> None:
    """256 hostile records, cut as the integrations cut them: the peak is bounded by the budget.

    Uncut, these records took +2.3 GiB (combined) and +3.8 GiB (json) to format.
    """
    budget = RecordBudget(DEFAULT_MAX_RECORD_BYTES, COMBINED_NAMES | {b"x-request-id"})
    hostile = bytes(range(256)) * (MIB // 256)
    records = [
        asgi_record(
            asgi_scope([(b"user-agent", hostile), (b"referer", hostile)], b"/" + hostile), budget
        )
        for _ in range(BATCH)
    ]
    log_format = make_format(name, utc=True)
    tracemalloc.start()
    try:
        lines = log_format.format_batch(records)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lines.count(b"\n") == BATCH
    assert peak < BATCH * LINE_BOUND * FORMAT_FACTOR, f"peak {peak / MIB:.1f} MiB"


def test_an_uncut_batch_would_exceed_that_bound() -> None:
    """The bound above is one the uncut records break: the test can fail."""
    records = [make_record(user_agent=b"a" * MIB) for _ in range(4)]
    tracemalloc.start()
    try:
        make_format("combined", utc=True).format_batch(records)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak > 4 * LINE_BOUND * FORMAT_FACTOR


def test_a_cut_record_still_logs_the_forwarded_client_and_hides_the_password(
    tmp_path: Any,
) -> None:
    """Cutting keeps what the writer's rewrites need: the proxy's hops, the query's names."""
    log_path = tmp_path / "access.log"
    forwarded = b"198.51.100.1, " * 100_000 + b"203.0.113.9"
    scope = asgi_scope(
        [(b"x-forwarded-for", forwarded), (b"user-agent", b"u" * 100)],
        query=b"a=1&password=" + b"s" * MIB,
    )
    scope["client"] = ("10.1.2.3", 5000)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> Any:
        return {"type": "http.request"}

    async def send(message: Any) -> None:
        pass

    with AccessLog(str(log_path), trusted_proxies=["10.1.2.3"], utc=True) as log:
        asyncio.run(AccessLogMiddleware(app, log=log)(scope, receive, send))
    (line,) = log_path.read_bytes().splitlines()
    assert line.startswith(b"203.0.113.9 - - [")
    assert b'"GET /p?a=1&password=[redacted] HTTP/1.1"' in line
    assert b"sss" not in line


def test_gunicorns_logger_reads_max_record_bytes_from_the_environment() -> None:
    cfg = Config()
    cfg.set("raw_env", ["BOUNDLOG_MAX_RECORD_BYTES=65536"])
    assert Logger(cfg).log_options(cfg)["max_record_bytes"] == 65536


def _notes_bytes(notes: dict[str, Any]) -> int:
    return sum(160 + len(name) + len(str(value)) for name, value in notes.items())


@pytest.mark.parametrize("size", [0, 100, 20_000, MIB])
def test_added_fields_count_against_the_budget_and_a_cut_one_ends_in_the_marker(
    size: int,
) -> None:
    """Path, query, headers and the application's fields together fit the budget."""
    budget = RecordBudget(DEFAULT_MAX_RECORD_BYTES, COMBINED_NAMES)
    headers = list(BROWSER_HEADERS)
    notes = {"big": "b" * size, "user": "ada", "n": 7, "items": ["x" * size]}
    kept = budget.notes(notes, b"/p", b"q=1", headers)
    assert kept is not None
    assert kept is not notes
    assert set(kept) == set(notes)
    assert kept["user"] == "ada"
    assert kept["n"] == 7
    # Not a JSON scalar: its text, as the formats write it, so that it is measured.
    assert type(kept["items"]) is str
    used = client_bytes(b"/p", b"q=1", headers)
    assert used + _notes_bytes(kept) <= DEFAULT_MAX_RECORD_BYTES
    if size >= 20_000:
        assert kept["big"].startswith("b" * 1000)
        assert marker_at_end(kept["big"].encode(), size)
    else:
        assert kept["big"] == notes["big"]
    assert budget.notes({}, b"/", b"", headers) is None
    assert budget.notes(None, b"/", b"", headers) is None


@pytest.mark.parametrize(
    "notes",
    [
        {"n" * MIB: 1, "user": "ada"},
        {f"field{number}": number for number in range(20_000)},
        {f"field{number}": "v" * 50 for number in range(20_000)},
    ],
    ids=["a-1-MiB-name", "20000-ints", "20000-strs"],
)
def test_added_field_names_count_too_and_the_fields_that_do_not_fit_are_counted(
    notes: dict[str, Any],
) -> None:
    """A name is the application's bytes too, and may be a client's
    (``add_fields(**request_json)``): only values were cut, so a 1 MiB name or 20,000
    fields made a record of 1 MB or 400 KB.  Fields are kept in the order added while
    their names fit in half the room, and ``fields_cut`` says how many were dropped."""
    budget = RecordBudget(DEFAULT_MAX_RECORD_BYTES, COMBINED_NAMES)
    headers = list(BROWSER_HEADERS)
    kept = budget.notes(notes, b"/p", b"q=1", headers)
    assert kept is not None
    used = client_bytes(b"/p", b"q=1", headers)
    assert used + _notes_bytes(kept) <= DEFAULT_MAX_RECORD_BYTES
    assert kept["fields_cut"] == len(notes) + 1 - len(kept)
    if "user" in notes:
        assert kept == {"user": "ada", "fields_cut": 1}
    else:
        # The first fields added are those kept, then the count of the others.
        assert list(kept)[:-1] == list(notes)[: len(kept) - 1]


def test_the_middlewares_cut_a_1_mib_added_field(tmp_path: Any) -> None:
    """End to end in process, ASGI and WSGI: the JSON line shows the value cut, marked."""
    log_path = tmp_path / "access.log"
    with AccessLog(str(log_path), format="json", utc=True) as log:

        def wsgi_application(environ: Any, start_response: Any) -> list[bytes]:
            boundlog.add_fields(big="w" * MIB)
            start_response("200 OK", [])
            return [b"ok"]

        async def asgi_application(scope: Any, receive: Any, send: Any) -> None:
            boundlog.add_fields(big="a" * MIB)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/x", "SERVER_PROTOCOL": "HTTP/1.1"}
        body = WsgiMiddleware(wsgi_application, log=log)(environ, lambda status, headers: None)
        list(body)
        body.close()  # type: ignore[attr-defined]

        async def receive() -> Any:
            return {"type": "http.request"}

        async def send(message: Any) -> None:
            pass

        middleware = AccessLogMiddleware(asgi_application, log=log)
        asyncio.run(middleware(asgi_scope([(b"host", b"h")]), receive, send))
    lines = log_path.read_bytes().splitlines()
    assert len(lines) == 2
    for line, letter in zip(lines, "wa", strict=True):
        # The budget bounds the fields, not the line: its other keys come on top.
        assert len(line) < DEFAULT_MAX_RECORD_BYTES + 1024
        big = json.loads(line)["big"]
        assert big.startswith(letter * 8000)
        assert marker_at_end(big.encode(), MIB)
