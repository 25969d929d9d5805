"""Filters: which records the writer logs, and the accounting of those it skips."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from _records import make_record
from boundlog import AccessLog, ConfigurationError, Record, Stats
from boundlog.selection._filters import Select, make_select


def select(**options: Any) -> Select:
    """A selection with query redaction off unless asked, so that only ``options`` act."""
    selection = make_select(**{"redact_query": (), **options})
    assert selection is not None
    return selection


def kept(selection: Select, records: list[Record]) -> list[Record]:
    """What ``selection`` keeps of ``records``, failing the test if it reports anything."""
    reports: list[str] = []
    result = selection(list(records), reports.append)
    assert reports == []
    return result


@pytest.mark.parametrize(
    ("entries", "path", "skipped"),
    [
        (["/healthz"], b"/healthz", True),
        (["/healthz"], b"/healthz/", False),
        (["/healthz"], b"/healthz2", False),
        (["/healthz"], b"/HEALTHZ", False),
        # The raw path is compared: an escaped request for the same resource is logged.
        (["/healthz"], b"/heal%74hz", False),
        (["/static/*"], b"/static/app.css", True),
        (["/static/*"], b"/static/", True),
        (["/static/*"], b"/static", False),
        (["/static*"], b"/static", True),
        (["/*"], b"/anything", True),
        ("/healthz", b"/healthz", True),
        ([b"/metrics"], b"/metrics", True),
        (["/healthz", "/static/*"], b"/static/a", True),
        (["/healthz", "/static/*"], b"/index.html", False),
    ],
)
def test_skip_paths_match_exactly_or_by_a_trailing_star(
    entries: Any, path: bytes, skipped: bool
) -> None:
    """An entry matches the raw path exactly, or as a prefix when it ends in ``*``."""
    record = make_record(path=path, query=b"x=1")
    assert kept(select(skip_paths=entries), [record]) == ([] if skipped else [record])


@pytest.mark.parametrize(("status", "logged"), [
    (101, False), (200, False), (204, False), (304, False), (399, False),
    (400, True), (404, True), (429, True), (500, True), (503, True), (999, True),
])  # fmt: skip
@pytest.mark.parametrize("entries", [["/healthz"], ["/health*"]])
def test_skip_paths_log_their_errors(entries: list[str], status: int, logged: bool) -> None:
    """A skipped path's responses from 400 up are logged: a failing health check shows."""
    record = make_record(path=b"/healthz", status=status)
    assert kept(select(skip_paths=entries), [record]) == ([record] if logged else [])


@pytest.mark.parametrize("status", [200, 304, 404, 500, 503])
def test_skip_path_errors_skips_every_response_of_the_paths(status: int) -> None:
    """skip_path_errors=True: a skipped path is never logged, whatever its status."""
    selection = select(skip_paths=["/healthz", "/static/*"], skip_path_errors=True)
    records = [
        make_record(path=b"/healthz", status=status),
        make_record(path=b"/static/gone.js", status=status),
        make_record(path=b"/page", status=status),
    ]
    assert kept(selection, records) == records[2:]


def test_skip_path_errors_alone_asks_for_nothing() -> None:
    """Without skip_paths it has nothing to act on: no selection step."""
    assert make_select(skip_path_errors=True, redact_query=()) is None


def test_a_skipped_paths_errors_meet_the_other_filters() -> None:
    """Kept by skip_paths, an error is still skipped by skip_status or min_duration."""
    selection = select(skip_paths=["/healthz"], skip_status=[503], min_duration=0.5)
    records = [
        make_record(path=b"/healthz", status=503, duration=1.0),
        make_record(path=b"/healthz", status=500, duration=0.1),
        make_record(path=b"/healthz", status=500, duration=1.0),
        make_record(path=b"/healthz", status=200, duration=1.0),
    ]
    assert kept(selection, records) == records[2:3]


def test_sampling_keeps_a_skipped_paths_errors() -> None:
    """sample never drops an error, a skipped path's included."""
    selection = select(skip_paths=["/healthz"], sample=0.0)
    records = [make_record(path=b"/healthz", status=503), make_record(path=b"/a", status=200)]
    assert kept(selection, records) == records[:1]


@pytest.mark.parametrize(
    ("entries", "skipped_statuses"),
    [
        ([304], {304}),
        (304, {304}),
        ([range(100, 200)], {101}),
        ([304, range(500, 600)], {304, 500, 503}),
        (range(200, 300, 4), {200, 204}),
    ],
)
def test_skip_status_takes_codes_and_ranges(entries: Any, skipped_statuses: set[int]) -> None:
    """Codes and ranges of codes are skipped; every other status is logged."""
    statuses = [101, 200, 204, 206, 304, 404, 500, 503]
    records = [make_record(status=status) for status in statuses]
    logged = [record.status for record in kept(select(skip_status=entries), records)]
    assert logged == [status for status in statuses if status not in skipped_statuses]


def test_min_duration_keeps_only_slow_requests_errors_included() -> None:
    """Faster than ``min_duration`` is skipped whatever the status; as slow or slower is kept."""
    records = [
        make_record(duration=0.1, status=200),
        make_record(duration=0.1, status=500),
        make_record(duration=0.5, status=200),
        make_record(duration=2.0, status=503),
    ]
    assert kept(select(min_duration=0.5), records) == records[2:]


def test_sample_zero_keeps_every_error_and_no_success() -> None:
    """``sample=0`` keeps the responses with status >= 400 only."""
    records = [make_record(status=status) for status in (200, 301, 399, 400, 404, 500)]
    assert [record.status for record in kept(select(sample=0.0), records)] == [400, 404, 500]


def test_sample_keeps_about_that_fraction_of_successes_and_all_errors() -> None:
    """Half of 4000 successes are kept (within 10 standard deviations), and all 100 errors."""
    records = [make_record(status=200)] * 4000 + [make_record(status=502)] * 100
    statuses = [record.status for record in kept(select(sample=0.5), records)]
    assert statuses.count(502) == 100
    # Binomial(4000, 0.5): standard deviation about 32.
    assert 1680 < statuses.count(200) < 2320


def test_reseed_draws_other_numbers() -> None:
    """A forked writer's reseed makes its sample independent of the one it was copied from."""
    records = [make_record(path=b"/%d" % i) for i in range(200)]
    selection = select(sample=0.5)
    selection._random.seed(1)
    first = kept(selection, records)
    selection._random.seed(1)
    assert kept(selection, records) == first
    selection._random.seed(1)
    selection.reseed()
    # The same 200 draws again would happen with probability 2**-200.
    assert kept(selection, records) != first


def test_keep_gets_named_fields_and_false_skips() -> None:
    """The predicate sees a Record (fields by name) and returns whether to log it."""
    seen: list[Record] = []

    def keep(record: Record) -> bool:
        seen.append(record)
        return record.method != "OPTIONS"

    records = [make_record(method="GET"), make_record(method="OPTIONS")]
    plain = [tuple(record) for record in records]
    assert kept(select(keep=keep), plain) == [plain[0]]  # type: ignore[arg-type]
    assert all(isinstance(record, Record) for record in seen)
    assert seen == records


def test_keep_sees_the_record_as_it_will_be_logged() -> None:
    """The predicate runs after the rewrites: forwarded client, redacted query."""
    seen: list[tuple[str | None, bytes]] = []
    selection = make_select(
        keep=lambda record: seen.append((record.client, record.query)) or True,
        trusted_proxies=["127.0.0.1"],
    )
    assert selection is not None
    headers = [(b"x-forwarded-for", b"198.51.100.7")]
    kept(selection, [make_record(query=b"token=abc", request_headers=headers)])
    assert seen == [("198.51.100.7", b"token=[redacted]")]


def test_a_raising_keep_logs_the_record_and_reports_once_per_batch() -> None:
    """A predicate that raises keeps its records, and the batch's report counts them."""

    def keep(record: Record) -> bool:
        if record.status == 500:
            raise RuntimeError("predicate bug")
        return False

    records = [make_record(status=500), make_record(status=200), make_record(status=500)]
    reports: list[str] = []
    assert select(keep=keep)(records, reports.append) == [records[0], records[2]]
    assert reports == [
        "the keep predicate raised for 2 record(s), which were logged: "
        "RuntimeError('predicate bug')"
    ]


def test_filters_apply_together() -> None:
    """A record is logged only when no filter skips it."""
    selection = select(skip_paths=["/healthz"], skip_status=[404], min_duration=0.01)
    records = [
        make_record(path=b"/healthz", duration=1.0),
        make_record(status=404, duration=1.0),
        make_record(duration=0.001),
        make_record(duration=1.0),
    ]
    assert kept(selection, records) == records[3:]


@pytest.mark.parametrize(
    "options",
    [
        {"redact_query": ()},
        {"redact_query": (), "trusted_proxies": (), "skip_paths": [], "sample": 1},
        {"redact_query": (), "proxy_header": "forwarded"},
        {"redact_query": (), "min_duration": 0, "keep": None, "skip_status": []},
    ],
)
def test_nothing_asked_means_no_selection_step(options: dict[str, Any]) -> None:
    """Without a filter or rewrite there is no step at all for the writer to run."""
    assert make_select(**options) is None


def test_query_redaction_is_on_by_default() -> None:
    """The default options redact query credentials, so the step exists."""
    assert make_select() is not None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"skip_paths": ["healthz"]}, "skip_paths entry 'healthz' is not a path"),
        ({"skip_paths": ["/static/*.css"]}, "prefix ending in '*'"),
        ({"skip_paths": [3]}, "skip_paths entry 3 is not a path"),
        ({"skip_paths": 3.5}, "skip_paths must be a list, not 3.5"),
        ({"skip_status": [99]}, "skip_status entry 99 is not a status code"),
        ({"skip_status": ["404"]}, "skip_status entry '404' is not a status code"),
        ({"skip_status": [True]}, "skip_status entry True"),
        ({"skip_status": [range(500, 1001)]}, "range(500, 1001)"),
        ({"skip_status": [range(0)]}, "range(0, 0)"),
        ({"min_duration": -1}, "min_duration must be a number of seconds >= 0, not -1"),
        ({"min_duration": "1s"}, "min_duration must be a number of seconds"),
        ({"min_duration": float("inf")}, "min_duration must be"),
        ({"sample": 1.5}, "sample must be a fraction from 0 to 1, not 1.5"),
        ({"sample": float("nan")}, "sample must be a fraction"),
        ({"sample": True}, "sample must be a fraction"),
        ({"keep": "yes"}, "keep must be a function taking a Record"),
        ({"skip_path_errors": "no"}, "skip_path_errors must be True or False, not 'no'"),
        ({"redact_query": ["to&ken"]}, "redact_query entry 'to&ken'"),
        ({"trusted_proxies": ["10.0.0.300"]}, "trusted_proxies entry '10.0.0.300'"),
        ({"proxy_header": "x-real-ip"}, "proxy_header 'x-real-ip' is not a forwarding header"),
    ],
)
def test_bad_options_say_what_is_wrong(options: dict[str, Any], message: str) -> None:
    """Each unusable option is a ConfigurationError naming the value and the fix."""
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        AccessLog("stdout", **options)


def test_filtered_records_are_counted_and_the_invariant_holds(tmp_path: Path) -> None:
    """A real log: skipped records are in ``filtered``, written ones in the file, exactly."""
    path = tmp_path / "access.log"
    log = AccessLog(
        str(path),
        flush_interval=3600,
        skip_paths=["/healthz", "/static/*"],
        skip_status=[304],
        keep=lambda record: record.method != "OPTIONS",
    )
    records = [
        make_record(path=b"/healthz"),
        make_record(path=b"/static/a.js"),
        make_record(status=304),
        make_record(method="OPTIONS"),
        make_record(path=b"/page"),
        make_record(path=b"/healthz", status=503),
    ] * 300
    for record in records:
        assert log.submit(record)
    stats = log.close()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 600
    assert lines[0::2] == [lines[0]] * 300
    assert b'"GET /page HTTP/1.1" 200' in lines[0]
    assert lines[1::2] == [lines[1]] * 300
    assert b'"GET /healthz HTTP/1.1" 503' in lines[1]
    assert stats == Stats(
        submitted=1800,
        written=600,
        dropped=0,
        filtered=1200,
        failed=0,
        write_errors=0,
        bytes_written=path.stat().st_size,
        batches=stats.batches,
        queued=0,
        queue_peak=stats.queue_peak,
    )
    assert stats.submitted == stats.written + stats.dropped + stats.filtered + stats.failed


def test_flush_returns_when_a_whole_batch_was_filtered(tmp_path: Path) -> None:
    """flush() counts skipped records as dealt with, so it returns True at once."""
    path = tmp_path / "access.log"
    with AccessLog(str(path), flush_interval=3600, skip_paths=["/healthz"]) as log:
        for _ in range(10):
            log.submit(make_record(path=b"/healthz"))
        assert log.flush(timeout=10)
        assert log.stats().filtered == 10
        assert log.stats().batches == 0
    assert path.read_bytes() == b""


class ExplodingHeaders:
    """A header container whose iteration fails, as a buggy server's might."""

    def __iter__(self) -> Any:
        raise RuntimeError("headers are gone")


def test_a_record_the_rewrites_cannot_handle_is_logged_as_it_came(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """One bad record costs neither the batch's other rewrites nor its own line."""
    path = tmp_path / "access.log"
    forwarded = [(b"x-forwarded-for", b"198.51.100.7")]
    # The common format reads no header, so the bad record can still be formatted.
    with AccessLog(str(path), "common", flush_interval=3600, trusted_proxies=["127.0.0.1"]) as log:
        log.submit(make_record(path=b"/a", request_headers=forwarded, query=b"token=t"))
        log.submit(make_record(path=b"/b", request_headers=ExplodingHeaders()))
        log.submit(make_record(path=b"/c", request_headers=forwarded))
    stats = log.stats()
    lines = path.read_bytes().splitlines()
    assert [line.split(b" ")[0] for line in lines] == [
        b"198.51.100.7",
        b"127.0.0.1",
        b"198.51.100.7",
    ]
    assert b"/a?token=[redacted]" in lines[0]
    assert (stats.written, stats.filtered, stats.failed) == (3, 0, 0)
    assert "cannot filter or rewrite 1 record(s), logged as they came" in capfd.readouterr().err


def test_keep_runs_on_the_writer_thread(tmp_path: Path) -> None:
    """The predicate never runs on the thread that submits."""
    threads: set[str] = set()

    def keep(record: Record) -> bool:
        threads.add(threading.current_thread().name)
        return True

    with AccessLog(str(tmp_path / "access.log"), keep=keep) as log:
        log.submit(make_record())
    assert threads == {"boundlog-writer"}
