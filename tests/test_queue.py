"""Admission: the bound, the two overload policies and the counters, with a real sink."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from _records import make_record
from boundlog import AccessLog
from boundlog._queue import Admission
from conftest import BlockedPipe, wait_until


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
    taken = [admission.take(3600) for _ in range(3)]
    assert [len(batch) for batch in taken] == [4, 4, 1]
    assert [record for batch in taken for record in batch] == records
    assert admission.counts() == (9, 0, 0, 9)
