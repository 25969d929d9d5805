"""A FIFO sink that nobody reads yet: the server starts and answers, the log says so once.

Opening a FIFO for writing blocks until a reader opens it; a log that did so at startup
hung the server before it answered anything ("Waiting for application startup"), without
a word.  Now the open fails at once (O_NONBLOCK, ENXIO), the writer thread tries again
until a reader comes, and records wait in the queue meanwhile: the policy decides, and
every record is counted.
"""

from __future__ import annotations

import os
import select
import threading
from pathlib import Path

import httpx
import pytest

from _helpers import wait_until
from _records import make_record
from _servers import (
    CLIENT_TIMEOUT,
    UVICORN_CLEAN_EXITS,
    fault_environment,
    fault_stats,
    gunicorn_app_command,
    poll_until,
    running_server,
    uvicorn_fault_command,
    wait_settled,
)
from boundlog import AccessLog

MAX_QUEUE = 5
BEFORE = 12
AFTER = 10
TIMEOUT = 20.0


class FifoReader:
    """The read end of a FIFO, opened without waiting for a writer, read as lines."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._data = b""

    def lines(self) -> list[bytes]:
        while select.select([self.fd], [], [], 0)[0]:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            self._data += chunk
        # Whole lines only: a line still on its way is not parsed half.
        return self._data.split(b"\n")[:-1]

    def close(self) -> None:
        os.close(self.fd)


def _paths(lines: list[bytes]) -> list[str]:
    return [line.split(b'"GET ')[1].split(b" ")[0].decode() for line in lines]


@pytest.mark.parametrize(
    "core", [{}, {"BOUNDLOG_NO_EXTENSIONS": "1"}], ids=["default-core", "pure-python-core"]
)
def test_uvicorn_starts_and_answers_with_a_fifo_nobody_reads(
    tmp_path: Path, core: dict[str, str]
) -> None:
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)
    options = {"sink": str(fifo), "max_queue": MAX_QUEUE, "policy": "drop"}
    environment = {**fault_environment(options, tmp_path / "stats"), **core}
    (tmp_path / "stats").mkdir()
    # running_server waits until the server accepts: startup did not hang in open().
    with (
        running_server(uvicorn_fault_command, environment, tmp_path / "server.out") as server,
        httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client,
    ):
        for number in range(BEFORE):
            assert client.get(f"/before-{number}").status_code == 200
        # The queue holds MAX_QUEUE records for the reader to come; the rest are
        # dropped, and counted.
        stats = wait_queued(server.port, BEFORE)
        assert (stats["queued"], stats["dropped"]) == (MAX_QUEUE, BEFORE - MAX_QUEUE), stats
        poll_until(
            lambda: "because nobody reads the FIFO" in server.output(),
            TIMEOUT,
            "the loss report names the FIFO nobody reads as the cause",
        )
        told = [
            line
            for line in server.output().splitlines()
            if line.startswith(f"boundlog: nobody reads the FIFO {fifo}:")
        ]
        assert len(told) == 1, server.output()
        assert f"cat {fifo}" in told[0]

        reader = FifoReader(fifo)
        try:
            waiting = [f"/before-{n}" for n in range(MAX_QUEUE)]
            # The writer finds the reader within a fraction of a second, and writes
            # what waited first.
            poll_until(
                lambda: _paths(reader.lines()) == waiting,
                TIMEOUT,
                "the records that waited in the queue reach the reader",
            )
            # One at a time: a burst could find the small queue full again.
            for number in range(AFTER):
                assert client.get(f"/after-{number}").status_code == 200
                expected = waiting + [f"/after-{n}" for n in range(number + 1)]
                poll_until(
                    lambda: _paths(reader.lines()) == expected,  # noqa: B023
                    TIMEOUT,
                    f"the line of /after-{number} reaches the reader",
                )
            stats = wait_settled(server.port, BEFORE + AFTER)
            assert stats["written"] == MAX_QUEUE + AFTER, stats
            assert stats["dropped"] == BEFORE - MAX_QUEUE, stats
            assert stats["failed"] == 0, stats
            # Its final line reports the drops: no stop_gracefully here.
            assert server.stop() in UVICORN_CLEAN_EXITS, server.output()
        finally:
            reader.close()


def wait_queued(port: int, submitted: int) -> dict[str, int]:
    latest: dict[str, int] = {}

    def check() -> bool:
        latest.update(fault_stats(port)["stats"])
        return (
            latest["submitted"] >= submitted and latest["queued"] + latest["dropped"] == submitted
        )

    poll_until(check, TIMEOUT, f"{submitted} records queued or dropped: {latest}")
    return latest


def test_a_log_closed_before_any_reader_came_counts_its_records_failed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)
    log = AccessLog(str(fifo), close_timeout=0.2)
    for _ in range(3):
        assert log.submit(make_record())
    stats = log.close()
    assert (stats.submitted, stats.written, stats.failed) == (3, 0, 3), stats
    err = capfd.readouterr().err
    assert err.count(f"boundlog: nobody reads the FIFO {fifo}:") == 1, err
    assert f"the last failure: close() gave up waiting: nobody reads the FIFO {fifo}" in err, err


def test_a_log_closed_with_nothing_queued_does_not_wait_for_a_reader(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """gunicorn's master opens the log and serves no request: its close() at exit
    waited close_timeout for a reader that would have had nothing to read."""
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)
    log = AccessLog(str(fifo), close_timeout=5)
    stats = log.close()
    assert (stats.submitted, stats.written, stats.failed) == (0, 0, 0), stats
    # Not given up on after close_timeout: the writer ended at once.
    assert "close() gave up" not in capfd.readouterr().err
    assert not log._writer.thread.is_alive()  # type: ignore[attr-defined]


def test_a_fifo_with_a_reader_is_written_as_before(tmp_path: Path) -> None:
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    try:
        with AccessLog(str(fifo)) as log:
            assert log.submit(make_record(path=b"/now"))
            assert log.flush()
            assert _paths(reader.lines()) == ["/now"]
            # A blocking descriptor again once open: writes wait for room, not spin.
            assert os.get_blocking(log._sink.fd)  # type: ignore[attr-defined]
    finally:
        reader.close()


def test_wait_holds_submitters_until_a_reader_comes(tmp_path: Path) -> None:
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)
    with AccessLog(str(fifo), policy="wait", max_queue=2) as log:
        assert log.submit(make_record(path=b"/0"))
        assert log.submit(make_record(path=b"/1"))
        accepted: list[bool] = []
        submitter = threading.Thread(
            target=lambda: accepted.append(log.submit(make_record(path=b"/2")))
        )
        submitter.start()
        wait_until(lambda: log.stats().queued == 2)
        # The queue is full and nobody reads: the third submit can only wait for room.
        assert log.stats().dropped == 0
        reader = FifoReader(fifo)
        try:
            submitter.join(TIMEOUT)
            assert accepted == [True]
            assert log.flush()
            assert _paths(reader.lines()) == ["/0", "/1", "/2"]
        finally:
            stats = log.close()
            reader.close()
    assert (stats.submitted, stats.written, stats.dropped, stats.failed) == (3, 3, 0, 0)


def test_gunicorn_with_the_logger_class_starts_and_answers_with_a_fifo_nobody_reads(
    tmp_path: Path,
) -> None:
    """gunicorn's own setup opened ``--access-logfile`` for a handler of its own, which
    for a FIFO nobody reads blocked its startup before a word was printed; the logger
    class leaves a FIFO to boundlog, which says so, and writes once a reader comes."""
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)

    def command(port: int) -> list[str]:
        return [
            *gunicorn_app_command(port, "tests.apps.bare_wsgi:app"),
            "--logger-class", "boundlog.gunicorn.Logger", "--access-logfile", str(fifo),
        ]  # fmt: skip

    with (
        running_server(command, {}, tmp_path / "server.out") as server,
        httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client,
    ):
        assert client.get("/bytes/1").status_code == 200
        assert f"boundlog: nobody reads the FIFO {fifo}:" in server.output()
        reader = FifoReader(fifo)
        try:
            assert client.get("/bytes/2").status_code == 200
            poll_until(
                lambda: _paths(reader.lines()) == ["/bytes/1", "/bytes/2"],
                TIMEOUT,
                "both lines reach the reader",
            )
        finally:
            reader.close()
