"""The logs' health, seen from outside them: loss reports on stderr and fresh metrics.

A log that drops half its records must say so where operators look, not only to whoever
calls ``stats()``.  Neither the request path (which must never do I/O) nor the writer
thread can be the one to say it: under overload the writer is precisely what is stuck,
blocked in a write to a pipe nobody reads or to a collector that does not answer.  So one
thread per process, the monitor, looks at every open log once a second: it brings the
log's Prometheus metrics up to date (they move while the sink is stalled), and when
records were dropped or failed it writes one line, at most every ``REPORT_EVERY``
seconds per log, saying how many, over how long and why.  When the loss stops, so do the
lines.  At ``close()`` (and so at exit) a log that lost anything in its life writes one
last line with its totals.

The monitor reads counters only: it takes none of the locks the request path takes
for longer than a snapshot, and a monitor blocked on a stalled stderr delays nothing but
its own reports.  It runs only while some log wants it, and ends when none does.

:class:`LossReport` decides what to say from the counts and the clock it is given, so
that its rate limiting is tested without waiting for real seconds to pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .._errors import report_on_stderr
from .._options import DEFAULT_MAX_QUEUE_BYTES
from ._stats import Stats

#: At most one loss line per log this often, in seconds.
REPORT_EVERY = 5.0
#: How often the monitor looks at the logs: the metrics are at most this old.
LOOK_EVERY = 1.0
# A write that has not returned for this long is a stalled sink, not a slow one.
_STALLED_AFTER = 0.5
# Requests held back by a sink stalled this long are said (policy "wait": nothing is
# lost, and nothing else would say why requests hang).
_HELD_AFTER = 3.0
#: How long close() waits for its final line to reach stderr, in seconds.
FINAL_REPORT_WAIT = 1.0


def _records(count: int) -> str:
    return f"{count:,} record{'s' if count != 1 else ''}"


class LossReport:
    """What one log says about its losses: periodic lines, and the last at close."""

    __slots__ = ("_dropped", "_failed", "_last_report", "_max_queue", "_max_queue_bytes",
                 "_policy", "_quiet_since", "_sink", "_unavailable")  # fmt: skip

    def __init__(
        self,
        sink_name: str,
        *,
        max_queue: int,
        policy: str,
        now: float,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
    ) -> None:
        self._sink = sink_name
        self._max_queue = max_queue
        self._max_queue_bytes = max_queue_bytes
        self._policy = policy
        # The counts the last line covered.
        self._dropped = 0
        self._failed = 0
        self._last_report: float | None = None
        # The last moment nothing was lost beyond what was reported: "since when".
        self._quiet_since = now
        # Why the sink could not take lines, seen since the last line: drops reported
        # after the FIFO's reader came are still the wait's doing.
        self._unavailable: str | None = None

    def restarted(self, now: float) -> LossReport:
        """The report of a forked child's log, whose counts start from zero."""
        return LossReport(
            self._sink,
            max_queue=self._max_queue,
            policy=self._policy,
            now=now,
            max_queue_bytes=self._max_queue_bytes,
        )

    def _why_refused(self) -> str:
        # Full in records or in bytes: big requests fill the byte budget first.
        bounds = f"max_queue={self._max_queue:,}, max_queue_bytes={self._max_queue_bytes:,}"
        if self._policy == "drop":
            return f"the queue ({bounds}) is full"
        # Under wait, a refusal is a request that gave up waiting (or came after close).
        return f"requests stopped waiting for room in the queue ({bounds})"

    def check(
        self,
        stats: Stats,
        now: float,
        *,
        stalled_for: float | None,
        last_failure: str | None,
        unavailable: str | None = None,
        held_back: int = 0,
    ) -> str | None:
        """The line to write now, if any: ``stalled_for`` is how long a write has not
        returned, ``unavailable`` why the sink cannot take lines yet (a FIFO nobody
        reads), ``held_back`` how many requests wait for room (policy "wait")."""
        dropped = stats.dropped - self._dropped
        failed = stats.failed - self._failed
        if unavailable is not None:
            self._unavailable = unavailable
        recent = self._last_report is not None and now - self._last_report < REPORT_EVERY
        if dropped <= 0 and failed <= 0:
            self._quiet_since = now
            self._unavailable = unavailable
            if held_back <= 0 or stalled_for is None or stalled_for < _HELD_AFTER or recent:
                return None
            self._last_report = now
            return (
                f"{held_back:,} request(s) wait for room in the queue (policy='wait'): "
                f"{self._sink} has not taken a write for {stalled_for:.0f} s"
            )
        if recent:
            return None
        start = self._quiet_since
        if self._last_report is not None:
            start = max(start, self._last_report)
        period = f"in the last {max(1, round(now - start))} s"
        parts = []
        if dropped > 0:
            if self._unavailable is not None:
                cause = self._unavailable
            elif stalled_for is not None and stalled_for >= _STALLED_AFTER:
                cause = f"{self._sink} has not taken a write for {stalled_for:.0f} s"
            else:
                cause = f"{self._sink} is slower than the requests"
            parts.append(
                f"dropped {_records(dropped)} {period}: {self._why_refused()} because {cause}"
            )
        if failed > 0:
            parts.append(f"lost {_records(failed)} {period}: {last_failure or 'writes failed'}")
        self._dropped = stats.dropped
        self._failed = stats.failed
        self._last_report = now
        self._unavailable = unavailable
        return "; ".join(parts)

    def after_close(self) -> str:
        """The line a log writes, once, when a record comes after it closed."""
        return (
            f"{self._sink} is closed: a record that came after close() was dropped, and "
            "every later one is (counted in dropped); a request still running when the "
            "log closed (the server ended the application's lifespan before its requests, "
            "e.g. one running a background task), or code that submits after close()"
        )

    def final(self, stats: Stats, *, last_failure: str | None) -> str | None:
        """The line ``close()`` writes: the totals, when anything was lost in the log's life."""
        if not stats.dropped and not stats.failed:
            return None
        line = (
            f"{self._sink} closed: {stats.dropped + stats.failed:,} of "
            f"{_records(stats.submitted)} not written ({stats.dropped:,} dropped, "
            f"{stats.failed:,} failed); {stats.written:,} written, {stats.filtered:,} filtered"
        )
        if stats.failed and last_failure:
            line += f"; the last failure: {last_failure}"
        return line


class Monitor:
    """The thread that looks at the watched logs every ``LOOK_EVERY`` seconds."""

    def __init__(self) -> None:
        self._start_afresh()

    def _start_afresh(self) -> None:
        self._lock = threading.Lock()
        # Each watched log's look: called with the monotonic time, on the monitor thread.
        self._looks: dict[int, Callable[[float], None]] = {}
        self._thread: threading.Thread | None = None

    def watch(self, key: int, look: Callable[[float], None]) -> None:
        """Call ``look(now)`` every second from now on, until ``unwatch(key)``."""
        with self._lock:
            self._looks[key] = look
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="boundlog-monitor", daemon=True
                )
                self._thread.start()

    def unwatch(self, key: int) -> None:
        with self._lock:
            self._looks.pop(key, None)

    def _run(self) -> None:
        while True:
            time.sleep(LOOK_EVERY)
            if not self._look_once():
                return

    def _look_once(self) -> bool:
        # A function of its own, so that its list of looks, which holds the logs, is
        # gone while the thread sleeps: a closed log is not kept alive for a second.
        with self._lock:
            looks = list(self._looks.values())
            if not looks:
                # Ends with the last log; watch() starts another under this lock.
                self._thread = None
                return False
        now = time.monotonic()
        for look in looks:
            try:
                look(now)
            except Exception as error:  # a defect: the other logs still get looked at
                report_on_stderr(f"the monitor cannot look at a log: {error!r}")
        return True

    def restart_after_fork(self) -> None:
        """In a forked child: the thread is gone; start one if logs are still watched."""
        looks = self._looks
        self._start_afresh()
        for key, look in looks.items():
            self.watch(key, look)


monitor = Monitor()
