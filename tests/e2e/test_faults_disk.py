"""Disk full, for real: a log on a full tmpfs or on /dev/full behind a running server.

The server answers every request whatever the disk does; failed writes are counted and
reported on stderr at most once per reporting period; a line cut short by a full disk
is terminated before the next record; and writing resumes by itself once space is
freed.  Mounting a tmpfs needs root; the test skips, saying so, without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _records import make_record
from _servers import (
    Load,
    fault_environment,
    final_stats,
    gunicorn_fault_command,
    loss_reports,
    parse_combined_line,
    poll_until,
    running_server,
    uvicorn_fault_command,
    wait_settled,
)
from boundlog import AccessLog

DISK_SIZE = 64 * 1024
# Deleted once the disk is full, to free this much space for the log again.
FILLER_SIZE = 16 * 1024
# boundlog's writer reports a sink error at most once per this many seconds.
REPORT_EVERY = 5.0
RECORD_START = b"127.0.0.1 - - ["


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted for this test only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=True)


def _reports_allowed(elapsed: float) -> int:
    """The most periodic loss reports the rate limit lets through in ``elapsed`` seconds."""
    return 1 + int(elapsed // REPORT_EVERY)


def test_full_tmpfs_costs_no_request_and_logging_resumes_when_space_is_freed(
    tmp_path: Path, small_disk: Path
) -> None:
    """A full disk fails writes, not requests; freeing space brings the log back, line-safe."""
    filler = small_disk / "filler"
    filler.write_bytes(b"f" * FILLER_SIZE)
    log_path = small_disk / "access.log"
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    environment = fault_environment({"sink": str(log_path)}, stats_dir)
    started = time.monotonic()
    with running_server(uvicorn_fault_command, environment, tmp_path / "out") as server:
        # About 84 bytes a line: 1000 lines need more than the 48 KiB left.
        with Load(server.port, clients=4, requests=250) as filling:
            filling.join()
        when_full = wait_settled(server.port, submitted=1000)
        assert when_full["write_errors"] >= 1, when_full
        assert when_full["failed"] >= 1, when_full
        filler.unlink()
        with Load(server.port, clients=2, requests=20, first_client=10) as after:
            after.join()
        recovered = wait_settled(server.port, submitted=1040)
        server.stop()
    elapsed = time.monotonic() - started
    assert (filling.total, after.total) == (1000, 40), "every request must be answered"
    assert recovered["written"] - when_full["written"] == 40, (when_full, recovered)
    assert recovered["failed"] == when_full["failed"], (when_full, recovered)
    (final,) = final_stats(stats_dir).values()
    assert final["submitted"] == final["written"] + final["failed"] == 1040, final

    data = log_path.read_bytes()
    assert data.endswith(b"\n"), data[-200:]
    logged = set()
    fragments = []
    for line in data.split(b"\n")[:-1]:
        assert line.count(RECORD_START) <= 1, f"two records share a line: {line!r}"
        try:
            fields, _ = parse_combined_line(line)
        except AssertionError:
            fragments.append(line)
            continue
        assert fields.target not in logged, f"logged twice: {line!r}"
        logged.add(fields.target)
    # A fragment is the start of a line cut short by the full disk, never the middle;
    # the disk may fill before even the line's first field is whole.
    assert all(
        fragment.startswith(RECORD_START) or RECORD_START.startswith(fragment)
        for fragment in fragments
    ), fragments
    assert len(fragments) <= final["write_errors"], fragments
    assert len(logged) == final["written"], (len(logged), final)
    assert {b"/load/%d/%d" % (client, n) for client in (10, 11) for n in range(20)} <= logged

    reports = loss_reports(server.output())
    cause = f"cannot write to {log_path}: No space left on device"
    assert len(reports.periodic) <= _reports_allowed(elapsed), reports
    assert all(report[2] == cause for report in reports.periodic), reports
    assert sum(report[1] for report in reports.periodic) <= final["failed"], reports
    # The final line, at the worker's exit, names the last failure: the one seen last.
    assert reports.final == [(0, final["failed"], reports.final[0][2])], reports
    assert not reports.others, reports
    assert "Traceback" not in server.output()


def test_dev_full_costs_no_request_and_warns_once_per_period(tmp_path: Path) -> None:
    """Every batch to /dev/full fails: all requests answered, all records counted, few warnings."""
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    # No batch window: every small batch is one more failed write to rate-limit.
    environment = fault_environment({"sink": "/dev/full", "flush_interval": 0}, stats_dir)
    command = gunicorn_fault_command("-k", "gthread", "--threads", "4", "-w", "1")
    started = time.monotonic()
    with running_server(command, environment, tmp_path / "out") as server:
        with Load(server.port, clients=4) as load:
            # The second report comes a reporting period after the first.
            poll_until(
                lambda: len(loss_reports(server.output()).periodic) >= 2,
                4 * REPORT_EVERY,
                "a second report",
            )
        assert not load.errors, load.errors[:5]
        wait_settled(server.port)
        assert server.stop() == 0, server.output()
    elapsed = time.monotonic() - started
    (final,) = final_stats(stats_dir).values()
    assert final["submitted"] == load.total, (final, load.total)
    assert (final["written"], final["failed"]) == (0, final["submitted"]), final

    reports = loss_reports(server.output())
    cause = "cannot write to /dev/full: No space left on device"
    assert 2 <= len(reports.periodic) <= _reports_allowed(elapsed), reports
    assert all(report == (0, report[1], cause) for report in reports.periodic), reports
    # Each line counts the records lost since the one before; the final line all of them.
    assert sum(report[1] for report in reports.periodic) <= final["failed"], reports
    assert reports.final == [(0, final["failed"], cause)], reports
    assert not reports.others, reports
    assert "Traceback" not in server.output()


def _log_with_a_line_cut_short(log_path: Path) -> AccessLog:
    """A log whose file on the small disk ends inside a line the disk cut short."""
    log = AccessLog(str(log_path), flush_interval=3600, batch_size=1000)
    # About 1.1 KiB a line: 100 lines are more than the disk holds.
    for number in range(100):
        assert log.submit(make_record(path=b"/%d" % number, user_agent=b"u" * 1000))
    assert log.flush(timeout=10)
    cut = log.stats()
    assert cut.write_errors == 1, cut
    assert cut.failed >= 1, cut
    assert not log_path.read_bytes().endswith(b"\n"), "the disk should cut a line short"
    return log


def _only_the_line_after(log: AccessLog, log_path: Path) -> None:
    """One more record, then the log closed: the file holds that line and nothing else."""
    assert log.submit(make_record(path=b"/after"))
    stats = log.close()
    assert stats.submitted == stats.written + stats.failed == 101, stats
    (line,) = log_path.read_bytes().split(b"\n")[:-1]
    assert line.startswith(RECORD_START), line[:100]
    assert line.split(b'"')[1] == b"GET /after HTTP/1.1"


def test_a_reopen_after_a_short_write_starts_the_new_file_with_a_whole_line(
    small_disk: Path,
) -> None:
    """A full disk cuts a batch mid-line; rotation moves that file away.  The newline
    that closes such a fragment belongs to the old file: the new one starts with a line."""
    log_path = small_disk / "access.log"
    log = _log_with_a_line_cut_short(log_path)
    rotated = small_disk / "access.log.1"
    log_path.rename(rotated)
    assert log.reopen(timeout=10)
    # The old descriptor is closed: deleting the rotated file frees its space.
    rotated.unlink()
    _only_the_line_after(log, log_path)


LOGROTATE = shutil.which("logrotate") or shutil.which("logrotate", path="/usr/sbin:/sbin")


@pytest.mark.skipif(LOGROTATE is None, reason="needs logrotate (Debian package logrotate)")
def test_copytruncate_after_a_short_write_leaves_no_empty_line(
    small_disk: Path, tmp_path: Path
) -> None:
    """A full disk cuts a batch mid-line; logrotate's copytruncate then copies the file
    away and empties it in place (same file, no reopen).  The newline that would close
    the fragment has nothing left to close: the emptied file starts with a whole line,
    not with an empty one."""
    assert LOGROTATE is not None
    log_path = small_disk / "access.log"
    log = _log_with_a_line_cut_short(log_path)
    # The copy goes to another file system (copytruncate allows an olddir elsewhere).
    old = tmp_path / "old"
    old.mkdir()
    config = tmp_path / "logrotate.conf"
    # su: the tmpfs is world-writable, and logrotate wants to be told whose it is.
    directives = ["copytruncate", f"olddir {old}", "rotate 1", "su root root"]
    body = "".join(f"    {directive}\n" for directive in directives)
    config.write_text(f"{log_path} {{\n{body}}}\n")
    rotated = subprocess.run(
        [LOGROTATE, "--force", "--state", str(tmp_path / "state"), str(config)],
        capture_output=True,
        text=True,
    )
    assert rotated.returncode == 0, rotated.stderr
    assert log_path.stat().st_size == 0
    _only_the_line_after(log, log_path)
