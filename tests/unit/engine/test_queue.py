"""Admission: the bound, the two overload policies and the counters, with a real sink."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from _helpers import BlockedPipe, wait_until
from _records import make_record
from boundlog import AccessLog
from boundlog.engine._admission import Admission


def _writer_busy(log: AccessLog, pipe: BlockedPipe) -> None:
    """Submit one record and wait until the writer has taken it and blocked on the pipe."""
    assert log.submit(make_record(path=b"/first"))
    wait_until(lambda: log.stats().queued == 0 and log.stats().submitted == 1)


def test_drop_counts_exactly_what_a_full_queue_refuses(blocked_pipe: BlockedPipe) -> None:
    """Under drop, the queue holds max_queue records while the sink blocks; the rest count."""
    log = AccessLog(blocked_pipe.write_fd, policy="drop", max_queue=10, flush_interval=0)
    _writer_busy(log, blocked_pipe)
    accepted = [log.submit(make_record(path=b"/%d" % i)) for i in range(15)]
    assert accepted == [True] * 10 + [False] * 5
    assert log.stats().dropped == 5
    assert log.stats().queued == 10
    blocked_pipe.release()
    stats = log.close()
    assert stats.submitted == 16
    assert stats.written == 11
    assert stats.dropped == 5
    assert stats.failed == 0
    assert stats.queue_peak == 10
    assert len(blocked_pipe.lines()) == 11


def test_wait_blocks_a_thread_until_there_is_room(blocked_pipe: BlockedPipe) -> None:
    """Under wait, a thread that finds the queue full waits, then its record is written."""
    log = AccessLog(blocked_pipe.write_fd, policy="wait", max_queue=2, flush_interval=0)
    _writer_busy(log, blocked_pipe)
    assert log.submit(make_record())
    assert log.submit(make_record())
    finished = threading.Event()

    def submit_one_more() -> None:
        log.submit(make_record(path=b"/waited"))
        finished.set()

    waiter = threading.Thread(target=submit_one_more)
    waiter.start()
    assert not finished.wait(0.2), "submit returned while the queue was full"
    blocked_pipe.release()
    assert finished.wait(10)
    waiter.join()
    stats = log.close()
    assert (stats.submitted, stats.written, stats.dropped) == (4, 4, 0)
    assert blocked_pipe.lines()[-1].split(b'"')[1] == b"GET /waited HTTP/1.1"


def test_wait_in_asyncio_keeps_the_event_loop_running(blocked_pipe: BlockedPipe) -> None:
    """submit_async under wait suspends the request, not the loop: a ticker keeps ticking."""
    log = AccessLog(blocked_pipe.write_fd, policy="wait", max_queue=2, flush_interval=0)
    _writer_busy(log, blocked_pipe)

    async def scenario() -> tuple[int, int]:
        for _ in range(2):
            assert await log.submit_async(make_record())
        waiting = asyncio.ensure_future(log.submit_async(make_record(path=b"/waited")))
        ticks = 0
        while ticks < 200:
            ticks += 1
            await asyncio.sleep(0)
        assert not waiting.done(), "the record was admitted while the queue was full"
        ticks_while_blocked = ticks
        blocked_pipe.release()
        while not waiting.done():
            ticks += 1
            await asyncio.sleep(0.001)
        assert waiting.result() is True
        return ticks_while_blocked, ticks

    ticks_while_blocked, ticks = asyncio.run(scenario())
    assert ticks_while_blocked == 200
    assert ticks > ticks_while_blocked
    stats = log.close()
    assert (stats.submitted, stats.written, stats.dropped) == (4, 4, 0)


@pytest.mark.parametrize("policy", ["drop", "wait"])
def test_submit_async_under_drop_counts_instead_of_waiting(
    blocked_pipe: BlockedPipe, policy: str
) -> None:
    """A full queue makes submit_async refuse (drop) or wait (wait), never both."""
    log = AccessLog(blocked_pipe.write_fd, policy=policy, max_queue=1, flush_interval=0)
    _writer_busy(log, blocked_pipe)
    assert log.submit(make_record())

    async def one_more() -> bool | None:
        attempt = asyncio.ensure_future(log.submit_async(make_record()))
        for _ in range(50):
            await asyncio.sleep(0)
        if not attempt.done():
            blocked_pipe.release()
        return await attempt

    accepted = asyncio.run(one_more())
    if policy == "drop":
        assert accepted is False
        assert log.stats().dropped == 1
    else:
        assert accepted is True
    if policy == "drop":
        blocked_pipe.release()
    stats = log.close()
    assert stats.submitted == stats.written + stats.dropped == 3


def test_close_releases_waiting_threads_as_drops(blocked_pipe: BlockedPipe) -> None:
    """A thread waiting for room when the log closes gets its record counted as dropped."""
    log = AccessLog(
        blocked_pipe.write_fd, policy="wait", max_queue=1, flush_interval=0, close_timeout=0.5
    )
    _writer_busy(log, blocked_pipe)
    assert log.submit(make_record())
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(log.submit(make_record())))
    waiter.start()
    wait_until(lambda: log._admission._room_waiters == 1)
    stats = log.close()
    waiter.join(10)
    assert results == [False]
    assert stats.submitted == stats.written + stats.dropped + stats.failed
    assert stats.dropped == 1
    # The sink never unblocked within close_timeout: what it held is counted as failed.
    assert stats.failed == 2
    blocked_pipe.release()


def test_many_threads_never_lose_a_record(tmp_path: os.PathLike[str]) -> None:
    """With 8 threads submitting at once, every record is written or counted as dropped."""
    path = os.path.join(tmp_path, "access.log")
    log = AccessLog(path, policy="drop", max_queue=64, batch_size=16, flush_interval=0.001)
    per_thread = 2_000
    threads = [
        threading.Thread(
            target=lambda n=n: [log.submit(make_record(status=200 + n)) for _ in range(per_thread)]
        )
        for n in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = log.close()
    assert stats.submitted == 8 * per_thread
    assert stats.written + stats.dropped == stats.submitted
    with open(path, "rb") as lines:
        assert sum(1 for _ in lines) == stats.written


def test_the_writer_takes_at_most_a_batch_and_a_backlog_without_gathering() -> None:
    """A full queue behind a slow sink is taken a batch at a time, so the writer never
    holds a second queue's worth of records; what a take leaves is taken next, at once
    (with an hour-long window, a take that gathered would hang the test)."""
    admission = Admission(max_queue=10, batch_size=4, policy="drop")
    records = [make_record(bytes_sent=n) for n in range(9)]
    for record in records:
        assert admission.offer(record)
    taken = []
    for _ in range(3):
        admission.gather(3600)
        taken.append(admission.take())
    assert [len(batch) for batch in taken] == [4, 4, 1]
    assert [record for batch in taken for record in batch] == records
    assert admission.counts() == (9, 0, 0, 9)


def test_a_cancelled_wait_counts_its_record_as_dropped(blocked_pipe: BlockedPipe) -> None:
    """A request cancelled while its record waits for room (a server's shutdown
    timeout) has its record counted as dropped; the cancellation still propagates."""
    log = AccessLog(blocked_pipe.write_fd, policy="wait", max_queue=1, flush_interval=0)
    _writer_busy(log, blocked_pipe)
    assert log.submit(make_record())

    async def cancel_a_waiting_submit() -> None:
        waiting = asyncio.ensure_future(log.submit_async(make_record(path=b"/cancelled")))
        while not log._admission._async_waiters:
            await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(cancel_a_waiting_submit())
    assert log.stats().dropped == 1
    blocked_pipe.release()
    stats = log.close()
    assert (stats.submitted, stats.written, stats.dropped, stats.failed) == (3, 2, 1, 0)
    assert all(b"/cancelled" not in line for line in blocked_pipe.lines())


class _Interrupted(Exception):
    pass


def test_a_thread_interrupted_while_waiting_counts_its_record_as_dropped(
    blocked_pipe: BlockedPipe,
) -> None:
    """A signal handler that raises in a thread blocked in submit() under wait: the
    record it was submitting is counted as dropped, and the exception propagates."""
    log = AccessLog(blocked_pipe.write_fd, policy="wait", max_queue=1, flush_interval=0)
    _writer_busy(log, blocked_pipe)
    assert log.submit(make_record())

    def interrupt(signum: int, frame: object) -> None:
        raise _Interrupted

    def signal_when_waiting() -> None:
        wait_until(lambda: log._admission._room_waiters == 1)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR2)

    previous = signal.signal(signal.SIGUSR2, interrupt)
    signaller = threading.Thread(target=signal_when_waiting)
    try:
        signaller.start()
        with pytest.raises(_Interrupted):
            log.submit(make_record(path=b"/interrupted"))
    finally:
        signaller.join(10)
        signal.signal(signal.SIGUSR2, previous)
    assert log.stats().dropped == 1
    assert log._admission._room_waiters == 0
    blocked_pipe.release()
    stats = log.close()
    assert (stats.submitted, stats.written, stats.dropped, stats.failed) == (3, 2, 1, 0)


def test_queue_peak_shows_a_queue_that_filled_behind_a_stalled_sink(
    blocked_pipe: BlockedPipe,
) -> None:
    """The writer takes nothing while its write blocks, yet the peak shows the full
    queue: to a snapshot (drop and wait), and to the refusals that found it full."""
    log = AccessLog(blocked_pipe.write_fd, policy="drop", max_queue=50, flush_interval=0)
    _writer_busy(log, blocked_pipe)
    for _ in range(50):
        assert log.submit(make_record())
    stats = log.stats()
    assert (stats.queued, stats.queue_peak) == (50, 50)
    assert log.submit(make_record()) is False
    blocked_pipe.release()
    assert log.flush(timeout=10)
    stats = log.close()
    assert (stats.written, stats.dropped, stats.queue_peak) == (51, 1, 50)


def test_queue_peak_counts_a_full_queue_seen_only_by_a_refusal(
    blocked_pipe: BlockedPipe,
) -> None:
    """No snapshot and no take while the queue was full, only a refused record (then
    close gave up on the stuck sink): the peak still shows the full queue."""
    log = AccessLog(blocked_pipe.write_fd, policy="drop", max_queue=5, flush_interval=0)
    assert log.submit(make_record(path=b"/first"))
    wait_until(lambda: log._admission.taken == 1)
    accepted = [log.submit(make_record()) for _ in range(6)]
    assert accepted == [True] * 5 + [False]
    stats = log.close(timeout=0.1)
    assert (stats.written, stats.dropped, stats.failed, stats.queued) == (0, 1, 6, 0)
    assert stats.queue_peak == 5
    blocked_pipe.release()


# Bounds for the close race below: the old protocol failed about one round in a
# hundred here, so a run of these rounds catches it; each round takes a few ms.
RACE_ROUNDS = 600
RACE_SECONDS = 12.0


@pytest.mark.parametrize("submitters", [1, 4])
def test_a_close_racing_a_flush_never_refuses_an_accepted_record(
    tmp_path: Path, submitters: int
) -> None:
    """flush(), then close(), while threads submit: every record submit() accepted is
    written, every refused one is counted as dropped, and nothing is both."""
    previous_interval = sys.getswitchinterval()
    # Switch threads as often as possible, so that a submit often lands between the
    # writer's last take and its look at the closed flag.
    sys.setswitchinterval(1e-6)
    deadline = time.monotonic() + RACE_SECONDS
    try:
        for round_number in range(RACE_ROUNDS):
            if time.monotonic() > deadline:
                break
            _race_close_against(tmp_path / f"{round_number}.log", submitters)
    finally:
        sys.setswitchinterval(previous_interval)


def _race_close_against(path: Path, submitters: int) -> None:
    # Under wait a submit is refused only once the log is closed.
    log = AccessLog(str(path), policy="wait", max_queue=64, batch_size=8, flush_interval=0)
    answers: list[list[tuple[bytes, bool]]] = [[] for _ in range(submitters)]
    started = [threading.Event() for _ in range(submitters)]

    def submit_until_refused(number: int) -> None:
        started[number].set()
        for count in range(1_000_000):
            target = b"/%d/%d" % (number, count)
            accepted = log.submit(make_record(path=target))
            answers[number].append((target, accepted))
            if not accepted:
                return
            time.sleep(0)

    threads = [threading.Thread(target=submit_until_refused, args=(n,)) for n in range(submitters)]
    for thread in threads:
        thread.start()
    for event in started:
        event.wait()
    # A reopen request widens the writer's step between its take and its next look.
    log.request_reopen()
    log.flush()
    log.close()
    for thread in threads:
        thread.join()
    stats = log.stats()
    accepted = {target for answered in answers for target, ok in answered if ok}
    refused = sum(not ok for answered in answers for _, ok in answered)
    written = {line.split(b'"')[1].split()[1] for line in path.read_bytes().splitlines()}
    assert written == accepted, f"accepted, not written: {sorted(accepted - written)}"
    assert (stats.written, stats.failed, stats.queued) == (len(written), 0, 0)
    assert stats.dropped == refused
    path.unlink()


def test_a_reopen_of_a_fifo_nobody_reads_does_not_hold_the_writer(tmp_path: Path) -> None:
    """Opening a FIFO for writing blocks until a reader comes; the writer opens without
    blocking, so a reopen while nobody reads fails at once (a write error, the old
    descriptor kept) and the writer goes on: a record accepted after it is written once
    a reader is back, and close() does not wait for a reader that never comes."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    log = AccessLog(str(fifo), flush_interval=0, report_loss=False)
    writer = log._writer.thread
    os.close(reader)
    assert log.reopen(timeout=30)
    assert not _in_function(writer, "_open_for_append")
    assert log.stats().write_errors == 1
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert log.submit(make_record(path=b"/accepted"))
        stats = log.close(timeout=30)
        data = os.read(reader, 65536)
    finally:
        os.close(reader)
    assert (stats.submitted, stats.written, stats.dropped, stats.failed) == (1, 1, 0, 0)
    assert data.split(b'"')[1] == b"GET /accepted HTTP/1.1"


def _in_function(thread: threading.Thread, name: str) -> bool:
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == name:
            return True
        frame = frame.f_back
    return False


@pytest.mark.parametrize("offer", ["python", "c"])
def test_the_queue_is_bounded_in_bytes_and_the_writer_gives_them_back(offer: str) -> None:
    """Records over their share of max_queue_bytes are charged their excess; past the
    budget they are refused (counted like a full queue's) until the writer takes some."""
    from boundlog import _core

    if offer == "c" and _core.handoff is None:
        pytest.skip(f"the C core is not in use ({_core.description})")
    admission = Admission(max_queue=100, batch_size=2, policy="drop", max_queue_bytes=200_000)
    hand = admission.offer if offer == "python" else _core.handoff(admission)
    share = 200_000 // 200
    small = [make_record(path=b"/%d" % i) for i in range(50)]
    assert all(hand(record) for record in small)
    assert admission._charged == 0
    big = [make_record(path=b"/b", request_headers=[(b"cookie", b"c" * 20_000)]) for _ in range(9)]
    accepted = [hand(record) for record in big]
    # Each costs its cookie, the path and a field's overhead; the budget's other half
    # (100,000 bytes) holds five of their excesses.
    excess = 20_000 + len(b"cookie") + 160 + 2 - share
    assert accepted == [True] * 5 + [False] * 4
    assert admission._charged == 5 * excess
    for _ in range(4):
        admission.refuse()
    # Small records still fit: the byte budget refuses only what exceeds its share.
    assert hand(make_record(path=b"/small"))
    taken = []
    while len(taken) < 52:
        taken += admission.take()
    assert admission._charged == 3 * excess
    assert hand(big[5])
    assert admission.counts()[2] == 4
    assert admission.abandon() == 3 + 1 + 1
    assert admission._charged == 0
    assert not admission._excess


def test_a_record_refused_by_the_byte_budget_leaves_the_peak_at_what_waits() -> None:
    """queue_peak counts records: a big record the byte budget refuses while the queue
    has room for more records is no full queue (it read max_queue, 10,000, with 10
    records waiting).  A small record refused means the queue was full when checked."""
    admission = Admission(max_queue=100, batch_size=2, policy="drop", max_queue_bytes=200_000)
    big = [make_record(path=b"/b", request_headers=[(b"cookie", b"c" * 20_000)]) for _ in range(9)]
    results = [admission.submit(record) for record in big]
    assert results == [True] * 5 + [False] * 4
    assert admission.counts() == (0, 5, 4, 5)
    for index in range(95):
        assert admission.submit(make_record(path=b"/%d" % index))
    assert not admission.submit(make_record())
    assert admission.counts() == (0, 100, 5, 100)
