"""``AccessLog``: the object users create; it wires admission, writer and sink together."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypedDict

from .. import _core
from .._errors import ConfigurationError, report_on_stderr
from .._options import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_MAX_QUEUE,
    DEFAULT_MAX_QUEUE_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_REDACTED_QUERY,
    OPTIONS,
    PROXY_HEADERS,
    Policy,
    checked_options,
    seconds_to_wait,
)
from ..formats._apache import Format, make_format
from ..formats._dev import DevFormat
from ..metrics._health import FINAL_REPORT_WAIT, LossReport, monitor
from ..metrics._metrics import PrometheusMetrics
from ..metrics._metrics import require_client as require_metrics_client
from ..metrics._otel import OpenTelemetryMetrics, metrics_option
from ..metrics._stats import Stats
from ..record._budget import RecordBudget
from ..record._record import Record, environ_names_of, extras_read_by
from ..selection._filters import Select, make_select
from ..sinks._files import Sink, SinkSpec, open_sink
from ..sinks._pathless import Pathless
from ._admission import Admission
from ._signals import SignalShare, drain_on_sigterm, terminate_after
from ._writer import Writer, packs_for

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter


class LogOptions(TypedDict, total=False):
    """``AccessLog``'s keywords, for a middleware that builds its log from them.

    Typed as ``**options: Unpack[LogOptions]``, so that a type checker or an editor
    catches a misspelt option (``max_qeue=``) where the middleware is made.  Each is
    defined in ``_options.OPTIONS``; a test keeps these equal to ``AccessLog``'s.
    """

    sink: SinkSpec
    format: str | Format
    policy: str
    max_queue: int
    batch_size: int
    max_record_bytes: int
    max_queue_bytes: int
    flush_interval: float
    utc: bool
    close_timeout: float
    reopen_signal: int | str | None
    watch: bool
    skip_paths: Iterable[str]
    skip_path_errors: bool
    skip_status: Iterable[int | range]
    min_duration: float
    sample: float
    keep: Callable[[Record], object] | None
    websockets: bool
    redact_query: Iterable[str]
    trusted_proxies: Iterable[str]
    proxy_header: str
    metrics: bool | str | Meter
    report_loss: bool


# Once close() gave up on a network sink and shut its socket down, the writer thread
# wakes at once and ends within a few system calls: this bounds the wait for it.
ABANDONED_WRITER_WAIT = 1.0
# The options make_select builds the writer's selection from.
SELECTION_OPTIONS = tuple(name for name, option in OPTIONS.items() if option.selects)


class AccessLog:
    """A bounded, non-blocking access log with its own writer thread.

    ``submit(record)`` hands a :class:`Record` over and returns whether it was
    accepted.  Under ``policy="drop"`` it never blocks: a full queue refuses the record
    and counts it in ``stats().dropped``.  Under ``policy="wait"`` it blocks the calling
    thread until there is room; asyncio code awaits ``submit_async(record)`` instead,
    which never blocks the event loop.

    What gets logged is decided on the writer thread, never on the request path:
    ``skip_paths``, ``skip_status``, ``min_duration``, ``sample`` and ``keep`` skip
    records (counted in ``stats().filtered``; ``skip_paths`` only those below status
    400 unless ``skip_path_errors=True``), ``trusted_proxies`` logs the client a
    trusted proxy forwarded for (in its ``proxy_header``: ``"x-forwarded-for"`` or
    ``"forwarded"``, and only that one), and ``redact_query`` hides credentials in query
    strings (see ``_filters``, ``_proxies`` and ``_redaction``).  The one exception,
    ``websockets=False``, costs less where it is: the ASGI middleware then makes no
    record of a websocket session at all (nothing is submitted, nothing counted).

    A record keeps at most ``max_record_bytes`` of what the client sent (path, query
    and header fields, see ``_budget``): a bigger request's record keeps only the
    header fields the log reads, its longest values cut and marked ``[...N bytes cut]``;
    the fields the application adds (``add_fields``) get what that leaves.

    ``max_queue_bytes`` bounds what the queued records keep of those bytes in total: a
    record up to ``max_queue_bytes / (2 * max_queue)`` of them costs nothing more, a
    larger one is refused (under ``drop``; it waits under ``wait``) when its excess
    over that share no longer fits in the other half, and is counted in ``dropped`` like
    a record that found the queue full.  A full queue holds at most
    ``max_queue * 1 KiB + max_queue_bytes``: about 30 MiB with the defaults.

    ``metrics=True`` (or ``"prometheus"``) keeps the counters in Prometheus too
    (prometheus_client, the ``prometheus`` extra; multiprocess mode works):
    ``boundlog_records_written_total`` and the others of ``_metrics``, labelled with
    the sink, brought up to date by the monitor thread once a second (``_health``),
    so that they move while the sink is stalled.
    ``metrics="opentelemetry"`` makes them OpenTelemetry observable instruments on the
    global MeterProvider's ``boundlog`` meter, and ``metrics=meter`` on that
    ``opentelemetry.metrics.Meter`` (opentelemetry-api, the ``opentelemetry`` extra):
    ``boundlog.records.processed`` and the others of ``_otel``, with a
    ``boundlog.sink`` attribute, read from the log when the SDK collects.

    Loss is reported on stderr (``report_loss=False`` turns it off, for those who poll
    ``stats()``): while records are dropped or fail, one line at most every 5 seconds
    says how many, over how long and why, and ``close()`` (and so the exit) writes the
    final totals if anything was lost in the log's life.
    """

    #: ``submit(record) -> bool``: hand over a record; True once it is accepted (it will
    #: be written or counted as failed), False when it was refused and counted as
    #: dropped.  Never blocks under ``drop``; under ``wait`` blocks while the queue is
    #: full.  Never formats, never touches the sink.
    submit: Callable[[Record], bool]
    #: ``await submit_async(record) -> bool``: :attr:`submit` for a coroutine; under
    #: ``wait`` it awaits room on the running loop instead of blocking it.
    submit_async: Callable[[Record], Coroutine[Any, Any, bool]]
    # For the integrations' request path: accepts a record if there is room now, and
    # refuses without counting otherwise, so a refusal must go on to submit.  With the
    # C core, a _speedups.Handoff: Admission.offer in C (csrc/paths/handoff.c).
    _offer: Callable[[Record], bool]

    def __init__(
        self,
        sink: SinkSpec = "stdout",
        format: str | Format = "combined",
        policy: str = "drop",
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        utc: bool = False,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        reopen_signal: int | str | None = None,
        watch: bool = False,
        skip_paths: Iterable[str] = (),
        skip_path_errors: bool = False,
        skip_status: Iterable[int | range] = (),
        min_duration: float = 0.0,
        sample: float = 1.0,
        keep: Callable[[Record], object] | None = None,
        websockets: bool = True,
        redact_query: Iterable[str] = DEFAULT_REDACTED_QUERY,
        trusted_proxies: Iterable[str] = (),
        proxy_header: str = PROXY_HEADERS[0],
        metrics: bool | str | Meter = False,
        report_loss: bool = True,
    ) -> None:
        # Every option is checked before the sink is opened: a log that cannot be
        # built must leave no descriptor (and no signal handler) behind.  locals() is
        # every keyword as given, by name; the values checked are taken from here on.
        options = checked_options(locals())
        self._policy: Policy = options["policy"]
        self._close_timeout: float | None = options["close_timeout"]
        # Read by the ASGI middleware, which makes no record of a session when it is False.
        self.websockets: bool = options["websockets"]
        self._reopen_on = self._reopen_share(options["reopen_signal"], reopen_signal)
        fmt = make_format(format, utc=options["utc"])
        select = make_select(**{name: options[name] for name in SELECTION_OPTIONS})
        prometheus, meter = metrics_option(metrics)
        if prometheus:
            # Before the sink is opened: a missing prometheus_client leaves nothing open.
            require_metrics_client()
        self._sigterm: SignalShare | None = None
        self._otel: OpenTelemetryMetrics | None = None
        self._sink = open_sink(sink)
        try:
            fmt = self._format_for_sink(fmt)
            self._learn_what_lines_read(fmt, select, options["max_record_bytes"])
            self._build(options, fmt, select, prometheus=prometheus, meter=meter)
            self._start()
        except BaseException:
            # A step failed, or an interrupt came: leave nothing behind.
            self._undo_start()
            raise

    def _reopen_share(self, number: int | None, given: object) -> SignalShare | None:
        """The share of ``reopen_signal``'s handler the log installs when it starts."""
        if number is None:
            return None
        if threading.current_thread() is not threading.main_thread():
            raise ConfigurationError(
                f"cannot install reopen_signal={given!r} from a thread other "
                "than the main thread: create the log there, or call log.reopen() yourself"
            )
        return SignalShare(number, self.request_reopen)

    def _format_for_sink(self, fmt: Format) -> Format:
        if isinstance(fmt, DevFormat):
            fmt = fmt.for_sink(is_terminal=self._sink.isatty())
        messages = getattr(self._sink, "messages", None)
        if messages is not None:
            # A sink of records rather than lines (LoggingSink, OtlpSink): the writer
            # formats and writes as for any sink; the sink's own format step builds what
            # its write() sends (LogRecords), and the lines the writer counts.
            fmt = messages(fmt)
        return fmt

    def _learn_what_lines_read(
        self, fmt: Format, select: Select | None, max_record_bytes: int
    ) -> None:
        """What the integrations collect for each request: only what lines may show."""
        format_names = getattr(fmt, "request_header_names", None)
        select_names = select.request_header_names if select is not None else frozenset()
        # The header fields (lower-case bytes) the log reads; None when it may read any
        # (a format that does not say, or a keep predicate, which sees whole records).
        # The middlewares keep just these in their records: a queued record that holds
        # the server's header lists or environ keeps them alive, and the garbage
        # collector works through them again and again.
        self.request_header_names: frozenset[bytes] | None = (
            None
            if format_names is None or select_names is None
            else frozenset(format_names) | select_names
        )
        # What a record may keep of what the client sent (see ``_budget``): the
        # integrations cut a bigger record down, so that a full queue is bounded in
        # bytes as well as in records.
        self.record_budget = RecordBudget(max_record_bytes, self.request_header_names)
        response_names = getattr(fmt, "response_header_names", None)
        # Whether lines may show response header fields (a format that does not say
        # which, or a keep predicate, may read any).  When they cannot, integrations
        # hand over () as a record's response headers rather than keep the
        # application's header list alive in the queue for nothing.
        self.reads_response_headers: bool = (
            response_names is None or select_names is None or bool(response_names)
        )
        # Whether lines may show a record's notes (boundlog.add_fields): the format says
        # with ``reads_notes``; one that does not say, or a keep predicate, may read
        # them.  Only then do the middlewares collect notes for each request.
        self.reads_notes: bool = bool(getattr(fmt, "reads_notes", True)) or select_names is None
        # The fields of a record's extras the lines may show: the format says with
        # ``reads_extras`` (one that does not say reads all but bytes_received).  The
        # integrations learn only these for each request: a keep predicate sees what
        # the format reads, so that filtering never moves a log off its fast path.
        self.reads_extras: frozenset[str] = extras_read_by(fmt)
        # The server variables (``%{NAME}e``) whose values the integrations keep in a
        # record's ``extras.environ``: those the format names.
        self.environ_names: frozenset[str] = environ_names_of(fmt)

    def _build(
        self,
        options: dict[str, Any],
        fmt: Format,
        select: Select | None,
        *,
        prometheus: bool,
        meter: Meter | None,
    ) -> None:
        """The queue, the writer and the counters' readers, nothing started yet."""
        max_queue: int = options["max_queue"]
        max_queue_bytes: int = options["max_queue_bytes"]
        self._admission = Admission(
            max_queue=max_queue,
            batch_size=options["batch_size"],
            policy=self._policy,
            max_queue_bytes=max_queue_bytes,
        )
        self._metrics = PrometheusMetrics(self._sink.name, max_queue) if prometheus else None
        reopen_on = self._reopen_on
        self._writer = Writer(
            self._admission,
            self._sink,
            fmt,
            window=options["flush_interval"],
            watch=options["watch"],
            lost_signal=None if reopen_on is None else reopen_on.lost,
            select=select,
        )
        self._sink.watch_backlog(lambda: self._admission.counts()[1])
        self._close_lock = threading.Lock()
        self._loss_report = (
            LossReport(
                self._sink.name,
                max_queue=max_queue,
                max_queue_bytes=max_queue_bytes,
                policy=self._policy,
                now=time.monotonic(),
            )
            if options["report_loss"]
            else None
        )
        if self._loss_report is not None:
            self._admission.after_close = self._refused_after_close
        # Whether a record came after close() (said once, see _refused_after_close).
        self._late = False
        # Held by the monitor's look and by close(): the final line follows the last look.
        self._health_lock = threading.Lock()
        self._final: Stats | None = None
        # close() gave up on the sink: the monitor says nothing more of this log (a look
        # then would report what close() gave up on just before its closing line does).
        self._giving_up = False
        # What close() found when it gave up on a stuck sink.
        self._delivered_on_timeout = 0
        self._lost_on_timeout = 0
        # Once _snapshot can run: the instruments read it when the SDK collects, through
        # a weak reference, so there is nothing to update and nothing keeps the log alive.
        if meter is not None:
            self._otel = OpenTelemetryMetrics(meter, self._sink.name, max_queue, self._snapshot)
        # Bound once so integrations call the admission directly, without a hop here.
        self.submit = self._admission.submit
        self.submit_async = self._admission.submit_async
        # A record queued packed keeps only the header fields lines read: the others
        # would be copied and then searched past for nothing (csrc/record/packed.h).
        self._offer = (
            self._admission.offer
            if _core.handoff is None
            else _core.handoff(
                self._admission,
                packs=packs_for(fmt, select),
                keeps=self.request_header_names,
            )
        )

    def _start(self) -> None:
        """Install the signal handlers, start the writer, and have the monitor watch."""
        _open_logs.add(self)
        # Once the writer exists: a signal may come at once.
        if self._reopen_on is not None:
            self._reopen_on.install()
        self._writer.thread.start()
        # Where nothing else catches SIGTERM (waitress, http.server, a script), its
        # default action would end the process before the writer wrote what waits.
        self._sigterm = drain_on_sigterm(self._on_sigterm)
        _drain_at_multiprocessing_exits()
        if self._metrics is not None or self._loss_report is not None:
            monitor.watch(id(self), self._look)

    def _undo_start(self) -> None:
        """Close what the log opened so far, once a step after opening the sink failed."""
        monitor.unwatch(id(self))
        _open_logs.discard(self)
        if self._reopen_on is not None:
            self._reopen_on.cancel()
        if self._sigterm is not None:
            self._sigterm.cancel()
        writer: Writer | None = getattr(self, "_writer", None)
        if writer is not None and writer.thread.is_alive():
            # Nothing was accepted yet: the writer ends at once, and stops using the
            # sink before it is closed (its descriptor's number may be reused after).
            self._admission.close()
            writer.thread.join(self._close_timeout)
        if self._otel is not None:
            self._otel.close(self._snapshot())
        self._sink.close()

    @property
    def policy(self) -> str:
        """``"drop"`` or ``"wait"``."""
        return self._policy

    @property
    def max_record_bytes(self) -> int:
        """What a record may keep of what the client sent, in bytes (see ``_budget``)."""
        return self.record_budget.limit

    def stats(self) -> Stats:
        """A snapshot of the counters; exact (and final) once ``close()`` has returned."""
        return self._snapshot()

    def _snapshot(self) -> Stats:
        # Read together with the queue's (the writer takes a batch and counts it under
        # the same lock): read apart, the writer running on meanwhile (without the GIL
        # truly at once) made snapshots with more written than submitted.
        (written, filtered, failed, write_errors, bytes_written, batches), queue = (
            self._writer.counts()
        )
        taken, waiting, refused, peak = queue
        return Stats(
            submitted=taken + waiting + refused,
            written=written + self._delivered_on_timeout,
            dropped=refused,
            filtered=filtered,
            failed=failed + self._lost_on_timeout,
            write_errors=write_errors + self._sink.retries,
            bytes_written=bytes_written,
            batches=batches,
            queued=waiting,
            queue_peak=peak,
        )

    def _look(self, now: float) -> None:
        # On the monitor thread, once a second (see _health).
        line = None
        with self._health_lock:
            if self._final is not None or self._giving_up:
                return
            stats = self._snapshot()
            if self._metrics is not None:
                self._metrics.update(stats)
            if self._loss_report is not None:
                started = self._writer.write_started
                line = self._loss_report.check(
                    stats,
                    now,
                    stalled_for=None if started is None else now - started,
                    last_failure=self._writer.last_failure,
                    unavailable=self._sink.unavailable if isinstance(self._sink, Sink) else None,
                    held_back=self._admission.held_back(),
                )
        # Outside the lock: a stalled stderr must not keep close() from its counts.
        if line is not None:
            report_on_stderr(line)

    def flush(self, timeout: float | None = None) -> bool:
        """Write every record accepted so far, without waiting for a batch to fill.

        Returns False if the sink did not take them within ``timeout`` seconds (default:
        ``close_timeout``).  The log stays open.
        """
        if self._final is not None:
            return True
        target = self._admission.hurry()
        self._sink.hurry()
        return self._writer.wait_settled(target, self._wait_limit(timeout))

    def reopen(self, timeout: float | None = None) -> bool:
        """Reopen a file sink by its path, as log rotation needs; False on timeout.

        The writer thread switches between two batches: every record written after
        this returns goes to the new file.  If the path cannot be opened, the log keeps
        writing to the old descriptor, counts a write error and warns on stderr.  Sinks
        not named by a path have nothing to reopen.
        """
        if self._final is not None:
            return True
        target = self.request_reopen()
        self._admission.hurry()
        return self._writer.wait_reopened(target, self._wait_limit(timeout))

    def request_reopen(self) -> int:
        """Ask the writer to reopen, and return at once: safe in a signal handler.

        A handler runs between two bytecodes of the main thread, which may hold one of
        the log's locks at that moment, so this only counts the request; the writer
        notices it within a second, or at its next batch.
        """
        return self._writer.request_reopen()

    def close(self, timeout: float | None = None) -> Stats:
        """Stop accepting, write every accepted record, close the sink, return the stats.

        Waits at most ``timeout`` seconds (default: ``close_timeout``) for a stuck
        sink; records still unwritten then are counted as failed.  Calling it again
        returns the same final stats.
        """
        with self._close_lock:
            if self._final is not None:
                return self._snapshot()
            self._admission.close()
            self._sink.hurry()
            thread = self._writer.thread
            thread.join(self._wait_limit(timeout))
            if thread.is_alive():
                with self._health_lock:
                    self._giving_up = True
                delivered, lost = self._writer.abandon()
                unavailable = self._sink.unavailable if isinstance(self._sink, Sink) else None
                outage = self._sink.outage() if isinstance(self._sink, Pathless) else None
                self._writer.last_failure = (
                    f"close() gave up waiting: {unavailable}"
                    if unavailable is not None
                    else f"close() gave up waiting for {self._sink.name}"
                    + ("" if outage is None else f" ({outage})")
                )
                self._delivered_on_timeout = delivered
                self._lost_on_timeout = lost + self._admission.abandon()
                if self._sink.wakes_when_stopped:
                    # abandon() stopped the sink, which woke the writer blocked on
                    # it (a socket shut down): let the thread end (and close the
                    # socket) before the totals, so that nothing of this log outlives
                    # close().
                    thread.join(ABANDONED_WRITER_WAIT)
            else:
                self._sink.close()
            if self._reopen_on is not None:
                self._reopen_on.cancel()
            if self._sigterm is not None:
                self._sigterm.cancel()
            monitor.unwatch(id(self))
            line = None
            with self._health_lock:
                self._final = self._snapshot()
                _open_logs.discard(self)
                if self._metrics is not None:
                    # The counts close() settled (what it gave up on is failed now).
                    self._metrics.update(self._final)
                if self._otel is not None:
                    self._otel.close(self._final)
                if self._loss_report is not None:
                    line = self._loss_report.final(
                        self._final, last_failure=self._writer.last_failure
                    )
            if line is not None:
                report_on_stderr(line, wait=FINAL_REPORT_WAIT)
            return self._final

    def _refused_after_close(self) -> None:
        # close()'s last line has the totals so far; a record that comes later is
        # counted in dropped where nobody would look, so the first one is said.  One
        # refused while close() runs is in that line.
        loss_report = self._loss_report
        if self._late or loss_report is None or self._final is None:
            return
        self._late = True
        report_on_stderr(loss_report.after_close())

    def _serves_no_requests(self) -> None:
        """Called in a process whose requests other processes serve (gunicorn's master,
        once it forked its workers): the capacity gauge leaves its queue out."""
        if self._metrics is not None:
            self._metrics.serves_no_requests()

    @property
    def _drains_on_sigterm(self) -> bool:
        """Whether this log has SIGTERM's handler (``drain_on_sigterm``): not when the
        server had one already when the log started."""
        return self._sigterm is not None

    def _on_sigterm(self) -> None:
        # In the SIGTERM handler: every open log is drained, once, then the process dies.
        terminate_after(_close_open_logs)

    def _wait_limit(self, timeout: object) -> float | None:
        """How long to wait as threading takes it (None: for ever); ``close_timeout`` by default."""
        if timeout is None:
            return self._close_timeout
        return seconds_to_wait("timeout", timeout, example=DEFAULT_CLOSE_TIMEOUT)

    def _restart_after_fork(self) -> None:
        self._late = False
        self._giving_up = False
        self._close_lock = threading.Lock()
        self._health_lock = threading.Lock()
        if self._loss_report is not None:
            self._loss_report = self._loss_report.restarted(time.monotonic())
        self._admission.reset_after_fork()
        if self._metrics is not None:
            self._metrics.restart_after_fork()
        self._sink.after_fork()
        self._writer.reset_after_fork()

    def __enter__(self) -> AccessLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._final is not None else "open"
        return f"<AccessLog {self._sink.name} policy={self._policy} {state}>"


# Logs not yet closed, held strongly: a log its owner forgot still gets drained at exit.
_open_logs: set[AccessLog] = set()


@atexit.register
def _close_open_logs() -> None:
    # One start for all: every log stops accepting and starts draining at once, then
    # each is waited for until its own close_timeout from that start, so that many
    # stuck logs delay the exit by the longest close_timeout, not by the sum.  A
    # close_timeout of None waits for ever.
    logs = list(_open_logs)
    for log in logs:
        log._admission.close()
    start = time.monotonic()
    for log in logs:
        limit = log._close_timeout
        log.close(timeout=None if limit is None else max(0.0, start + limit - time.monotonic()))


class _AfterMultiprocessingFork:
    """What multiprocessing's after-fork registry holds (weakly: kept alive here)."""


_AFTER_MULTIPROCESSING_FORK = _AfterMultiprocessingFork()
# The process that registered _drain_at_multiprocessing_exits' hooks, if any.
_registered_in: int | None = None


def _drain_at_multiprocessing_exits() -> None:
    """Have a multiprocessing child drain its logs when it ends.

    multiprocessing ends a child with ``os._exit`` once its target returns (granian's
    workers, a ``Pool``'s), which skips the exit handlers: only multiprocessing's own
    finalizers run there.  So in such a child the drain is one of them too, and a child
    forked with logs open registers it once multiprocessing has cleared the finalizers
    it inherited.  Nothing is imported for a process that does not use multiprocessing.
    """
    global _registered_in
    if _registered_in == os.getpid() or "multiprocessing" not in sys.modules:
        return
    import multiprocessing
    import multiprocessing.util

    _registered_in = os.getpid()
    if multiprocessing.parent_process() is not None:
        multiprocessing.util.Finalize(None, _close_open_logs, exitpriority=0)
    multiprocessing.util.register_after_fork(
        _AFTER_MULTIPROCESSING_FORK, _after_multiprocessing_fork
    )


def _after_multiprocessing_fork(_: object) -> None:
    global _registered_in
    import multiprocessing.util

    _registered_in = os.getpid()
    multiprocessing.util.Finalize(None, _close_open_logs, exitpriority=0)


def _restart_in_child() -> None:
    # Threads do not survive fork: a log made before fork (gunicorn --preload) needs a
    # writer of its own in each child, and none of the parent's records or locks.
    for log in _open_logs:
        log._restart_after_fork()
    monitor.restart_after_fork()


os.register_at_fork(after_in_child=_restart_in_child)
