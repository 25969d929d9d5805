"""Admission: the bounded hand-off between request paths and the writer thread.

This is the only code that runs for every request, so its shape follows from one
measurement: an uncontended ``threading.Lock`` round trip costs six to thirteen times
what a ``deque.append`` does.  The hot path therefore takes no lock.  It
appends to the queue (``_queue``: a deque, or the C core's ring, each of whose
operations is atomic with or without the GIL) after checking the bound, and takes a
lock only on the rare transitions: waking an idle writer, refusing a record, waiting
for room.

Counting follows the same split.  The writer counts what it takes, a lock counts what is
refused, and ``submitted`` is derived (taken + waiting + refused), so accepting a record
costs no counter at all.  A record is refused (counted) or accepted (then written or
failed), never both: a submitter that finds the queue closed after its append takes its
own record back if the writer has not taken it, and says so (see ``_withdraw``); and a
submitter that gives up waiting for room (a cancelled request) counts its record as
refused before the cancellation goes on.

The bound is checked before the append, not atomically with it: when T threads submit
at the same instant, up to T - 1 of them may pass a check that a neighbour's append
then makes stale, so the queue can hold ``max_queue + T - 1`` records for a moment.
An asyncio server submits from one thread and never exceeds ``max_queue``.

The queue is bounded in bytes too, by a budget (``max_queue_bytes``) of what its records
keep of the client's and the application's bytes (``_budget.queued_cost``: a packed
record's bytes, else ``record_cost``'s estimate).  Half of it is shared out: a record up
to ``budget / (2 * max_queue)`` bytes (an ordinary request) costs nothing more, since ``max_queue`` bounds how many there are.  A larger
record takes the slow path, ``_offer_large``: under the count lock its excess over that
share is charged against the other half, or it is refused like a record finding the
queue full (the first record charged always fits, so none waits for ever).  The writer
releases the excess of what it takes, found through ``_excess``, a map from the
record's id consulted only while it is not empty.

Wake-ups are edge-triggered.  The writer publishes ``_wake_at``, the queue length at
which it wants to be woken (1 when idle, ``batch_size`` while it gathers a batch,
never while it writes), and a submitter that reaches it notifies under the lock.
Both sides check the queue after publishing their half, so a wake-up cannot be lost;
the writer's waits still have a timeout as a backstop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator

from .. import _core
from .._options import DEFAULT_MAX_QUEUE_BYTES, Policy
from ..record._budget import queued_cost, record_cost
from ..record._record import Record
from ._queue import RecordQueue, new_queue

_NEVER = 1 << 62
# How long a sleeper waits before looking again on its own: the longest an idle writer
# takes to notice a reopen asked for by a signal handler, and a backstop against a lost
# wake-up, which the protocol above rules out.
_BACKSTOP_SECONDS = 1.0


class Admission:
    """The bounded queue, its overload policy and the counters of what it refused."""

    # Slots: the C hand-off (csrc/paths/handoff.c) reads four of them per request.
    __slots__ = (
        "_async_waiters", "_backlog", "_batch_size", "_charged", "_closed", "_cost",
        "_count_lock", "_excess", "_excess_room", "_hurry", "_lock", "_max_queue", "_pending",
        "_refused_unlocked", "_room", "_room_waiters", "_share", "_wait_for_room", "_wake_at",
        "_work", "after_close", "peak", "refused", "taken", "writer_ident",
    )  # fmt: skip

    def __init__(
        self,
        *,
        max_queue: int,
        batch_size: int,
        policy: Policy,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
    ) -> None:
        self._max_queue = max_queue
        # A record up to its share is bounded by max_queue; the rest is for the excess
        # of larger ones (the C hand-off reads the share once, as it does max_queue).
        self._share = max_queue_bytes // (2 * max_queue)
        self._excess_room = max_queue_bytes - self._share * max_queue
        self._batch_size = min(batch_size, max_queue)
        self._wait_for_room = policy == "wait"
        # What a record costs the budget: with the C core, the record may be one its
        # hand-off packed (and refused: the policy then brings it here).
        self._cost = record_cost if _core.Packed is None else queued_cost
        #: Called (on the submitter's thread) for each record refused because the queue
        #: was closed: the log says so, once (see AccessLog._refused_after_close).
        self.after_close: Callable[[], None] | None = None
        self._start_afresh()

    def _start_afresh(self) -> None:
        self._pending: RecordQueue = new_queue()
        self._closed = False
        self._hurry = False
        # Records the last take left behind (it takes at most a batch).
        self._backlog = False
        self._wake_at = _NEVER
        # Guards the sleep/wake protocol; the two conditions share it.
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._room = threading.Condition(self._lock)
        self._room_waiters = 0
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        # Guards the counters below and the writer's removal from the queue.
        self._count_lock = threading.Lock()
        # The writer thread's ident, which it sets as it starts (see _may_wait).
        self.writer_ident: int | None = None
        self.taken = 0
        self.refused = 0
        # Records refused by offer_unlocked, one item each: a deque's append takes no
        # lock of ours (see offer_unlocked), and counts() adds its length.
        self._refused_unlocked: deque[None] = deque()
        self.peak = 0
        # The excess charged for the queued records over their share, and each one's
        # by its id (a list: the same record may be queued twice).
        self._charged = 0
        self._excess: dict[int, list[int]] = {}

    def reset_after_fork(self) -> None:
        """In a forked child: forget the parent's records, locks and waiters.

        Records queued in the parent are the parent's to write; locks may have been
        held by a parent thread that does not exist in the child.  The child starts with
        an empty queue, fresh locks and zero counters, which then count its own records.
        """
        self._start_afresh()

    # -- request side ------------------------------------------------------------------

    def submit(self, record: Record) -> bool:
        """Hand ``record`` to the writer; return False if it was refused (and counted).

        Under ``drop`` this never blocks; under ``wait`` it blocks the calling thread
        until there is room, so call :meth:`submit_async` from an event loop instead.
        """
        if self.offer(record):
            return True
        if self._may_wait():
            return self._submit_blocking(record)
        self._count_refused(record)
        return False

    def _may_wait(self) -> bool:
        """Whether a submitter that found no room waits for it (or is refused now).

        Only under ``wait``, and never on the writer thread itself: code the writer
        calls (a logging handler behind a LoggingSink, a filter) that submits to its own
        log would wait for room that only the writer makes, and every request thread
        would then wait behind it for ever.  Its record is refused and counted instead,
        as under ``drop``.  Checked only here, where a submitter is about to wait, so
        the request path's hand-off pays nothing for it.
        """
        return (
            self._wait_for_room and not self._closed and threading.get_ident() != self.writer_ident
        )

    def offer(self, record: Record) -> bool:
        """Accept ``record`` if there is room now; refuse without counting otherwise."""
        # Hot path, once per request: no formatting, no I/O, and no lock except on the
        # rare transitions that wake the writer (see the module docstring).
        pending = self._pending
        if len(pending) < self._max_queue and not self._closed:
            if self._cost(record) > self._share:
                return self._offer_large(record)
            pending.append(record)
            return self._appended(record)
        return False

    def _appended(self, record: Record) -> bool:
        """After ``record``'s append: wake the writer if it asked, and answer whether
        the record is accepted (not if a close came first and it could be withdrawn)."""
        if len(self._pending) >= self._wake_at:
            self._wake_writer()
        if self._closed:
            return not self._withdraw(record)
        return True

    def _offer_large(self, record: Record) -> bool:
        """Accept a record over its share if the byte budget has room for its excess.

        The slow path of :meth:`offer` (and of the C hand-off), for records above
        ``budget / (2 * max_queue)``: rare unless clients send big requests.
        """
        with self._count_lock:
            if not self._append_large_locked(record):
                return False
        return self._appended(record)

    def _append_large_locked(self, record: Record) -> bool:
        # Appended under the count lock, which take() removes under, so that the
        # writer finds the excess of every charged record it takes.
        pending = self._pending
        if len(pending) >= self._max_queue or self._closed:
            return False
        excess = self._cost(record) - self._share
        if excess > 0:
            # (Within its share, a record the C hand-off could not measure.)
            if not self._fits(excess):
                return False
            self._charged += excess
            self._excess.setdefault(id(record), []).append(excess)
        pending.append(record)
        return True

    def _fits(self, excess: int) -> bool:
        # The first charged record always fits: one larger than the whole budget (a
        # record the application built, which no middleware cut) must not wait for ever.
        return not self._charged or self._charged + excess <= self._excess_room

    def _no_room(self, record: Record) -> bool:
        """Whether ``record`` would be refused now for want of room (records or bytes)."""
        if len(self._pending) >= self._max_queue:
            return True
        excess = self._cost(record) - self._share
        return excess > 0 and not self._fits(excess)

    def _release(self, record: Record) -> None:
        # Under the count lock, for a record leaving the queue.
        excesses = self._excess.get(id(record))
        if excesses:
            self._charged -= excesses.pop()
            if not excesses:
                del self._excess[id(record)]

    def offer_unlocked(self, record: Record) -> None:
        """Queue ``record`` if there is room now, else count it refused, taking no lock.

        For a record handed over by a finalizer (a response or an exchange its server
        dropped): the garbage collector runs finalizers on whatever thread allocates,
        at any allocation, possibly while that thread holds this queue's locks, which
        are not reentrant.  So nothing here waits for one: the writer is woken only if
        its lock is free at once (otherwise it finds the record within its backstop),
        and a refusal is counted in a deque.  A record appended as the queue closes is
        taken back unless the writer took it, as ``_withdraw`` does with the lock.
        """
        pending = self._pending
        if self._cost(record) > self._share:
            self._offer_large_unlocked(record)
            return
        if len(pending) < self._max_queue and not self._closed:
            pending.append(record)
            if not self._closed:
                if self._lock.acquire(blocking=False):
                    try:
                        self._wake_writer_locked()
                    finally:
                        self._lock.release()
                return
            if not pending.withdraw(record):  # the writer took it: written or failed
                return
        self.refuse_unlocked()

    def _offer_large_unlocked(self, record: Record) -> None:
        # A record over its share is charged under the count lock, which this thread
        # may hold already: taken only if free at once, else the record is refused.
        # Closed is checked under it, so the writer's last take (under it too) comes
        # after the append and takes the record, or the record sees the queue closed.
        if not self._count_lock.acquire(blocking=False):
            self.refuse_unlocked()
            return
        try:
            accepted = self._append_large_locked(record)
        finally:
            self._count_lock.release()
        if not accepted:
            self.refuse_unlocked()
        elif self._lock.acquire(blocking=False):
            try:
                self._wake_writer_locked()
            finally:
                self._lock.release()

    def refuse_unlocked(self) -> None:
        """Count a record refused, taking no lock (see :meth:`offer_unlocked`)."""
        self._refused_unlocked.append(None)

    def refuse(self) -> None:
        """Count a record refused that its submitter cannot offer again (it cannot wait)."""
        self._count_refused()

    async def submit_async(self, record: Record) -> bool:
        """Like :meth:`submit`, but under ``wait`` it awaits room on the running loop."""
        if self.offer(record):
            return True
        if not self._may_wait():
            self._count_refused(record)
            return False
        loop = asyncio.get_running_loop()
        while not self._closed:
            room = loop.create_future()
            with self._lock:
                if self._no_room(record) and not self._closed:
                    self._async_waiters.append((loop, room))
                    self._wake_writer_locked()
                    self._saw_full()
                else:
                    room.cancel()
            if not room.cancelled():
                with self._refused_if_given_up():
                    await room
            if self.offer(record):
                return True
        self._count_refused()
        return False

    def _submit_blocking(self, record: Record) -> bool:
        while True:
            with self._refused_if_given_up(), self._lock:
                while self._no_room(record) and not self._closed:
                    self._room_waiters += 1
                    self._wake_writer_locked()
                    self._saw_full()
                    try:
                        self._room.wait(_BACKSTOP_SECONDS)
                    finally:
                        self._room_waiters -= 1
            if self._closed:
                self._count_refused()
                return False
            if self.offer(record):
                return True

    @contextlib.contextmanager
    def _refused_if_given_up(self) -> Iterator[None]:
        # A submitter that stops waiting for room by an exception (a request cancelled
        # by a server's shutdown timeout, a signal handler raising in a waiting thread)
        # had its record submitted: it is counted as refused before the exception goes
        # on.  Only around the wait: the record is not in the queue then, so it cannot
        # be both queued and refused.
        try:
            yield
        except BaseException:
            self._count_refused()
            raise

    def _wake_writer(self) -> None:
        with self._lock:
            self._wake_writer_locked()

    def _wake_writer_locked(self) -> None:
        if self._wake_at != _NEVER:
            self._wake_at = _NEVER
            self._work.notify()

    def _count_refused(self, record: Record | None = None) -> None:
        with self._count_lock:
            self.refused += 1
            closed = self._closed
            if not closed and self.peak < self._max_queue:
                waiting = len(self._pending)
                if (
                    record is None
                    or waiting >= self._max_queue
                    or self._cost(record) <= self._share
                ):
                    # Refused while open: the queue was full when its bound was checked
                    # (the writer may have taken records since).
                    self.peak = self._max_queue
                else:
                    # A record over its share, refused by the byte budget with records
                    # to spare: the peak is what waits.
                    self.peak = max(self.peak, waiting)
        after_close = self.after_close
        if closed and after_close is not None:
            after_close()

    def _saw_full(self) -> None:
        # A submitter waits for room: the queue is full.  Rare (the queue stays full
        # only behind a slow sink), so a lock costs nothing that matters.
        with self._count_lock:
            self.peak = max(self.peak, len(self._pending))

    def _withdraw(self, record: Record) -> bool:
        """Take ``record`` back out of the queue unless the writer has taken it.

        A submitter that passed the closed check just before close() may append after
        the writer's last look.  Whether the writer took the record decides what the
        submitter answers: taken, it will be written or failed (accepted); still
        queued, it is removed here and the caller counts it refused.  The record is
        looked for by identity (the queue's withdraw, atomic as its take is).
        """
        with self._count_lock:
            if self._pending.withdraw(record):
                self._release(record)
                return True
            return False

    # -- writer side -------------------------------------------------------------------

    def gather(self, window: float, *, idle: float | None = None) -> bool:
        """Wait for records to take: for the first, then up to ``window`` seconds more
        (or until ``batch_size`` records wait) so that one write carries many lines.
        A backlog left by the last take is taken at once.  ``idle``: wait at most this
        long for the first, and return if none came (the writer has lines whose
        confirmation it waits for when no record comes).  Whether flush() or close()
        hurried it."""
        pending = self._pending
        with self._lock:
            if not pending and not self._closed and not self._hurry:
                self._wake_at = 1
                # One wait, not a loop: the writer also has work that comes without a
                # record (a reopen asked for by a signal handler, which cannot take
                # a lock), so it looks around at least once per backstop period.
                self._work.wait(_BACKSTOP_SECONDS if idle is None else min(idle, _BACKSTOP_SECONDS))
            if (
                window > 0
                and (pending or idle is None)
                and len(pending) < self._batch_size
                and not self._closed
                and not self._hurry
                and not self._backlog
            ):
                self._wake_at = self._batch_size
                if len(pending) < self._batch_size:
                    self._work.wait(window)
            self._wake_at = _NEVER
            hurried = self._hurry or self._closed
            self._hurry = False
        return hurried

    def take(self) -> list[Record]:
        """Remove and return at most ``batch_size`` of the waiting records (``[]`` if none).

        Never more than a batch: behind a slow sink the queue is always full, and a
        writer that took it whole would hold a second queue's worth of records (and
        their formatting) while the first refills: in the benchmark's overload
        scenario that made a full log hold several times what its records take.
        """
        pending = self._pending
        with self._count_lock:
            waiting = len(pending)
            count = min(waiting, self._batch_size)
            batch = pending.take(count)
            if self._excess:
                for record in batch:
                    self._release(record)
            self.taken += count
            if waiting > self.peak:
                self.peak = waiting
        # Only the writer thread takes, so only it reads and writes this.
        self._backlog = waiting > count
        if self._room_waiters or self._async_waiters:
            self._announce_room()
        return batch

    def _announce_room(self) -> None:
        with self._lock:
            self._room.notify_all()
            waiters, self._async_waiters = self._async_waiters, []
        for loop, room in waiters:
            # A closed loop raises RuntimeError; nobody awaits its future any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, room)

    def hurry(self) -> int:
        """Wake the writer to take what waits now, without gathering; return accepted so far."""
        with self._lock:
            self._hurry = True
            self._work.notify()
        with self._count_lock:
            return self.taken + len(self._pending)

    def close(self) -> None:
        """Refuse new records from now on and wake every sleeper."""
        self._closed = True
        with self._lock:
            self._work.notify_all()
        self._announce_room()

    def abandon(self) -> int:
        """Remove and return the count of records the writer will never take."""
        with self._count_lock:
            count = self._pending.drain()
            self.taken += count
            self._charged = 0
            self._excess.clear()
        return count

    @property
    def closed(self) -> bool:
        """Whether the queue refuses new records."""
        return self._closed

    def closed_and_empty(self) -> bool:
        """Whether the queue refuses new records and holds none."""
        if not self._closed:
            return False
        with self._count_lock:
            return len(self._pending) == 0

    def held_back(self) -> int:
        """How many submitters wait for room (policy "wait"), for reports: read
        without the lock, a moment's count."""
        return self._room_waiters + len(self._async_waiters)

    def counts(self) -> tuple[int, int, int, int]:
        """``(taken, waiting, refused, peak)`` read together.

        The peak is at least what this snapshot sees: the writer updates it only when
        it takes, and behind a stalled sink it takes nothing while the queue fills.
        """
        with self._count_lock:
            waiting = len(self._pending)
            if waiting > self.peak:
                self.peak = waiting
            return self.taken, waiting, self.refused + len(self._refused_unlocked), self.peak


def _resolve(room: asyncio.Future[None]) -> None:
    if not room.done():
        room.set_result(None)
