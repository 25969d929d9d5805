"""Reopening a file sink: on request, on a signal, and when the file is moved away."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from _helpers import wait_until
from _records import make_record
from boundlog import AccessLog, ConfigurationError


def _paths(path: Path) -> list[bytes]:
    return [line.split(b" ")[6] for line in path.read_bytes().splitlines()]


def test_reopen_after_rename_switches_files_between_batches(tmp_path: Path) -> None:
    """Records before reopen() stay in the rotated file; every later one is in the new file."""
    path = tmp_path / "access.log"
    rotated = tmp_path / "access.log.1"
    log = AccessLog(str(path), flush_interval=3600)
    log.submit(make_record(path=b"/before"))
    assert log.flush(timeout=10)
    path.rename(rotated)
    log.submit(make_record(path=b"/queued"))
    assert log.reopen(timeout=10)
    log.submit(make_record(path=b"/after"))
    stats = log.close()
    assert stats.written == 3
    assert _paths(rotated) == [b"/before"]
    assert _paths(path) == [b"/queued", b"/after"]


def test_a_failed_reopen_keeps_the_old_file_and_counts(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """If the path cannot be opened again, writing goes on to the old descriptor."""
    directory = tmp_path / "logs"
    directory.mkdir()
    path = directory / "access.log"
    log = AccessLog(str(path))
    moved = tmp_path / "moved"
    directory.rename(moved)  # the path's directory is gone: reopening fails
    assert log.reopen(timeout=10)
    log.submit(make_record())
    stats = log.close()
    assert (stats.written, stats.write_errors) == (1, 1)
    assert len((moved / "access.log").read_bytes().splitlines()) == 1
    assert f"cannot reopen {path}, still writing to the old file" in capfd.readouterr().err


def test_reopen_signal_reopens_without_blocking_the_handler(tmp_path: Path) -> None:
    """SIGUSR1 asks the writer to reopen; records after that land in the new file."""
    path = tmp_path / "access.log"
    previous = signal.getsignal(signal.SIGUSR1)
    try:
        log = AccessLog(str(path), reopen_signal=signal.SIGUSR1, flush_interval=0)
        log.submit(make_record(path=b"/before"))
        assert log.flush(timeout=10)
        path.rename(tmp_path / "access.log.1")
        os.kill(os.getpid(), signal.SIGUSR1)
        wait_until(lambda: path.exists())
        log.submit(make_record(path=b"/after"))
        log.close()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert _paths(path) == [b"/after"]


def test_watch_notices_a_moved_file(tmp_path: Path) -> None:
    """With watch=True, a renamed file is replaced by a new one without any signal."""
    path = tmp_path / "access.log"
    with AccessLog(str(path), watch=True, flush_interval=0) as log:
        log.submit(make_record(path=b"/before"))
        assert log.flush(timeout=10)
        path.rename(tmp_path / "access.log.1")

        def reopened() -> bool:
            log.submit(make_record(path=b"/probe"))
            log.flush(timeout=10)
            return path.exists()

        wait_until(reopened, timeout=30)
    assert set(_paths(path)) == {b"/probe"}


def test_reopen_signal_outside_the_main_thread_is_a_configuration_error(tmp_path: Path) -> None:
    """Signal handlers can only be installed by the main thread: the error says what to do."""
    import threading

    errors: list[Exception] = []

    def build() -> None:
        try:
            AccessLog(str(tmp_path / "a.log"), reopen_signal=signal.SIGUSR2)
        except ConfigurationError as error:
            errors.append(error)

    thread = threading.Thread(target=build)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert "call log.reopen() yourself" in str(errors[0])
