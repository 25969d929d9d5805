"""The writer thread survives whatever user code and the sink do, and keeps counting.

Each test breaks one promise the writer used to break by dying: a format that returns
something other than bytes, an error whose ``repr()`` raises, a ``BaseException`` from
a predicate or a format, a non-blocking sink with a descriptor past ``select``'s reach.
Every test checks that the counters still add up and that records submitted after the
fault are still written: a dead writer writes nothing more, and under ``wait`` it
would block every request for ever.
"""

from __future__ import annotations

import fcntl
import os
import resource
import socket
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from _helpers import BlockedPipe, wait_until
from _records import make_record
from boundlog import AccessLog, Record, Stats
from boundlog.engine._admission import Admission
from boundlog.formats._apache import make_format
from boundlog.sinks._files import Sink

BAD = b"/bad"
# A descriptor number select.select() cannot watch (FD_SETSIZE is 1024).
HIGH_DESCRIPTOR = 1500


def _adds_up(stats: Stats) -> bool:
    accounted = stats.written + stats.dropped + stats.filtered + stats.failed + stats.queued
    return stats.submitted == accounted


class _Misbehaving:
    """The combined format, except that a batch holding a ``/bad`` record gets ``act()``."""

    def __init__(self, act: Callable[[Sequence[Record]], Any]) -> None:
        self._combined = make_format("combined", utc=True)
        self._act = act

    def format_batch(self, records: Sequence[Record]) -> Any:
        if any(record[4] == BAD for record in records):
            return self._act(records)
        return self._combined.format_batch(records)


class _UnprintableError(Exception):
    def __repr__(self) -> str:
        raise RuntimeError("repr() refuses too")


def _raise(error: BaseException) -> Callable[..., Any]:
    def act(*args: object) -> Any:
        raise error

    return act


def _paths(path: Path) -> list[bytes]:
    return [line.split(b'"')[1].split()[1] for line in path.read_bytes().splitlines()]


def _survives(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], **options: Any
) -> tuple[Stats, list[bytes], str]:
    """Log /1, /bad, /2 one batch each, then /3 after the fault; close; what came out."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path), flush_interval=0, **options)
    for target in (b"/1", BAD, b"/2"):
        assert log.submit(make_record(path=target))
        assert log.flush(timeout=10)
    assert _adds_up(log.stats())
    assert log.submit(make_record(path=b"/3"))
    stats = log.close()
    assert _adds_up(stats)
    assert log._writer.thread.is_alive() is False
    return stats, _paths(path), capfd.readouterr().err


@pytest.mark.parametrize(
    ("returned", "named"),
    [("a line\n", "str"), (None, "NoneType"), (42, "int"), ([b"a line\n"], "list")],
    ids=["str", "None", "int", "list"],
)
def test_a_format_returning_anything_but_bytes_fails_its_records_only(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], returned: object, named: str
) -> None:
    """format_batch returning str or None counts that record as failed and says why."""
    fmt = _Misbehaving(lambda records: returned)
    stats, paths, err = _survives(tmp_path, capfd, format=fmt)
    assert paths == [b"/1", b"/2", b"/3"]
    assert (stats.submitted, stats.written, stats.failed) == (4, 3, 1)
    assert f"the last failure: cannot format 1 record(s): TypeError('_Misbehaving.format_batch() " \
        f"returned {named}, not bytes" in err  # fmt: skip


# What each error raised by user code is called in the report.
ERRORS = [
    pytest.param(_UnprintableError(), "_UnprintableError (whose repr() raised)", id="bad-repr"),
    pytest.param(SystemExit(3), "SystemExit(3)", id="SystemExit"),
    pytest.param(KeyboardInterrupt(), "KeyboardInterrupt()", id="KeyboardInterrupt"),
]


@pytest.mark.parametrize(("error", "named"), ERRORS)
def test_a_format_raising_anything_fails_its_record_only(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], error: BaseException, named: str
) -> None:
    """SystemExit in a thread ends it silently, a bad repr() broke the report: in a
    format, either fails its record and is reported."""
    stats, paths, err = _survives(tmp_path, capfd, format=_Misbehaving(_raise(error)))
    assert paths == [b"/1", b"/2", b"/3"]
    assert (stats.written, stats.failed) == (3, 1)
    assert f"the last failure: cannot format 1 record(s): {named}" in err


@pytest.mark.parametrize(("error", "named"), ERRORS)
def test_a_keep_raising_anything_logs_its_record(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], error: BaseException, named: str
) -> None:
    """A predicate raising SystemExit, or an error whose repr() raises, is a predicate
    that raised: its record is logged and the report names the error."""

    def keep(record: Record) -> bool:
        if record.path == BAD:
            raise error
        return True

    stats, paths, err = _survives(tmp_path, capfd, keep=keep)
    assert paths == [b"/1", BAD, b"/2", b"/3"]
    assert (stats.written, stats.failed, stats.filtered) == (4, 0, 0)
    assert f"the keep predicate raised for 1 record(s), which were logged: {named}" in err


@pytest.fixture
def high_descriptors() -> Iterator[None]:
    """Room for descriptor numbers past HIGH_DESCRIPTOR in this process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= HIGH_DESCRIPTOR:
        if hard != resource.RLIM_INFINITY and hard <= HIGH_DESCRIPTOR:
            pytest.skip(f"RLIMIT_NOFILE's hard limit {hard} is too low")
        resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH_DESCRIPTOR + 100, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class _FullSocket:
    """A connected socket pair whose sending side is full and non-blocking."""

    def __init__(self) -> None:
        self.sender, self.receiver = socket.socketpair()
        self.sender.setblocking(False)
        self.filler = 0
        try:
            while True:
                self.filler += self.sender.send(b"#" * 4096)
        except BlockingIOError:
            pass
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)

    @property
    def write_fd(self) -> int:
        return self.sender.fileno()

    def release(self) -> None:
        self._reader.start()

    def _drain(self) -> None:
        while chunk := self.receiver.recv(65536):
            self._chunks.append(chunk)

    def lines(self) -> list[bytes]:
        self.sender.close()
        self._reader.join(10)
        self.receiver.close()
        return b"".join(self._chunks)[self.filler :].splitlines()


@pytest.mark.usefixtures("high_descriptors")
@pytest.mark.parametrize("kind", ["pipe", "socket"])
def test_a_full_non_blocking_sink_past_descriptor_1023_is_waited_for(kind: str) -> None:
    """A write that meets EAGAIN waits for room with poll(), which takes any descriptor."""
    sink = BlockedPipe() if kind == "pipe" else _FullSocket()
    high = fcntl.fcntl(sink.write_fd, fcntl.F_DUPFD, HIGH_DESCRIPTOR)
    os.set_blocking(high, False)
    log = AccessLog(high, flush_interval=0)
    try:
        assert log.submit(make_record(path=b"/first"))
        # The writer has taken it and meets a full buffer: it must wait, not die.
        wait_until(lambda: log.stats().queued == 0 and log.stats().submitted == 1)
        sink.release()
        assert log.flush(timeout=10)
        assert log.submit(make_record(path=b"/second"))
        stats = log.close()
    finally:
        os.close(high)
    assert (stats.submitted, stats.written, stats.failed) == (2, 2, 0)
    lines = sink.lines()
    assert [line.split(b'"')[1] for line in lines] == [
        b"GET /first HTTP/1.1",
        b"GET /second HTTP/1.1",
    ]
    if isinstance(sink, BlockedPipe):
        sink.close()


def _fails_once(original: Callable[..., Any]) -> Callable[..., Any]:
    """A method that raises a defect on its first call, then does what it did before."""
    calls = []

    def method(*args: Any) -> Any:
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("a defect")
        return original(*args)

    return method


class _Headers(list[tuple[bytes, bytes]]):
    """A request's header fields that can be watched being freed (a tuple cannot)."""


def test_a_written_batch_is_freed_before_the_writer_waits_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held over the wait for the next batch, a written one would be memory outside the
    queue's bound for as long as no request comes."""
    freed = threading.Event()
    made: list[Record] = []

    def make() -> None:
        headers = _Headers([(b"host", b"example.test")])
        weakref.finalize(headers, freed.set)
        made.append(make_record(request_headers=headers))

    # Made by a thread that has ended: on a free-threaded build, while the thread that
    # made an object lives, that thread frees it, whichever thread drops it last.
    maker = threading.Thread(target=make)
    maker.start()
    maker.join()
    # Each time the writer starts waiting: how many records it had taken, and whether
    # the record was freed by then.
    waits: list[tuple[int, bool]] = []
    gather = Admission.gather

    def watched(self: Admission, *args: Any, **kwargs: Any) -> bool:
        waits.append((self.taken, freed.is_set()))
        return gather(self, *args, **kwargs)

    monkeypatch.setattr(Admission, "gather", watched)
    # A format of Python's own (the combined lines: no record is /bad), so that the
    # records are queued as they are, not packed.
    fmt = _Misbehaving(_raise(AssertionError("no record is /bad")))
    log = AccessLog(str(tmp_path / "access.log"), format=fmt, flush_interval=0)
    assert log.submit(made.pop())
    assert log.flush(timeout=10)
    log.close()  # one more wait, the last
    after_the_batch = [was_freed for taken, was_freed in waits if taken]
    assert after_the_batch
    assert all(after_the_batch)


def test_an_unforeseen_error_in_a_batch_loses_that_batch_and_the_writer_goes_on(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last-resort guard: an error no narrower guard handles costs its batch, counted."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path), flush_interval=0)
    assert log.submit(make_record(path=b"/1"))
    assert log.flush(timeout=10)
    # A defect in boundlog's own code, standing for any the code does not foresee.
    monkeypatch.setattr(Sink, "write", _fails_once(Sink.write))
    assert log.submit(make_record(path=b"/lost"))
    assert log.flush(timeout=10)
    assert log.submit(make_record(path=b"/2"))
    stats = log.close()
    assert _adds_up(stats)
    assert (stats.submitted, stats.written, stats.failed) == (3, 2, 1)
    assert _paths(path) == [b"/1", b"/2"]
    assert (
        "the last failure: lost 1 record(s) to an unexpected error: RuntimeError('a defect')"
        in (capfd.readouterr().err)
    )


def test_an_unforeseen_error_between_batches_loses_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A defect in a reopen is reported; the batch after it is still written, and
    the next reopen works."""
    path = tmp_path / "access.log"
    # With an hour-long window the writer takes nothing before flush() asks it to.
    log = AccessLog(str(path), flush_interval=3600)
    monkeypatch.setattr(Sink, "reopen", _fails_once(Sink.reopen))
    # Failed or not, the request is carried out: nobody waits for it in vain.
    assert log.reopen(timeout=10)
    assert log.submit(make_record(path=b"/1"))
    assert log.flush(timeout=10)
    rotated = tmp_path / "access.log.1"
    path.rename(rotated)
    assert log.reopen(timeout=10)
    assert log.submit(make_record(path=b"/2"))
    stats = log.close()
    assert (stats.submitted, stats.written, stats.failed) == (2, 2, 0)
    assert (_paths(rotated), _paths(path)) == ([b"/1"], [b"/2"])
    assert "boundlog: unexpected error between two batches: RuntimeError('a defect')" in (
        capfd.readouterr().err
    )


def test_a_writer_that_stops_releases_waiting_submitters_and_counts_everything(
    blocked_pipe: BlockedPipe, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the thread end anyway, nobody waits for it: waiters are refused, counted."""
    log = AccessLog(blocked_pipe.write_fd, policy="wait", max_queue=1, flush_interval=0)
    assert log.submit(make_record(path=b"/written"))
    wait_until(lambda: log.stats().queued == 0 and log.stats().submitted == 1)
    assert log.submit(make_record(path=b"/queued"))
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(log.submit(make_record())))
    waiter.start()
    wait_until(lambda: log._admission._room_waiters == 1)
    # A defect outside any batch, where no guard can go on: the thread must end cleanly.
    monkeypatch.setattr(Admission, "take", _raise(RuntimeError("a defect")))
    blocked_pipe.release()
    waiter.join(10)
    assert not waiter.is_alive(), "a submitter still waits for a writer that is gone"
    assert results == [False]
    assert log.submit(make_record()) is False
    stats = log.close()
    assert _adds_up(stats)
    assert (stats.submitted, stats.written, stats.failed, stats.dropped) == (4, 1, 1, 2)
    assert [line.split(b'"')[1] for line in blocked_pipe.lines()] == [b"GET /written HTTP/1.1"]
    assert "boundlog: the writer thread stopped, the log refuses records from now on: " \
        "RuntimeError('a defect')" in capfd.readouterr().err  # fmt: skip


def _cut_before(marker: bytes, keep: int) -> Callable[..., Any]:
    """``Sink.write`` as a full disk does it, once: the batch holding ``marker`` stops
    ``keep`` bytes after the start of the newline that ends the ``marker`` line."""
    original = Sink.write
    cut = []

    def write(self: Sink, data: bytes) -> tuple[int, OSError | None]:
        if cut or marker not in data:
            return original(self, data)
        end = data.index(b"\n", data.index(marker)) + keep
        cut.append(end)
        written, _ = original(self, data[:end])
        return written, OSError(28, "No space left on device")

    return write


@pytest.mark.parametrize(
    ("keep", "cut_lines", "failed"),
    [(0, [], 0), (-1, [b"/cut"], 1)],
    ids=["all-but-its-newline", "one-byte-short"],
)
def test_a_line_a_failed_write_leaves_whole_but_its_newline_counts_as_written(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    keep: int,
    cut_lines: list[bytes],
    failed: int,
) -> None:
    """The counters agree with the file: a record all in it but for the newline the next
    write starts with is written; one shorter than that is a counted fragment."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path), flush_interval=3600)
    monkeypatch.setattr(Sink, "write", _cut_before(b"/cut", keep))
    for target in (b"/1", b"/cut"):
        assert log.submit(make_record(path=target))
    assert log.flush(timeout=10)
    assert log.submit(make_record(path=b"/2"))
    stats = log.close()
    assert _adds_up(stats)
    assert (stats.written, stats.failed, stats.write_errors) == (3 - failed, failed, 1)
    lines = path.read_bytes().splitlines()
    whole = [line for line in lines if line.endswith(b'"')]
    assert len(whole) == stats.written
    assert [line.split(b'"')[1].split()[1] for line in whole] == [
        target for target in (b"/1", b"/cut", b"/2") if target not in cut_lines
    ]
    assert len(lines) - len(whole) == len(cut_lines)
    # Reported when a record was lost: a write error that lost nothing is only counted.
    assert ("No space left on device" in capfd.readouterr().err) == bool(failed)
