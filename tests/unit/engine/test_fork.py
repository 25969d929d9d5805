"""A log made before fork keeps working in the child, and nothing is written twice."""

from __future__ import annotations

import os
from pathlib import Path

from _helpers import BlockedPipe, wait_until
from _records import make_record
from boundlog import AccessLog


def _run_child(path: Path, log: AccessLog) -> int:
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            for i in range(3):
                log.submit(make_record(path=b"/child/%d" % i))
            stats = log.close(timeout=10)
            code = 0 if (stats.submitted, stats.written) == (3, 3) else 2
        finally:
            os._exit(code)
    return child


def test_records_queued_at_fork_are_written_once_by_the_parent(tmp_path: Path) -> None:
    """Records waiting at fork stay the parent's; the child writes only its own."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path), flush_interval=3600)
    for i in range(5):
        log.submit(make_record(path=b"/parent/%d" % i))
    child = _run_child(path, log)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    stats = log.close()
    assert (stats.submitted, stats.written) == (5, 5)
    paths = sorted(line.split(b" ")[6] for line in path.read_bytes().splitlines())
    assert paths == [b"/child/%d" % i for i in range(3)] + [b"/parent/%d" % i for i in range(5)]


def test_fork_while_the_writer_is_blocked_in_a_write(
    tmp_path: Path, blocked_pipe: BlockedPipe
) -> None:
    """A fork while the parent's writer holds a batch in a blocked write does not deadlock."""
    log = AccessLog(blocked_pipe.write_fd, flush_interval=0)
    log.submit(make_record(path=b"/in-flight"))
    wait_until(lambda: log.stats().queued == 0 and log.stats().submitted == 1)
    child_log_path = tmp_path / "child.log"
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            # The inherited log writes to the same blocked pipe; a fresh one proves the
            # library's locks are usable in the child.
            with AccessLog(str(child_log_path)) as fresh:
                fresh.submit(make_record())
            log.submit(make_record(path=b"/child"))
            code = 0 if log.stats().submitted == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(child_log_path.read_bytes().splitlines()) == 1
    blocked_pipe.release()
    assert log.close().written == 1


def test_a_child_writes_to_the_file_at_the_path_if_its_inherited_one_was_moved(
    tmp_path: Path,
) -> None:
    """A file moved between the parent's open and the child's first batch (a reopen
    signal the child missed while it started): the child writes at the path, the
    parent, asked nothing, to the file it has."""
    path, rotated = tmp_path / "access.log", tmp_path / "access.log.1"
    log = AccessLog(str(path), flush_interval=0)
    log.submit(make_record(path=b"/parent/0"))
    log.flush()
    path.rename(rotated)
    child = _run_child(path, log)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    log.submit(make_record(path=b"/parent/1"))
    assert log.close().written == 2
    assert [line.split(b" ")[6] for line in path.read_bytes().splitlines()] == [
        b"/child/%d" % i for i in range(3)
    ]
    assert [line.split(b" ")[6] for line in rotated.read_bytes().splitlines()] == [
        b"/parent/0", b"/parent/1"
    ]  # fmt: skip
