"""Loss reports on stderr (src/boundlog/metrics/_health.py).

``LossReport`` is given the clock, so its rate limit and its "in the last N s" are
checked here without waiting for real seconds; the monitor thread is checked in real
processes: a log behind a pipe nobody reads, under overload, reports its drops while
its writer is stuck, and its final line's totals are those of ``stats()``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from _helpers import BlockedPipe, wait_until
from _records import make_record
from _servers import loss_reports
from boundlog import AccessLog, Stats
from boundlog.metrics._health import REPORT_EVERY, LossReport

SINK = "/var/log/app/access.log"


def _stats(*, dropped: int = 0, failed: int = 0, written: int = 0) -> Stats:
    return Stats(
        submitted=dropped + failed + written,
        written=written,
        dropped=dropped,
        filtered=0,
        failed=failed,
        write_errors=0,
        bytes_written=0,
        batches=0,
        queued=0,
        queue_peak=0,
    )


def _report(policy: str = "drop") -> LossReport:
    return LossReport(SINK, max_queue=10_000, policy=policy, now=100.0)


def _check(
    report: LossReport, now: float, *, stalled_for: float | None = None, **counts: int
) -> str | None:
    return report.check(_stats(**counts), now, stalled_for=stalled_for, last_failure=None)


def test_nothing_lost_nothing_said() -> None:
    report = _report()
    for second in range(1, 20):
        assert _check(report, 100.0 + second, written=second) is None
    assert report.final(_stats(written=19), last_failure=None) is None


def test_drops_are_reported_at_once_then_at_most_every_period() -> None:
    report = _report()
    # Quiet for 10 s, then 12,408 drops in the next second: said at once, over 1 s.
    assert _check(report, 110.0) is None
    assert _check(report, 111.0, dropped=12_408) == (
        "dropped 12,408 records in the last 1 s: the queue (max_queue=10,000, max_queue_bytes=20,971,520) is full "
        f"because {SINK} is slower than the requests"
    )
    # Still dropping: held back until a period has passed, then the sum since.
    for second in range(1, int(REPORT_EVERY)):
        assert _check(report, 111.0 + second, dropped=12_408 + second) is None
    assert _check(report, 116.0, stalled_for=7.4, dropped=12_500) == (
        "dropped 92 records in the last 5 s: the queue (max_queue=10,000, max_queue_bytes=20,971,520) is full "
        f"because {SINK} has not taken a write for 7 s"
    )


def test_when_the_loss_stops_so_do_the_lines() -> None:
    report = _report()
    assert _check(report, 101.0, dropped=5)
    # Two more drops, held back by the rate limit, are said once; then nothing more.
    assert _check(report, 102.0, dropped=7) is None
    assert _check(report, 106.0, dropped=7) == (
        "dropped 2 records in the last 5 s: the queue (max_queue=10,000, max_queue_bytes=20,971,520) is full "
        f"because {SINK} is slower than the requests"
    )
    for second in range(7, 60):
        assert _check(report, 100.0 + second, dropped=7) is None
    # A new loss after a quiet spell covers the time since the spell ended.
    assert _check(report, 160.0, dropped=8) == (
        "dropped 1 record in the last 1 s: the queue (max_queue=10,000, max_queue_bytes=20,971,520) is full "
        f"because {SINK} is slower than the requests"
    )


def test_failures_name_their_cause_and_share_the_line_with_drops() -> None:
    report = _report()
    cause = f"cannot write to {SINK}: No space left on device"
    line = report.check(_stats(dropped=3, failed=512), 103.0, stalled_for=None, last_failure=cause)
    assert line == (
        "dropped 3 records in the last 3 s: the queue (max_queue=10,000, max_queue_bytes=20,971,520) is full because "
        f"{SINK} is slower than the requests; lost 512 records in the last 3 s: {cause}"
    )


def test_under_wait_a_refusal_is_a_request_that_stopped_waiting() -> None:
    line = _check(_report("wait"), 101.0, dropped=2)
    assert line is not None
    assert line.startswith(
        "dropped 2 records in the last 1 s: requests stopped waiting for room in the queue "
        "(max_queue=10,000, max_queue_bytes=20,971,520) because"
    )


def test_the_final_line_has_the_totals_and_the_last_failure() -> None:
    report = _report()
    stats = _stats(dropped=12_408, failed=3, written=1_000_000)
    assert report.final(stats, last_failure="close() gave up waiting for X") == (
        f"{SINK} closed: 12,411 of 1,012,411 records not written (12,408 dropped, 3 failed); "
        "1,000,000 written, 0 filtered; the last failure: close() gave up waiting for X"
    )
    # Only drops: no failure to name.
    assert report.final(_stats(dropped=1), last_failure=None) == (
        f"{SINK} closed: 1 of 1 record not written (1 dropped, 0 failed); 0 written, 0 filtered"
    )


def test_a_forked_child_reports_its_own_counts() -> None:
    report = _report()
    assert _check(report, 101.0, dropped=50)
    child = report.restarted(200.0)
    # The child's log counts from zero: its first 10 drops are 10, not -40.
    assert _check(child, 201.0, dropped=10) == (
        "dropped 10 records in the last 1 s: the queue (max_queue=10,000, max_queue_bytes=20,971,520) is full "
        f"because {SINK} is slower than the requests"
    )


# -- the monitor, in real processes ------------------------------------------------------

_OVERLOADED = """
import json, os, sys, threading
sys.path.insert(0, {tests!r})
from _helpers import BlockedPipe, wait_until
from _records import make_record
from boundlog import AccessLog

pipe = BlockedPipe()  # nobody reads: the writer blocks in its first write
log = AccessLog(pipe.write_fd, max_queue=50, flush_interval=0, **{options})
stop = threading.Event()
lost = threading.Event()  # the queue has dropped records: the log is overloaded

def overload():
    while not stop.is_set():
        for _ in range(100):
            log.submit(make_record())
        if log.stats().dropped:
            lost.set()
        stop.wait(0.01)

overloader = threading.Thread(target=overload, daemon=True)
overloader.start()
lost.wait()  # the test's word may come first: it must not end the overload before it began
sys.stdin.readline()  # the test says when
stop.set()
# Submits end before the log closes (drop never blocks): a record after close() would
# be said on stderr, which this program is not about.
overloader.join()
{ending}
"""

_CLOSE = """
stats = log.close(timeout=0.5)
print(json.dumps(stats._asdict()), flush=True)
pipe.release()
"""


def _overloaded(
    tmp_path: Path, *, options: str = "", ending: str = _CLOSE
) -> subprocess.Popen[str]:
    program = _OVERLOADED.format(
        tests=str(Path(__file__).parents[2]), options=options or "{}", ending=ending
    )
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(program)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_stalled_sink_under_overload_reports_its_drops_and_the_final_totals(
    tmp_path: Path,
) -> None:
    seen = []
    with _overloaded(tmp_path) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        # Two periodic lines: the first at once, the second a period later.
        while len(loss_reports("".join(seen)).periodic) < 2:
            line = process.stderr.readline()
            assert line, "".join(seen)
            seen.append(line)
        process.stdin.write("close\n")
        process.stdin.flush()
        stats = json.loads(process.stdout.readline())
        seen.append(process.stderr.read())
    output = "".join(seen)
    reports = loss_reports(output)
    assert not reports.others, output
    assert all(dropped > 0 for dropped, _, _ in reports.periodic), output
    assert all(failed == 0 for _, failed, _ in reports.periodic), output
    # The writer is stuck in its first write: the second line says so.
    assert "has not taken a write for" in output.splitlines()[1], output
    assert sum(dropped for dropped, _, _ in reports.periodic) <= stats["dropped"]
    assert stats["dropped"] > 0
    assert stats["failed"] > 0
    assert reports.final == [(stats["dropped"], stats["failed"], reports.final[0][2])], output
    assert reports.final[0][2].startswith("close() gave up waiting for "), output


def test_the_exit_writes_the_final_line_of_a_log_never_closed(tmp_path: Path) -> None:
    # Left open: the exit's backstop closes it, and so reports it.
    with _overloaded(tmp_path, options="{'close_timeout': 0.5}", ending="") as process:
        _, err = process.communicate("exit\n", timeout=60)
    reports = loss_reports(err)
    assert len(reports.final) == 1, err
    assert reports.final[0][0] > 0, err


def test_report_loss_false_says_nothing(tmp_path: Path) -> None:
    with _overloaded(tmp_path, options="{'report_loss': False}") as process:
        out, err = process.communicate("close\n", timeout=60)
    stats = json.loads(out)
    assert stats["dropped"] > 0
    assert err == ""


def test_what_a_log_lost_is_reported_at_close(capfd: pytest.CaptureFixture[str]) -> None:
    pipe = BlockedPipe()
    try:
        log = AccessLog(pipe.write_fd, max_queue=1, flush_interval=0, close_timeout=0.2)
        for _ in range(10):
            log.submit(make_record())
        stats = log.close()
    finally:
        pipe.release()
        pipe.close()
    reports = loss_reports(capfd.readouterr().err)
    assert reports.final == [(stats.dropped, stats.failed, reports.final[0][2])]


def test_a_log_that_lost_nothing_says_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    logs = [AccessLog(str(tmp_path / f"{n}.log"), metrics=False) for n in range(3)]
    closers = [threading.Thread(target=log.close) for log in logs]
    for log in logs:
        log.submit(make_record())
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join()
    assert capfd.readouterr().err == ""
    assert all(os.path.getsize(tmp_path / f"{n}.log") for n in range(3))


def test_a_stalled_stderr_holds_up_neither_close_nor_the_exit(tmp_path: Path) -> None:
    """stderr is a pipe nobody reads: the reports are given up, close() and exit return."""
    program = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from _helpers import BlockedPipe, wait_until
        from _records import make_record
        from boundlog import AccessLog

        os.dup2(BlockedPipe().write_fd, 2)  # full, and nobody reads it
        sink = BlockedPipe()
        closed = AccessLog(sink.write_fd, max_queue=1, flush_interval=0, close_timeout=0.2)
        left_open = AccessLog(sink.write_fd, max_queue=1, flush_interval=0, close_timeout=0.2)
        for log in (closed, left_open):
            for _ in range(10):
                log.submit(make_record())
        print(closed.close().dropped, flush=True)
        # left_open is closed at exit, with its final line given up too.
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0
    assert done.stderr == ""


def test_drops_while_a_fifo_has_no_reader_name_it_even_once_the_reader_came() -> None:
    report = _report()
    waiting = f"nobody reads the FIFO {SINK}: start its reader"
    stats = _stats(dropped=40)
    assert report.check(stats, 101.0, stalled_for=None, last_failure=None, unavailable=waiting) == (
        "dropped 40 records in the last 1 s: the queue (max_queue=10,000, "
        f"max_queue_bytes=20,971,520) is full because {waiting}"
    )
    # More drops while it waits; the reader comes before the period is over.
    assert report.check(_stats(dropped=60), 103.0, stalled_for=None, last_failure=None,
                        unavailable=waiting) is None  # fmt: skip
    line = _check(report, 106.0, dropped=60)
    assert line is not None
    assert line.endswith(f"because {waiting}")
    # Drops after that are the sink's speed again.
    assert _check(report, 112.0, dropped=70) == (
        "dropped 10 records in the last 6 s: the queue (max_queue=10,000, "
        f"max_queue_bytes=20,971,520) is full because {SINK} is slower than the requests"
    )


def test_requests_held_back_by_a_stalled_sink_are_said_under_wait() -> None:
    """Under wait nothing is lost, so no loss line: requests held back by a sink that
    takes nothing are said instead, at most once a period."""
    report = _report("wait")

    def check(now: float, stalled_for: float | None, held_back: int) -> str | None:
        return report.check(
            _stats(written=1), now, stalled_for=stalled_for, last_failure=None, held_back=held_back
        )

    assert check(101.0, stalled_for=1.0, held_back=3) is None  # not stalled long enough
    assert check(102.0, stalled_for=10.0, held_back=0) is None  # nobody waits
    assert check(102.5, stalled_for=None, held_back=3) is None  # no write under way
    assert check(103.0, stalled_for=4.0, held_back=3) == (
        f"3 request(s) wait for room in the queue (policy='wait'): {SINK} has not taken "
        "a write for 4 s"
    )
    assert check(104.0, stalled_for=5.0, held_back=3) is None
    assert check(103.0 + REPORT_EVERY, stalled_for=9.0, held_back=5) is not None


def test_a_request_held_back_by_a_stalled_pipe_is_said_on_stderr(
    blocked_pipe: BlockedPipe, capfd: pytest.CaptureFixture[str]
) -> None:
    """A real log under wait, its writer stuck in a write, a request waiting for room:
    the monitor says why the request hangs."""
    log = AccessLog(blocked_pipe.write_fd, policy="wait", max_queue=1, flush_interval=0)
    log.submit(make_record(path=b"/in-flight"))
    # Taken alone, and stuck writing: the next one fills the queue.
    wait_until(lambda: log.stats().queued == 0)
    log.submit(make_record(path=b"/queued"))
    waiter = threading.Thread(target=log.submit, args=(make_record(path=b"/held"),))
    waiter.start()
    said = ""
    while "wait for room in the queue (policy='wait')" not in said:
        said += capfd.readouterr().err
        assert waiter.is_alive(), said
        waiter.join(0.1)
    blocked_pipe.release()
    waiter.join(30)
    assert log.close().written == 3
    assert "1 request(s) wait for room" in said
    assert f"file descriptor {blocked_pipe.write_fd} has not taken a write for" in said
