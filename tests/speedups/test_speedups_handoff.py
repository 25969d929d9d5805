"""The C hand-off (``_speedups.Handoff``, csrc/paths/handoff.c) against ``Admission.offer``.

``Handoff(admission)(record)`` must do what ``admission.offer(record)`` does: the same
answer, the same queue, the same counters, the same wake-ups and withdrawals, the same
exceptions.  A state machine drives two Admissions through one sequence of offers,
takes, wake-up thresholds (what the writer publishes in ``gather``), closes, hurries,
abandons and forks, one offered to through the C Handoff and one through the
reference, and compares them after every step.  A close that lands between an offer's
append and its last look (the withdrawal path) is made deterministic by a wake-up hook
that closes the queue, with or without the writer taking the record first.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from _examples import examples
from _records import make_record
from boundlog import AccessLog, Record, _core
from boundlog._options import DEFAULT_MAX_QUEUE_BYTES
from boundlog.engine._admission import _NEVER, Admission
from boundlog.engine._queue import Pending

pytestmark = pytest.mark.skipif(
    _core.handoff is None, reason=f"the C core is not in use ({_core.description})"
)

HOOKS = ("none", "close", "take-then-close", "raise")


class HookError(Exception):
    """What a wake-up raises when the hook says so."""


class Probe(Admission):
    """An Admission whose wake-up can close it (a close racing with an offer), let the
    writer take first, or raise; and which counts its wake-ups and withdrawals."""

    __slots__ = ("hook", "taken_by_hook", "wakes", "withdrawals")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.hook = "none"
        self.wakes = 0
        self.withdrawals: list[bool] = []
        self.taken_by_hook: list[Record] = []

    def _wake_writer(self) -> None:
        self.wakes += 1
        hook, self.hook = self.hook, "none"
        if hook == "raise":
            raise HookError("wake-up failed")
        super()._wake_writer()
        if hook == "take-then-close":
            self.taken_by_hook.extend(self.take())
        if hook in ("close", "take-then-close"):
            self.close()

    def _withdraw(self, record: Record) -> bool:
        withdrawn = super()._withdraw(record)
        self.withdrawals.append(withdrawn)
        return withdrawn


class QueueOfItsOwn(Pending):
    """A reference queue whose append is Python code: the Handoff must call it, not
    deque's."""

    def append(self, record: Record) -> None:
        super().append(record)


CLOSED_SLOT: Any = Admission.__dict__["_closed"]


class ProbeOfOtherTypes(Probe):
    """A Probe whose _closed is a property and whose queue a deque subclass: the Handoff
    finds no shortcut for them and looks them up at each call, as Python does."""

    __slots__ = ()

    @property
    def _closed(self) -> bool:
        return bool(CLOSED_SLOT.__get__(self))

    @_closed.setter
    def _closed(self, value: bool) -> None:
        CLOSED_SLOT.__set__(self, value)

    def _start_afresh(self) -> None:
        super()._start_afresh()
        self._pending = QueueOfItsOwn()


class ProbeOfTheReferenceQueue(Probe):
    """A Probe whose queue is the pure-Python core's (a deque): the Handoff appends to it
    through deque.append's method, found once."""

    __slots__ = ()

    def _start_afresh(self) -> None:
        super()._start_afresh()
        self._pending = Pending()


def outcome(call: Any, *args: Any) -> tuple[str, Any]:
    """What a call returned, or the exception it raised (type and arguments)."""
    try:
        return "returned", call(*args)
    except Exception as error:
        return "raised", (type(error), error.args)


def state(admission: Probe) -> tuple[Any, ...]:
    return (
        [id(record) for record in admission._pending],
        admission.counts(),
        admission._wake_at,
        admission.closed,
        admission.wakes,
        admission.withdrawals,
        [id(record) for record in admission.taken_by_hook],
        admission._charged,
        admission._excess,
    )


def _records() -> list[Record]:
    """Small records, and every fifth one big (a cookie, a long path, notes, an environ):
    over its share of a small byte budget, it takes the slow path that charges it."""
    records = []
    for index in range(40):
        path = b"/%d" % index
        if index % 5 != 4:
            records.append(make_record(path=path))
        elif index % 4 == 0:
            records.append(make_record(path=path, request_headers=[(b"cookie", b"c" * 9000)]))
        elif index % 4 == 1:
            records.append(make_record(path=path * 4000))
        elif index % 4 == 2:
            records.append(make_record(path=path, notes={"big": "n" * 20_000}))
        else:
            records.append(make_record(path=path, request_headers={"HTTP_COOKIE": "c" * 30_000}))
    return records


class HandoffMachine(RuleBasedStateMachine):
    """Two Admissions, one offered to in C, one in Python, kept in step."""

    reference: Probe
    compiled: Probe

    @initialize(
        max_queue=st.integers(min_value=1, max_value=6),
        batch_size=st.integers(min_value=1, max_value=6),
        policy=st.sampled_from(["drop", "wait"]),
        kind=st.sampled_from([Probe, ProbeOfTheReferenceQueue, ProbeOfOtherTypes]),
        max_queue_bytes=st.sampled_from([DEFAULT_MAX_QUEUE_BYTES, 65536, 100_000]),
    )
    def make(
        self, max_queue: int, batch_size: int, policy: Any, kind: type[Probe], max_queue_bytes: int
    ) -> None:
        options = {
            "max_queue": max_queue,
            "batch_size": batch_size,
            "policy": policy,
            "max_queue_bytes": max_queue_bytes,
        }
        self.reference = kind(**options)
        self.compiled = kind(**options)
        assert _core.handoff is not None
        self.handoff = _core.handoff(self.compiled)
        self.records = _records()

    @rule(index=st.integers(min_value=0, max_value=39))
    def offer(self, index: int) -> None:
        record = self.records[index]
        assert outcome(self.handoff, record) == outcome(self.reference.offer, record)

    @rule()
    def offer_refused_is_counted(self) -> None:
        # What an integration does after a refused offer under drop.
        record = self.records[0]
        expected = outcome(self.reference.offer, record)
        assert outcome(self.handoff, record) == expected
        if expected == ("returned", False):
            self.reference.refuse()
            self.compiled.refuse()

    @rule()
    def take(self) -> None:
        expected = self.reference.take()
        assert [id(r) for r in self.compiled.take()] == [id(r) for r in expected]

    @rule(threshold=st.one_of(st.integers(min_value=0, max_value=7), st.just(_NEVER)))
    def publish_wake_at(self, threshold: int) -> None:
        # What the writer publishes in gather(): 1 when idle, batch_size while it
        # gathers, _NEVER while it writes.
        self.reference._wake_at = self.compiled._wake_at = threshold

    @rule(hook=st.sampled_from(HOOKS))
    def on_next_wake(self, hook: str) -> None:
        self.reference.hook = self.compiled.hook = hook

    @rule(
        index=st.integers(min_value=0, max_value=39),
        threshold=st.integers(min_value=0, max_value=3),
        hook=st.sampled_from(HOOKS),
    )
    def offer_at_threshold(self, index: int, threshold: int, hook: str) -> None:
        # The writer waits to be woken, and the wake-up closes the log, lets the writer
        # take first, or fails.
        self.publish_wake_at(threshold)
        self.on_next_wake(hook)
        self.offer(index)

    @rule()
    def close(self) -> None:
        self.reference.close()
        self.compiled.close()

    @rule()
    def hurry(self) -> None:
        assert self.compiled.hurry() == self.reference.hurry()

    @rule()
    def abandon(self) -> None:
        assert self.compiled.abandon() == self.reference.abandon()

    @rule()
    def fork(self) -> None:
        # A new queue: the Handoff must read _pending afresh.
        self.reference.reset_after_fork()
        self.compiled.reset_after_fork()

    @invariant()
    def same_state(self) -> None:
        if hasattr(self, "reference"):
            assert state(self.compiled) == state(self.reference)


HandoffMachine.TestCase.settings = settings(
    max_examples=examples(300), stateful_step_count=40, deadline=None
)
test_the_handoff_is_admission_offer = HandoffMachine.TestCase


def test_an_access_log_offers_through_the_handoff(tmp_path: Any) -> None:
    """With the C core, log._offer is a Handoff on the log's own Admission."""
    log = AccessLog(tmp_path / "access.log", format="common")
    try:
        assert _core.speedups is not None
        assert type(log._offer) is _core.speedups.Handoff
        assert log._offer.admission is log._admission  # type: ignore[attr-defined]
        assert log._offer(make_record()) is True
    finally:
        stats = log.close()
    assert stats.written == 1
    assert log._offer(make_record()) is False  # closed


def test_a_handoff_checks_its_arguments() -> None:
    assert _core.handoff is not None
    handoff = _core.handoff(Admission(max_queue=2, batch_size=1, policy="drop"))
    with pytest.raises(TypeError):
        handoff()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        handoff(make_record(), make_record())  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        handoff(record=make_record())  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        _core.handoff(object())  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        handoff.admission = None  # type: ignore[attr-defined]


def test_errors_from_the_admission_propagate() -> None:
    """A queue that is not a queue, a broken flag: the same exception as the reference."""

    class Broken(Admission):
        __slots__ = ()

    for attribute, value in [("_pending", None), ("_closed", object()), ("_wake_at", "x")]:
        reference = Broken(max_queue=2, batch_size=1, policy="drop")
        compiled = Broken(max_queue=2, batch_size=1, policy="drop")
        if attribute == "_closed":
            # bool() of it raises.
            value = type("Unsure", (), {"__bool__": lambda self: 1 / 0})()
        setattr(reference, attribute, value)
        setattr(compiled, attribute, value)
        assert _core.handoff is not None
        record = make_record()
        expected = outcome(reference.offer, record)
        assert expected[0] == "raised"
        assert outcome(_core.handoff(compiled), record) == expected


def test_a_handoff_keeps_no_reference_to_a_record() -> None:
    assert _core.handoff is not None
    admission = Admission(max_queue=4, batch_size=2, policy="drop")
    handoff = _core.handoff(admission)
    record = make_record()
    before = sys.getrefcount(record)
    for _ in range(10_000):
        handoff(record)
        admission._wake_at = 1
        admission.take()
    admission.close()
    for _ in range(1_000):
        assert handoff(record) is False
    assert admission.take() == []
    assert sys.getrefcount(record) == before


def test_threads_offer_through_one_handoff() -> None:
    """Threads offer while a writer takes: every accepted record is taken exactly once
    (free-threaded CPython runs them truly at once)."""
    assert _core.handoff is not None
    admission = Admission(max_queue=64, batch_size=16, policy="drop")
    handoff = _core.handoff(admission)
    threads, per_thread = 8, 5_000
    accepted = [0] * threads
    taken: list[Record] = []
    done = threading.Event()

    def offer(slot: int) -> None:
        for i in range(per_thread):
            accepted[slot] += handoff(make_record(path=b"/%d/%d" % (slot, i)))

    def write() -> None:
        while not done.is_set():
            admission.gather(0.001)
            taken.extend(admission.take())

    writer = threading.Thread(target=write)
    writer.start()
    offerers = [threading.Thread(target=offer, args=(slot,)) for slot in range(threads)]
    for thread in offerers:
        thread.start()
    for thread in offerers:
        thread.join()
    done.set()
    admission.close()
    writer.join()
    while batch := admission.take():
        taken.extend(batch)
    assert len(taken) == sum(accepted) > 0
    assert len({id(record) for record in taken}) == len(taken)
    assert admission.counts()[0] == len(taken)
