"""The reference queue (engine/_queue.Pending), and whichever queue the Admission gets:
withdraw goes by identity, and stays atomic while other threads append and take."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from boundlog.engine._queue import Pending, RecordQueue, new_queue

QUEUES: list[Callable[[], RecordQueue]] = [Pending, new_queue]


@pytest.mark.parametrize("make", QUEUES, ids=["reference", "in use"])
def test_withdraw_removes_the_record_itself_not_an_equal_one(make: Callable[[], Any]) -> None:
    queue = make()
    first, second = tuple([1]), tuple([1])
    assert first == second
    assert first is not second
    queue.append(first)
    queue.append(second)
    assert queue.withdraw(second) is True
    assert [record is first for record in queue] == [True]
    assert queue.withdraw(second) is False
    assert len(queue) == 1


@pytest.mark.parametrize("make", QUEUES, ids=["reference", "in use"])
def test_withdraw_is_atomic_while_others_append_and_take(make: Callable[[], Any]) -> None:
    """Four threads append, one takes, one withdraws records of its own: each withdrawn
    record is gone (never also taken), and every other one is taken once."""
    queue = make()
    appended: list[list[Any]] = [[tuple([index]) for _ in range(20_000)] for index in range(4)]
    start = threading.Barrier(6)
    appending_done = threading.Event()
    taken: list[Any] = []

    def append(records: list[Any]) -> None:
        start.wait()
        for record in records:
            queue.append(record)

    def take() -> None:
        start.wait()
        while not appending_done.is_set() or len(queue):
            taken.extend(queue.take(7))

    withdrawn: list[Any] = []
    kept: list[Any] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    appenders = [threading.Thread(target=append, args=(records,)) for records in appended]
    taker = threading.Thread(target=take)
    try:
        for thread in [*appenders, taker]:
            thread.start()
        start.wait()
        for _ in range(300):
            mine = tuple([-1])
            queue.append(mine)
            (withdrawn if queue.withdraw(mine) else kept).append(mine)
    finally:
        for thread in appenders:
            thread.join()
        appending_done.set()
        taker.join()
        sys.setswitchinterval(interval)
    taken_ids = [id(record) for record in taken]
    assert len(set(taken_ids)) == len(taken_ids)
    assert not {id(record) for record in withdrawn} & set(taken_ids)
    expected = {id(record) for records in appended for record in records}
    assert expected | {id(record) for record in kept} == set(taken_ids)


def test_a_take_keeps_what_it_popped_when_a_withdraw_came_between() -> None:
    """Without the GIL, a withdraw may land between the reference's length read and its
    last popleft, which then finds the deque empty: what was popped is still returned
    (and the count lock, which the finalizer's withdraw does not take, cannot prevent
    it)."""

    class WithdrawnAfterTheRead(Pending):
        def __len__(self) -> int:
            return super().__len__() + 1  # as read before a withdraw took one

    queue = WithdrawnAfterTheRead()
    for record in ("a", "b", "c"):
        queue.append(record)
    assert queue.take(10) == ["a", "b", "c"]
    assert queue.take(10) == []
