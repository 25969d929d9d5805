"""The writer thread: take a batch, format it, write it, count what happened.

Everything slow about an access log happens here, off the request path: formatting,
escaping, timestamps and the write system call.  The thread never dies of an error in
any of them, nor of anything a format or a predicate does (returning something other
than bytes, raising even a ``BaseException``, raising an error whose ``repr()`` raises):
the affected records are counted (failed, or logged as they came for a predicate).  A
failed write loses its batch (counted as ``failed``), and the next batch tries the sink
again, so logging resumes by itself when the disk has room or the reader comes back.

A sink may confirm lines after its ``write`` returned (``Destination.confirms_later``:
RELP's acknowledgements).  Its lines are then ``unconfirmed``: neither written nor
failed, nor settled for flush(), until the sink's running total ``confirmed`` moves, which
the writer folds into ``written`` after each write; when no record came within
``flush_interval`` (or flush() or close() hurried it), it asks the sink to ``settle()``,
waiting for the confirmations.
close() giving up counts the unconfirmed lines as failed, once.

Lost records are reported by the monitor (``_health``), which says how many and names
``last_failure``, the cause the writer saw last: the writer itself reports on stderr
(at most once per ``_REPORT_EVERY`` seconds) only what loses nothing, such as a filter
that raised or a reopen that failed, and its own end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from .._core import CompiledFirst
from .._errors import describe, report_on_stderr
from ..formats._apache import ApacheFormat, Format
from ..formats._json import JsonFormat
from ..formats._logfmt import LogfmtFormat
from ..formats._templates import Template
from ..record._record import Record
from ..selection._filters import Select
from ..sinks._files import Destination, Sink
from ._admission import Admission

_REPORT_EVERY = 5.0
_WATCH_EVERY = 1.0


def packs_for(fmt: Format, select: Select | None) -> bool:
    """Whether the C hand-off may queue this log's records packed (``_core.Packed``).

    Only for a writer that hands each batch to a format whose C core reads packed
    records (the common and combined lines, templates, JSON, logfmt), with at most the
    query redaction in between (``Select.takes_packed``): a filter, a keep predicate or
    a format in Python reads Records.  A subclass of one of those formats packs too
    unless it formats otherwise (its own ``format_batch`` or ``format_compiled``: a
    ``JsonFormat`` with ``reads_extras = frozenset()`` still packs).  Any batch the C
    core leaves to Python is unpacked first (``_core.CompiledFirst``).
    """
    cls = type(fmt)
    return (
        cls.format_batch is CompiledFirst.format_batch
        and any(
            issubclass(cls, base) and cls.format_compiled is base.format_compiled
            for base in _READS_PACKED
        )
        and (select is None or select.takes_packed)
    )


#: The formats whose C core reads packed records (csrc/formats/clf.c, template.c, json.c).
_READS_PACKED = (ApacheFormat, JsonFormat, LogfmtFormat, Template)


class Writer:
    """Owns the thread that drains an :class:`Admission` into a :class:`Sink`."""

    def __init__(
        self,
        admission: Admission,
        sink: Destination,
        fmt: Format,
        *,
        window: float,
        watch: bool,
        lost_signal: Callable[[], str | None] | None = None,
        select: Select | None = None,
    ) -> None:
        self._admission = admission
        self._sink = sink
        self._format = fmt
        # What to keep of each batch, and how to rewrite it; None when nothing is asked.
        self._select = select
        self._window = window
        self._watch = watch
        # Names the reopen_signal once boundlog's handler is no longer installed.
        self._lost_signal = lost_signal
        # Reopen requests are a counter the writer catches up with, so that a signal
        # handler can ask by incrementing it (request_reopen).
        self.reopens_requested = 0
        self._start_afresh()

    def _start_afresh(self) -> None:
        # Set when close() gave up waiting: whatever the thread finishes afterwards is
        # no longer counted, because the final counts were already reported.
        self.abandoned = False
        self.in_flight = 0
        # Lines handed to a sink that confirms them later, not yet confirmed; and how
        # far into the sink's running total ``confirmed`` the counters went.
        self.unconfirmed = 0
        self._confirmed_seen = 0
        # Whether flush() or close() hurried the last gather (see _serve).
        self._hurried = False
        self.written = 0
        self.failed = 0
        self.filtered = 0
        self.write_errors = 0
        self.bytes_written = 0
        self.batches = 0
        # For the monitor's loss reports (_health): when the write in progress began
        # (None between writes), and what last lost records.
        self.write_started: float | None = None
        self.last_failure: str | None = None
        # Makes the count of reopen requests go up by one each (see request_reopen); new
        # in a forked child, where another thread of the parent may have held it.
        self._requests_lock = threading.RLock()
        # Records taken and dealt with (written, filtered or failed), for flush().
        self.settled = 0
        # The thread has ended: whatever it will ever settle is settled.
        self.ended = False
        # The bytes being written and the length of their fragment-closing prefix.
        self._in_flight_data: tuple[bytes, int] | None = None
        self.reopens_done = self.reopens_requested
        # Guards the counters against close() giving up on the thread half-way.
        self._accounting = threading.Lock()
        self._next_watch = 0.0
        # A forked child asks once, before its first batch, whether the file it
        # inherited is still the one at the path (see _between_batches).
        self._inherited_unchecked = False
        self._settled_changed = threading.Condition()
        # A failed write may leave part of a line in the sink; the next write starts
        # with a newline so that the fragment never joins the next record's line.
        self._fragment_open = False
        # The file's size just past that fragment (None: not a regular file).
        self._fragment_end: int | None = None
        self._last_report = -_REPORT_EVERY
        self._unreported = 0
        self.thread = threading.Thread(target=self._run, name="boundlog-writer", daemon=True)

    def reset_after_fork(self) -> None:
        """In a forked child: zero the counters and start a writer thread of its own."""
        self._start_afresh()
        self._inherited_unchecked = True
        if self._select is not None:
            self._select.reseed()
        self.thread.start()

    def _run(self) -> None:
        # Before anything can submit from this thread (see Admission._may_wait).
        self._admission.writer_ident = threading.get_ident()
        try:
            self._serve()
        except BaseException as error:
            # Only a defect in boundlog itself gets here: every call into user code and
            # every batch is guarded in _serve.
            self._stop(error)
        finally:
            # A flush() that raced close() may wait for a record its submitter took
            # back from the closing queue (refused, never settled): the end of the
            # thread ends its wait, as everything accepted is settled by then.
            with self._settled_changed:
                self.ended = True
                self._settled_changed.notify_all()

    def _serve(self) -> None:
        admission = self._admission
        sink = self._sink
        if isinstance(sink, Sink) and sink.unavailable is not None:
            # A FIFO nobody reads: the server runs, and records wait in the queue.
            report_on_stderr(
                f"{sink.unavailable}; until then records wait in the queue, and the "
                "policy decides what happens to those that find it full"
            )
            if not sink.open_when_read(admission.closed_and_empty):
                # close() gave up waiting, and counted what the queue held; or it was
                # closed with nothing queued.
                return
        while True:
            # Read before the take: a take that found nothing after the queue closed is
            # the last one.  Closed after the take, the queue may have got records
            # (accepted before close) between the two, which the next take writes.
            closed = admission.closed
            if not (self._hurried and self.unconfirmed):
                # With lines awaiting confirmation, a record that comes within the
                # window takes them along (the confirmations are read after its write);
                # if none comes, they are waited for (below).  Once flush() or close()
                # hurried the writer, it gathers nothing more until they are confirmed.
                idle = self._window if self.unconfirmed else None
                self._hurried = admission.gather(self._window, idle=idle)
            with self._accounting:
                if self.abandoned:
                    return
                # Taken under the lock abandon() counts by: a batch is in flight, and
                # counted as lost if close() gives up, from the moment it leaves the
                # queue, never neither queued nor in flight.
                batch = admission.take()
                self.in_flight = len(batch)
            # The last resorts, for what no narrower guard foresaw: an error between
            # batches is reported and the batch still written; an error in a batch
            # loses that batch, counted; either way the writer goes on.
            try:
                self._between_batches(batch)
            except BaseException as error:
                self._report(f"unexpected error between two batches: {describe(error)}")
            unconfirmed = 0
            if batch:
                try:
                    unconfirmed = self._write_batch(batch)
                except BaseException as error:
                    self._count_lost(error)
            with self._accounting:
                self.in_flight = 0
                self._in_flight_data = None
                if self.abandoned:
                    return
            if not batch:
                if self.unconfirmed:
                    self._settle()
                self._hurried = False
                if closed:
                    self._give_up_unconfirmed()
                    return
                continue
            # A batch's unconfirmed lines settle as they are confirmed (_fold).
            settled = len(batch) - unconfirmed
            # Freed now, not when the next take replaces it: held over the wait for the
            # next batch, a written batch is memory outside the queue's bound, and its
            # records are no longer in the processor's caches when they are freed.  And
            # before flush() hears of it: once flush() returns, nothing of what it
            # waited for is held here.
            del batch
            self._add_settled(settled)
            self._fold()

    def _add_settled(self, count: int) -> None:
        if count:
            with self._settled_changed:
                self.settled += count
                self._settled_changed.notify_all()

    def _settle(self) -> None:
        """Wait for the sink to confirm the lines handed over, and count them."""
        self.write_started = time.monotonic()
        try:
            self._sink.settle()
        except BaseException as error:
            # A defect: the lines stay unconfirmed, counted at close if never confirmed.
            self._report(f"unexpected error waiting for {self._sink.name}: {describe(error)}")
        finally:
            self.write_started = None
        self._fold()

    def _fold(self) -> None:
        """Count the lines the sink confirmed since the last look as written."""
        with self._accounting:
            if self.abandoned:
                return
            confirmed = self._sink.confirmed
            fresh = min(max(confirmed - self._confirmed_seen, 0), self.unconfirmed)
            self._confirmed_seen = confirmed
            self.unconfirmed -= fresh
            self.written += fresh
        self._add_settled(fresh)

    def _give_up_unconfirmed(self) -> None:
        """The writer ends with lines the sink never confirmed (it raised): failed."""
        with self._accounting:
            if self.abandoned or not self.unconfirmed:
                return
            lost, self.unconfirmed = self.unconfirmed, 0
            self.failed += lost
        self.last_failure = f"{self._sink.name} never confirmed {lost} record(s)"
        self._add_settled(lost)

    def _between_batches(self, batch: list[Record]) -> None:
        # The next batch goes to the reopened file, none after it to the old one.
        if self.reopens_done != self.reopens_requested:
            self._reopen(self.reopens_requested)
        elif batch and self._inherited_unchecked:
            # A server sends its reopen signal to every worker (gunicorn's master
            # forwards SIGUSR1), but a worker still starting has not installed its
            # handler yet: the signal is lost there, and the worker would write to the
            # rotated file for good (gunicorn's own logger does).  Its first records
            # come once it serves, so its handler is in place by then: one look at the
            # path before the first batch covers the signals it may have missed.
            self._inherited_unchecked = False
            if self._sink.replaced():
                self._reopen(self.reopens_requested)
        elif batch and (self._watch or self._lost_signal is not None):
            self._look_around()

    def _count_lost(self, error: BaseException) -> None:
        with self._accounting:
            if self.abandoned:
                return
            lost, self.in_flight = self.in_flight, 0
            self.failed += lost
        self.last_failure = f"lost {lost} record(s) to an unexpected error: {describe(error)}"

    def _stop(self, error: BaseException) -> None:
        # The thread is about to end: refuse records from now on, release every
        # submitter waiting for room, and count what is left as failed, so that the
        # counters still add up and no request waits for a writer that is gone.
        admission = self._admission
        admission.close()
        left = admission.abandon()
        with self._accounting:
            if not self.abandoned:
                left += self.in_flight + self.unconfirmed
                self.in_flight = self.unconfirmed = 0
                self.failed += left
        with self._settled_changed:
            self.settled += left
            self._settled_changed.notify_all()
        self.last_failure = (
            f"the writer thread stopped, the log refuses records from now on: {describe(error)}"
        )
        self._report(self.last_failure)

    def abandon(self) -> tuple[int, int]:
        """Give up on a stuck sink: ``(lines delivered, lines lost)`` of the batch in flight.

        The thread may still be blocked in a write; it starts no further chunk and
        counts nothing more.  The chunk blocked at this moment is counted as lost even
        if it completes later.
        """
        with self._accounting:
            self.abandoned = True
            self._sink.stopped = True
            if self._sink.confirms_later:
                # What the sink confirmed and the writer did not count yet is written
                # (a line of the batch under way too); all else in flight is lost.
                pending = self.in_flight + self.unconfirmed
                fresh = min(max(self._sink.confirmed - self._confirmed_seen, 0), pending)
                return fresh, pending - fresh
            if self._in_flight_data is None:
                return 0, self.in_flight
            data, prefix = self._in_flight_data
            delivered = data.count(b"\n", prefix, max(prefix, self._sink.delivered))
            return delivered, self.in_flight - delivered

    def wait_settled(self, target: int, timeout: float | None) -> bool:
        """Wait until ``target`` records have been dealt with; False on timeout."""
        with self._settled_changed:
            return self._settled_changed.wait_for(
                lambda: self.settled >= target or self.ended, timeout
            )

    def counts(self) -> tuple[tuple[int, int, int, int, int, int], tuple[int, int, int, int]]:
        """``(written, filtered, failed, write_errors, bytes_written, batches)`` and the
        queue's ``counts()``, at one moment: under the lock the writer takes batches and
        counts them by, so that what is neither queued nor settled is the batch in
        flight.  (The queue's count lock is taken inside this one, as take() does.)"""
        with self._accounting:
            return (
                (self.written, self.filtered, self.failed, self.write_errors,
                 self.bytes_written, self.batches),
                self._admission.counts(),
            )  # fmt: skip

    def request_reopen(self) -> int:
        """Count one more request to reopen; return the count the writer must reach.

        From any thread, and from a signal handler, which runs between two bytecodes of
        the main thread: a plain ``+= 1`` from several threads loses requests, and
        without the GIL a stale store can move the count back below what a waiter
        waits for, which then times out.  A reentrant lock, held for two bytecodes:
        a handler that interrupts its own thread inside it takes it again, and the two
        requests then share one count, which one reopen after both answers.
        """
        with self._requests_lock:
            self.reopens_requested += 1
            return self.reopens_requested

    def wait_reopened(self, target: int, timeout: float | None) -> bool:
        """Wait until the ``target``-th reopen request has been carried out."""
        with self._settled_changed:
            return self._settled_changed.wait_for(
                lambda: self.reopens_done >= target or self.ended, timeout
            )

    def _reopen(self, request: int) -> None:
        try:
            before = self._sink.identity()
            error = self._sink.reopen()
            if self._sink.identity() != before:
                # A line a failed write cut short stays in the old file: the new one
                # starts with a whole line, not with the newline that would close it.
                self._fragment_open = False
            if error is not None:
                self.write_errors += 1
                self._report(f"cannot reopen {self._sink.name}, still writing to the old "
                             f"file: {error.strerror or error}")  # fmt: skip
        finally:
            # Done even if it raised: a request that fails once is not retried before
            # every batch, and nobody waits for it in vain.
            with self._settled_changed:
                self.reopens_done = request
                self._settled_changed.notify_all()

    def _look_around(self) -> None:
        # At most once a second: a stat per batch would be cheap, but not free.
        now = time.monotonic()
        if now < self._next_watch:
            return
        self._next_watch = now + _WATCH_EVERY
        lost = self._lost_signal() if self._lost_signal is not None else None
        if lost is not None:
            # A server installed its own handler after ours (gunicorn's master does,
            # and resets signals in each worker): say so, and watch the file instead.
            self._report(
                f"another handler replaced boundlog's {lost} handler (reopen_signal); "
                f"reopening when {self._sink.name} is moved or removed instead"
            )
            self._lost_signal = None
            self._watch = True
        if self._watch and self._sink.replaced():
            self._reopen(self.reopens_requested)

    def _write_batch(self, batch: list[Record]) -> int:
        """Write ``batch``; return how many of its lines the sink confirms later."""
        filtered = 0
        if self._select is not None:
            kept = self._select(batch, self._report)
            filtered = len(batch) - len(kept)
            batch = kept
        data, unformattable = self._format_batch(batch)
        lines = len(batch) - unformattable
        if self._fragment_open and self._fragment_emptied():
            self._fragment_open = False
        prefix = 1 if self._fragment_open else 0
        if prefix:
            data = b"\n" + data
        with self._accounting:
            if self.abandoned:
                return 0
            self.filtered += filtered
            self.failed += unformattable
            self.in_flight = lines
            self._sink.delivered = 0
            self._in_flight_data = (data, prefix)
        if not lines:
            return 0
        self.write_started = time.monotonic()
        try:
            written, error = self._sink.write(data)
        finally:
            self.write_started = None
        with self._accounting:
            if self.abandoned:
                return 0
            self.in_flight = 0
            self.bytes_written += written
            if error is None:
                self._fragment_open = False
                self.batches += 1
                if self._sink.confirms_later:
                    self.unconfirmed += lines
                    return lines
                self.written += lines
                return 0
            complete = data.count(b"\n", prefix, written)
            if written:
                self._fragment_open = data[written - 1] != 0x0A
            if written > prefix and data[written] == 0x0A:
                # Only the newline is missing: the record is all in the sink, and the
                # newline that ends it opens the next write.  Counted as failed, it
                # would be a line in the file that the counters call lost.
                complete += 1
            if self._fragment_open:
                self._fragment_end = self._sink.size()
            self.written += complete
            self.failed += lines - complete
            self.write_errors += 1
        self.last_failure = f"cannot write to {self._sink.name}: {error.strerror or error}"
        return 0

    def _fragment_emptied(self) -> bool:
        """Whether the file holding the open fragment was emptied since (logrotate's
        copytruncate copies the file away and truncates it in place: same file, no
        reopen).  The fragment went with the copy; the newline that would close it
        would start the emptied file with an empty line.  Asked only after a failed
        write, so it costs a stat then and nothing otherwise."""
        end = self._fragment_end
        if end is None:
            return False
        size = self._sink.size()
        return size is not None and size < end

    def _format_batch(self, batch: Sequence[Record]) -> tuple[bytes, int]:
        # BaseException too: a format is user code, and a SystemExit raised in it would
        # otherwise end this thread without a word.
        try:
            return self._formatted(batch), 0
        except BaseException as error:
            first_error = error
        # Isolate the records that cannot be formatted; keep the others.
        parts = []
        bad = 0
        for record in batch:
            try:
                parts.append(self._formatted((record,)))
            except BaseException:
                bad += 1
        if bad:
            # (None failed alone: whatever made the batch fail, it passed.)
            self.last_failure = f"cannot format {bad} record(s): {describe(first_error)}"
        return b"".join(parts), bad

    def _formatted(self, records: Sequence[Record]) -> bytes:
        data = self._format.format_batch(records)
        if not isinstance(data, bytes):
            raise TypeError(
                f"{type(self._format).__name__}.format_batch() returned "
                f"{type(data).__name__}, not bytes: it must return the lines encoded"
            )
        return data

    def _report(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_report < _REPORT_EVERY:
            self._unreported += 1
            return
        if self._unreported:
            message += f" ({self._unreported} similar errors not shown)"
        self._last_report = now
        self._unreported = 0
        report_on_stderr(message)
