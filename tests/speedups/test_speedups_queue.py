"""The C core's queue (csrc/engine/queue.c) is the reference's (engine/_queue.Pending):
the same records, in the same order, after any sequence of appends, takes, withdrawals
and drains; every record appended by many threads at once is taken exactly once; and a
finalizer that submits while the queue is being emptied finds it whole."""

from __future__ import annotations

import gc
import sys
import threading
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from _examples import examples
from boundlog import _core
from boundlog.engine._admission import Admission
from boundlog.engine._queue import Pending, new_queue

pytestmark = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)


def _queue() -> Any:
    assert _core.speedups is not None
    return _core.speedups.Queue()


def item(index: int) -> tuple[int]:
    """A record stand-in (a tuple, as a Record is) equal to others but not the same:
    withdraw must go by identity."""
    return tuple([index % 2])  # a new tuple each time


class QueueMachine(RuleBasedStateMachine):
    """The C queue and the reference, given the same operations, kept in step."""

    def __init__(self) -> None:
        super().__init__()
        self.compiled = _queue()
        self.reference = Pending()
        self.items = [item(index) for index in range(8)]

    @rule(index=st.integers(min_value=0, max_value=7), times=st.integers(1, 90))
    def append(self, index: int, times: int) -> None:
        # Runs of appends: the ring grows past its first array, and wraps around.
        for _ in range(times):
            assert self.compiled.append(self.items[index]) is None
            self.reference.append(self.items[index])

    @rule(count=st.integers(min_value=0, max_value=200))
    def take(self, count: int) -> None:
        taken = self.compiled.take(count)
        assert type(taken) is list
        assert [id(item) for item in taken] == [id(item) for item in self.reference.take(count)]

    @rule(index=st.integers(min_value=0, max_value=7))
    def withdraw(self, index: int) -> None:
        queued = self.items[index]
        assert self.compiled.withdraw(queued) == self.reference.withdraw(queued)

    @rule()
    def withdraw_a_stranger(self) -> None:
        # An equal item never queued: nothing is withdrawn.
        assert self.compiled.withdraw(item(0)) is self.reference.withdraw(item(0)) is False

    @rule()
    def drain(self) -> None:
        assert self.compiled.drain() == self.reference.drain()

    @invariant()
    def same_items(self) -> None:
        assert len(self.compiled) == len(self.reference)
        assert bool(self.compiled) == bool(self.reference)
        assert [id(item) for item in self.compiled] == [id(item) for item in self.reference]


QueueMachine.TestCase.settings = settings(
    max_examples=examples(200), stateful_step_count=40, deadline=None
)
test_the_c_queue_is_the_reference = QueueMachine.TestCase


def test_the_admission_uses_the_c_queue() -> None:
    assert type(new_queue()) is type(_queue())
    admission = Admission(max_queue=4, batch_size=2, policy="drop")
    assert type(admission._pending) is type(_queue())


@pytest.mark.parametrize("queue", [_queue, Pending], ids=["c", "reference"])
def test_bad_arguments_are_refused(queue: Any) -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        queue().take(-1)
    with pytest.raises(TypeError):
        queue().take("1")
    with pytest.raises(TypeError):
        queue().append()


def test_the_c_queue_takes_no_arguments() -> None:
    assert _core.speedups is not None
    with pytest.raises(TypeError, match="takes no arguments"):
        _core.speedups.Queue([1])  # type: ignore[call-arg]


def test_the_c_queue_keeps_references_exactly() -> None:
    """Each record's reference count is back where it was once the queue lets go."""
    queue = _queue()
    record = item(0)
    before = sys.getrefcount(record)
    for _ in range(5_000):
        queue.append(record)
    assert sys.getrefcount(record) == before + 5_000
    taken = queue.take(3_000)
    assert sys.getrefcount(record) == before + 5_000
    del taken
    assert queue.withdraw(record) is True
    assert sys.getrefcount(record) == before + 1_999
    list(queue)
    assert queue.drain() == 1_999
    assert sys.getrefcount(record) == before
    assert len(queue) == 0
    assert queue.take(10) == []


def test_records_appended_by_many_threads_are_each_taken_once() -> None:
    """Eight threads append while one takes (and the GIL, if any, switches often): no
    record lost, none taken twice, each thread's in its order."""
    queue = _queue()
    threads_count, per_thread = 8, 5_000
    start = threading.Barrier(threads_count + 1)
    done = threading.Event()

    def append(thread: int) -> None:
        start.wait()
        for index in range(per_thread):
            queue.append((thread, index))

    taken: list[tuple[int, int]] = []

    def take() -> None:
        start.wait()
        while not done.is_set() or len(queue):
            taken.extend(queue.take(97))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        taker = threading.Thread(target=take)
        appenders = [threading.Thread(target=append, args=(t,)) for t in range(threads_count)]
        for thread in [taker, *appenders]:
            thread.start()
        for thread in appenders:
            thread.join()
        done.set()
        taker.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(taken) == threads_count * per_thread
    for thread in range(threads_count):
        assert [index for t, index in taken if t == thread] == list(range(per_thread))


class Resubmits:
    """A record whose finalizer appends another record to the queue that drops it, as
    Admission.offer_unlocked does for a response dropped by its server."""

    def __init__(self, queue: Any, log: list[str]) -> None:
        self.queue = queue
        self.log = log

    def __del__(self) -> None:
        self.queue.append("from a finalizer")
        self.log.append(f"{len(self.queue)} waiting")


def test_a_finalizer_run_by_a_drain_finds_the_queue_whole() -> None:
    queue = _queue()
    log: list[str] = []
    for _ in range(3):
        queue.append(Resubmits(queue, log))
    assert queue.drain() == 3
    # Each finalizer ran once the queue was empty and consistent.
    assert log == ["1 waiting", "2 waiting", "3 waiting"]
    assert list(queue) == ["from a finalizer"] * 3
    assert queue.take(10) == ["from a finalizer"] * 3


def test_a_queue_in_a_reference_cycle_is_collected() -> None:
    queue = _queue()
    queue.append(queue)
    collected = threading.Event()

    class Canary:
        def __del__(self) -> None:
            collected.set()

    queue.append(Canary())
    del queue
    gc.collect()
    assert collected.is_set()
