"""AccessLog: configuration errors, draining, closing, failures and the exit backstop."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from _helpers import BlockedPipe, run_in_threads
from _records import make_record
from _servers import loss_reports
from boundlog import AccessLog, ConfigurationError, JsonFormat, SinkError, Stats
from boundlog.engine._admission import Admission


def test_close_writes_every_accepted_record(tmp_path: Path) -> None:
    """close() drains the queue: N submitted records become N lines, in order, with
    exact stats, in writes of at most a batch each."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path), flush_interval=3600, batch_size=512)
    for i in range(1000):
        assert log.submit(make_record(path=b"/%d" % i))
    stats = log.close()
    lines = path.read_bytes().splitlines()
    assert [line.split(b'"')[1] for line in lines] == [b"GET /%d HTTP/1.1" % i for i in range(1000)]
    assert stats == Stats(
        submitted=1000,
        written=1000,
        dropped=0,
        filtered=0,
        failed=0,
        write_errors=0,
        bytes_written=path.stat().st_size,
        batches=stats.batches,
        queued=0,
        queue_peak=stats.queue_peak,
    )
    # How the 1000 records split into batches depends on when the writer thread runs;
    # what is promised is that no batch holds more than batch_size records.
    assert 2 <= stats.batches <= 1000


def test_close_is_idempotent_and_submit_after_close_is_counted_and_said(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A second close returns the same stats; a later record is dropped, not written,
    and the first such record is said on stderr (close()'s totals did not count it)."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path))
    log.submit(make_record())
    first = log.close()
    assert log.close() == first
    assert capfd.readouterr().err == ""
    assert log.submit(make_record()) is False
    assert log._offer(make_record()) is False
    assert log.submit(make_record()) is False
    after = log.stats()
    assert (after.submitted, after.written, after.dropped) == (3, 1, 2)
    assert len(path.read_bytes().splitlines()) == 1
    said = capfd.readouterr().err.splitlines()
    assert said == [
        f"boundlog: {path} is closed: a record that came after close() was dropped, and "
        "every later one is (counted in dropped); a request still running when the log "
        "closed (the server ended the application's lifespan before its requests, e.g. "
        "one running a background task), or code that submits after close()"
    ]


def test_a_record_after_close_is_not_said_without_loss_reports(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = AccessLog(str(tmp_path / "access.log"), report_loss=False)
    log.close()
    assert log.submit(make_record()) is False
    assert log.stats().dropped == 1
    assert capfd.readouterr().err == ""


def test_a_flush_that_counted_a_record_taken_back_ends_when_the_log_closes(
    tmp_path: Path,
) -> None:
    """A submitter that appends just as the log closes takes its record back (refused):
    a flush() racing that close counted it among the records to wait for, and waited
    its whole timeout for a record that never settles.  It ends with the writer."""
    log = AccessLog(str(tmp_path / "access.log"), flush_interval=3600)
    assert log.submit(make_record())
    # What flush() waits for, with one record appended then taken back.
    target = log._admission.hurry() + 1
    flushed: list[bool] = []
    waiting = threading.Thread(target=lambda: flushed.append(log._writer.wait_settled(target, 60)))
    waiting.start()
    stats = log.close()
    waiting.join()
    assert flushed == [True]
    assert stats.written == 1


def test_reopen_requests_from_many_threads_are_each_counted(tmp_path: Path) -> None:
    """Without the GIL, a plain increment of the count lost requests and could move it
    back below what a reopen() waited for, which then timed out on a healthy file."""
    log = AccessLog(str(tmp_path / "access.log"), flush_interval=3600)
    threads, each = 8, 5000
    start = threading.Barrier(threads)

    def request() -> None:
        start.wait()
        for _ in range(each):
            log.request_reopen()

    run_in_threads(*[request] * threads)
    assert log._writer.reopens_requested == threads * each
    assert log.reopen(timeout=60)
    log.close()


def test_stats_read_while_records_flow_never_settle_more_than_was_submitted(
    tmp_path: Path,
) -> None:
    """Read while the writer works (without the GIL, truly at once), the snapshot read
    the queue's counts before the writer's, and showed more written than submitted."""
    log = AccessLog(str(tmp_path / "access.log"), batch_size=16, policy="wait")
    submitters, each = 4, 5000
    done = threading.Event()
    bad: list[Stats] = []

    def submit() -> None:
        for _ in range(each):
            log.submit(make_record())

    def read() -> None:
        while not done.is_set():
            stats = log.stats()
            if stats.written + stats.failed + stats.filtered + stats.dropped + stats.queued > (
                stats.submitted
            ):
                bad.append(stats)

    def submit_then_stop_reading() -> None:
        run_in_threads(*[submit] * submitters)
        done.set()

    run_in_threads(read, submit_then_stop_reading)
    assert log.close().written == submitters * each
    assert bad == []


def test_context_manager_closes(tmp_path: Path) -> None:
    """Leaving a with-block closes the log, so every record is on disk afterwards."""
    path = tmp_path / "access.log"
    with AccessLog(str(path), flush_interval=3600) as log:
        log.submit(make_record())
    assert log.stats().written == 1
    assert len(path.read_bytes().splitlines()) == 1


def test_flush_writes_without_closing(tmp_path: Path) -> None:
    """flush() gets accepted records to the sink at once, and the log keeps accepting."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path), flush_interval=3600)
    for _ in range(3):
        log.submit(make_record())
    assert log.flush(timeout=10)
    assert len(path.read_bytes().splitlines()) == 3
    assert log.submit(make_record())
    assert log.close().written == 4


def test_write_failure_is_counted_and_reported(capfd: pytest.CaptureFixture[str]) -> None:
    """Writing to /dev/full fails every batch: counted as failed, reported, no exception."""
    log = AccessLog("/dev/full", flush_interval=0)
    for _ in range(5):
        log.submit(make_record())
        log.flush(timeout=10)
    stats = log.close()
    assert stats.submitted == stats.failed == 5
    assert stats.written == 0
    assert stats.write_errors == 5
    reports = loss_reports(capfd.readouterr().err)
    cause = "cannot write to /dev/full: No space left on device"
    assert reports.final == [(0, 5, cause)]
    assert all(report == (0, report[1], cause) for report in reports.periodic), reports
    assert not reports.others, reports


def test_close_timeout_counts_unwritten_records_as_failed(blocked_pipe: BlockedPipe) -> None:
    """A sink stuck past close_timeout cannot hang close(); what it held counts as failed."""
    log = AccessLog(blocked_pipe.write_fd, flush_interval=0, close_timeout=0.2)
    for _ in range(3):
        log.submit(make_record())
    stats = log.close()
    assert stats.submitted == 3
    assert stats.written + stats.failed == 3
    assert stats.failed >= 1
    blocked_pipe.release()


def test_close_giving_up_just_after_the_writer_took_a_batch_counts_it_as_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that has left the queue is in flight at once: a close() that gives up
    before the writer starts on it counts it as failed, never as nothing."""
    take = Admission.take
    closing: list[threading.Thread] = []
    started = threading.Event()

    def take_then_close(admission: Admission, *args: Any) -> Any:
        batch = take(admission, *args)
        if batch and not started.is_set():
            # close() in another thread, given up at once, while this batch is taken but
            # not yet handed on: it either runs to the end meanwhile or waits for the
            # writer to say the batch is in flight.
            closing[0].start()
            started.set()
            closing[0].join(0.5)
        return batch

    # Before the log exists, so that its writer's first take is this one.
    monkeypatch.setattr(Admission, "take", take_then_close)
    log = AccessLog(str(tmp_path / "access.log"), flush_interval=3600, close_timeout=0)
    closing.append(threading.Thread(target=log.close))
    for _ in range(5):
        log.submit(make_record())
    log.flush(timeout=0)
    assert started.wait(10)
    closing[0].join()
    stats = log.stats()
    assert stats.submitted == 5
    assert stats.written + stats.failed + stats.queued == 5, stats


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"format": "apache"},
            "unknown format 'apache': choose one of combined, common, dev, json",
        ),
        ({"policy": "block"}, "unknown policy 'block': choose one of drop, wait"),
        ({"max_queue": 0}, "max_queue must be a whole number >= 1, not 0"),
        ({"batch_size": 2.5}, "batch_size must be a whole number >= 1, not 2.5"),
        (
            {"flush_interval": -1},
            "flush_interval must be a number of seconds from 0 to 3600, not -1",
        ),
        ({"sink": 3.5}, "cannot log to 3.5: a sink is 'stdout'"),
        ({"sink": True}, "cannot log to True: a sink is 'stdout'"),
    ],
)
def test_bad_configuration_says_what_is_valid(options: dict[str, object], message: str) -> None:
    """Each invalid option raises ConfigurationError naming the value and the valid choices."""
    with pytest.raises(ConfigurationError) as raised:
        AccessLog(**options)  # type: ignore[arg-type]
    assert str(raised.value).startswith(message)


def test_unopenable_path_raises_sink_error_with_path_and_reason(tmp_path: Path) -> None:
    """A missing directory is reported at construction, with the path and the OS reason."""
    path = tmp_path / "missing" / "access.log"
    with pytest.raises(SinkError, match=f"cannot open {path}: No such file or directory"):
        AccessLog(str(path))


def test_a_directory_is_not_a_sink(tmp_path: Path) -> None:
    """Naming a directory as the sink fails at construction with the reason."""
    with pytest.raises(SinkError, match=f"cannot open {tmp_path}: Is a directory"):
        AccessLog(str(tmp_path))


def test_permission_denied_is_a_sink_error(tmp_path: Path) -> None:
    """A file the process may not write is reported at construction, with the reason."""
    path = tmp_path / "access.log"
    path.touch(mode=0o444)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        # Root may write anywhere, so the child drops to an unprivileged user first.
        try:
            if os.geteuid() == 0:
                os.setuid(65534)
            AccessLog(str(path))
            message = "no error"
        except SinkError as error:
            message = str(error)
        os.write(write_end, message.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        message = reader.read().decode()
    os.waitpid(child, 0)
    assert message == f"cannot open {path}: Permission denied"


def test_exit_without_close_drains_the_queue(tmp_path: Path) -> None:
    """A program that submits and returns without close() still writes every record."""
    path = tmp_path / "access.log"
    program = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from _records import make_record
        from boundlog import AccessLog
        log = AccessLog({str(path)!r}, flush_interval=3600)
        for _ in range(500):
            log.submit(make_record())
        """
    )
    subprocess.run([sys.executable, "-c", program], check=True, timeout=60)
    assert len(path.read_bytes().splitlines()) == 500


def test_exit_drains_a_log_that_waits_for_ever_beside_one_that_does_not(tmp_path: Path) -> None:
    """close_timeout=inf (no deadline) and a finite one share the exit backstop."""
    forever, bounded = tmp_path / "forever.log", tmp_path / "bounded.log"
    program = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from _records import make_record
        from boundlog import AccessLog
        logs = [AccessLog({str(forever)!r}, flush_interval=3600, close_timeout=float("inf")),
                AccessLog({str(bounded)!r}, flush_interval=3600, close_timeout=5)]
        for log in logs:
            for _ in range(100):
                log.submit(make_record())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], check=True, timeout=60, capture_output=True, text=True
    )
    assert done.stderr == ""
    assert len(forever.read_bytes().splitlines()) == 100
    assert len(bounded.read_bytes().splitlines()) == 100


@pytest.mark.parametrize("logs", [1, 20])
def test_exit_with_stuck_sinks_is_bounded_by_one_close_timeout(logs: int) -> None:
    """The exit backstop gives sinks that never drain close_timeout, then lets exit go;
    many such logs share one deadline (each waited close_timeout of its own before)."""
    close_timeout = 1.0
    program = textwrap.dedent(
        f"""
        import atexit, os, sys, time
        # Registered first, so it runs last: after boundlog's backstop.
        atexit.register(lambda: print(time.monotonic() - started[0]))
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from _records import make_record
        from boundlog import AccessLog
        # Registered last, so it runs first: just before the backstop.
        started = []
        atexit.register(lambda: started.append(time.monotonic()))
        held = []
        for _ in range({logs}):
            read_end, write_end = os.pipe()
            os.set_blocking(write_end, False)
            try:
                while True:
                    os.write(write_end, b"#" * 4096)
            except BlockingIOError:
                pass
            os.set_blocking(write_end, True)
            log = AccessLog(write_end, flush_interval=0, close_timeout={close_timeout})
            log.submit(make_record())
            held.append((read_end, log))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], check=True, timeout=120, capture_output=True, text=True
    )
    backstop = float(done.stdout)
    # One deadline takes one close_timeout and a little; one per log would take
    # logs * close_timeout.  The upper bound leaves room for a busy machine.
    assert close_timeout <= backstop < 5 * close_timeout, done.stdout


def test_exit_gives_each_stuck_log_its_own_close_timeout() -> None:
    """The exit backstop's one deadline is each log's own close_timeout from the same
    start: a log with a short one is not held to the longest."""
    program = textwrap.dedent(
        f"""
        import atexit, os, sys, threading, time
        atexit.register(lambda: print(time.monotonic() - started[0], slow.stats().written))
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from _records import make_record
        from boundlog import AccessLog
        started = []
        atexit.register(lambda: started.append(time.monotonic()))

        def full_pipe():
            read_end, write_end = os.pipe()
            os.set_blocking(write_end, False)
            try:
                while True:
                    os.write(write_end, b"#" * 4096)
            except BlockingIOError:
                pass
            os.set_blocking(write_end, True)
            return read_end, write_end

        def drain_later(read_end):
            time.sleep(1.5)
            while os.read(read_end, 65536):
                pass

        # Stuck for good, and allowed little time.
        stuck_read, stuck_write = full_pipe()
        stuck = AccessLog(stuck_write, flush_interval=0, close_timeout=0.2)
        stuck.submit(make_record())
        # Stuck until a reader comes at 1.5 s, and allowed 10 s.
        slow_read, slow_write = full_pipe()
        slow = AccessLog(slow_write, flush_interval=0, close_timeout=10)
        slow.submit(make_record())
        threading.Thread(target=drain_later, args=(slow_read,), daemon=True).start()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], check=True, timeout=120, capture_output=True, text=True
    )
    # The slow log drains at 1.5 s whichever log is closed first; held to the longest
    # close_timeout, the stuck one would keep the exit waiting 10 s.
    waited, slow_written = done.stdout.split()
    assert slow_written == "1", done.stdout
    assert float(waited) < 6, done.stdout


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"format": "common"}, set()),
        ({"format": "combined"}, {b"referer", b"user-agent"}),
        ({"format": "json"}, {b"referer", b"user-agent", b"x-request-id", b"traceparent"}),
        ({"format": "dev"}, set()),
        ({"format": '%h "%{X-Trace}i" %u'}, {b"x-trace", b"authorization"}),
        ({"format": "common", "trusted_proxies": ["10.0.0.0/8"]}, {b"x-forwarded-for"}),
        ({"format": "common", "keep": lambda record: True}, None),
    ],
    ids=["common", "combined", "json", "dev", "template", "trusted-proxies", "keep"],
)
def test_the_log_says_which_request_header_fields_it_reads(
    tmp_path: Path, options: dict[str, Any], names: set[bytes] | None
) -> None:
    """Integrations keep just these fields in a record; None means any may be read."""
    with AccessLog(str(tmp_path / "access.log"), **options) as log:
        assert log.request_header_names == (None if names is None else frozenset(names))


@pytest.mark.parametrize(
    ("log_format", "reads"),
    [
        ("combined", False),
        ("%h %{Content-Type}o", True),
        (JsonFormat(response_headers=["Content-Type"]), True),
        (JsonFormat(), False),
    ],
    ids=["combined", "template", "json-with-response-header", "json"],
)
def test_the_log_says_whether_it_reads_response_headers(
    tmp_path: Path, log_format: Any, reads: bool
) -> None:
    """Integrations hand over a response's header list only to a log that may read it."""
    with AccessLog(str(tmp_path / "access.log"), format=log_format) as log:
        assert log.reads_response_headers is reads
    with AccessLog(str(tmp_path / "keep.log"), keep=lambda record: True) as log:
        assert log.reads_response_headers
