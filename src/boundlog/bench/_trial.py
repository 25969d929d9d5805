"""One trial of one cell: a fresh server, a probe, a warm-up, then the timed window.

The steps, in order (the fairness controls of docs/performance.md):

1. start the sink (and its reader process) and the server, pinned to its CPU;
2. probe one request and check the exact status and body;
3. warm up with wrk, wait until the log and the server are quiet, then truncate the file
   sink (or note the reader's count) so that only the timed window's lines count;
4. read boundlog's counters, throttle the reader for an overload cell, read the server's
   CPU time, run wrk for the timed window;
5. release the reader, wait until the line count and the server's CPU time stop
   changing, read CPU time, lines, peak RSS and boundlog's counters again;
6. stop the server gracefully and read the final counters it wrote on its way out.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._breakdown import Breakdown
from ._errors import BenchError
from ._loggers import LoggerConfig
from ._matrix import DROP_MESSAGES, FLUSH_SECONDS, SILENT_LOGGERS, Cell
from ._procstat import (
    CLOCK_TICKS,
    process_tree,
    tree_cpu_seconds,
    tree_peak_rss_bytes,
    tree_threads,
)
from ._servers import (
    HOST,
    ask_server,
    fetch_stats,
    free_port,
    probe,
    server_command,
    start_server,
    wait_until_ready,
)
from ._sinks import Sink, open_sink
from ._spawn import stop
from ._syscalls import SyscallCounter
from ._wrk import WrkResult, run_wrk

_SETTLE_TIMEOUT = 60.0
_SETTLE_POLL = 0.1
# Quiet means: no new line and at most one clock tick of server CPU for this many polls.
_SETTLE_QUIET_POLLS = 3
_STOP_TIMEOUT = 20.0


@dataclass(frozen=True)
class TrialSettings:
    """What every trial of a run shares."""

    wrk: str
    script: Path
    workdir: Path
    duration: int
    #: Overload cells run longer: the queue must fill up before the window ends.
    overload_duration: int
    warmup: int
    connections: int
    gunicorn_threads: int
    max_queue: int
    server_cpu: int | None
    load_cpu: int | None
    #: Whether perf counts each thread's system calls (``--syscalls``).
    syscalls: bool = False


@dataclass
class TrialResult:
    """The raw numbers of one trial, as they go into the JSON artifact."""

    cell: Cell
    round: int
    error: str | None = None
    wrk: WrkResult | None = None
    cpu_seconds: float = 0.0
    peak_rss_bytes: int = 0
    #: Lines that reached the sink in the timed window; None when it cannot be counted.
    lines: int | None = None
    stats_before: dict[str, int] | None = None
    stats_after: dict[str, int] | None = None
    final_stats: dict[str, int] | None = None
    #: Where the window's CPU went (see ``_breakdown``).
    breakdown: Breakdown | None = None
    settled: bool = True
    graceful_stop: bool = True
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the trial produced numbers."""
        return self.error is None and self.wrk is not None and self.wrk.requests > 0

    @property
    def requests(self) -> int:
        """Responses completed in the timed window."""
        return self.wrk.requests if self.wrk else 0

    @property
    def cpu_us_per_request(self) -> float | None:
        """Server CPU microseconds per completed response."""
        return self.cpu_seconds * 1e6 / self.requests if self.requests else None

    def window_delta(self, counter: str) -> int | None:
        """How much one of boundlog's counters grew over the timed window."""
        if self.stats_before is None or self.stats_after is None:
            return None
        return self.stats_after[counter] - self.stats_before[counter]

    @property
    def delivered_lines(self) -> int | None:
        """Lines delivered in the window: counted at the sink, else boundlog's own count."""
        return self.lines if self.lines is not None else self.window_delta("written")

    @property
    def delivery_pct(self) -> float | None:
        """Lines delivered per completed response, in percent."""
        delivered = self.delivered_lines
        if delivered is None or not self.requests or self.cell.logger in SILENT_LOGGERS:
            return None
        return 100.0 * delivered / self.requests

    def as_json(self) -> dict[str, Any]:
        """Everything measured, plus the derived figures, for the artifact."""
        data = asdict(self)
        data["cell"] = {**asdict(self.cell), "name": self.cell.name}
        data.update(
            requests_per_second=self.wrk.requests_per_second if self.wrk else None,
            cpu_us_per_request=self.cpu_us_per_request,
            delivery_pct=self.delivery_pct,
            dropped=self.window_delta("dropped"),
            breakdown_per_request=self.breakdown_per_request,
        )
        return data

    @property
    def breakdown_per_request(self) -> dict[str, float | None] | None:
        """The breakdown's figures per request, or None without one."""
        if self.breakdown is None or not self.requests:
            return None
        return self.breakdown.per_request(self.requests)


def _always() -> bool:
    return True


def settle(
    sink: Sink, server_pid: int, done: Callable[[], bool] = _always, flush_seconds: float = 0.0
) -> bool:
    """Wait until the sink's line count and the server's CPU time stop moving, and ``done()``.

    Quiet alone can deceive on a crowded machine, where a starved process looks idle, so
    it also takes a pipe or terminal with nothing left unread, and ``done`` checks what
    can be known for sure (boundlog's own counters).  A logger that writes on a timer
    (``flush_seconds``, its interval) must also have been quiet for longer than that.
    Returns False if the deadline passed first.
    """
    deadline = time.monotonic() + _SETTLE_TIMEOUT
    last = (sink.lines(), tree_cpu_seconds(server_pid))
    quiet = 0
    quiet_polls = _SETTLE_QUIET_POLLS + math.ceil(flush_seconds / _SETTLE_POLL)
    while True:
        if quiet >= quiet_polls:
            if done():
                return True
            quiet = 0
        if time.monotonic() > deadline:
            return False
        time.sleep(_SETTLE_POLL)
        now = (sink.lines(), tree_cpu_seconds(server_pid))
        still = now[0] == last[0] and now[1] - last[1] < 1.5 / CLOCK_TICKS
        quiet = quiet + 1 if still and sink.drained() else 0
        last = now


def _nothing_pending(stats: dict[str, int]) -> bool:
    # Every record handed to boundlog is written, dropped, filtered or failed: none is
    # queued or in the writer's hands.
    return stats["submitted"] == (
        stats["written"] + stats["dropped"] + stats["filtered"] + stats["failed"]
    )


def _measure(
    result: TrialResult,
    settings: TrialSettings,
    sink: Sink,
    process: subprocess.Popen[bytes],
    port: int,
    stderr_path: Path,
    stats_socket: str,
) -> None:
    cell = result.cell
    url = f"http://{HOST}:{port}/"
    flush_seconds = FLUSH_SECONDS.get(cell.logger, 0.0)
    wait_until_ready(process, port, stderr_path)
    probe(port)
    if settings.warmup:
        run_wrk(
            settings.wrk, url, seconds=settings.warmup, connections=settings.connections,
            script=settings.script, cpu=settings.load_cpu,
        )  # fmt: skip
    if cell.uses_boundlog:
        warmed_up = settle(sink, process.pid, lambda: _nothing_pending(fetch_stats(stats_socket)))
    else:
        warmed_up = settle(sink, process.pid, flush_seconds=flush_seconds)
    if not warmed_up:
        result.notes.append("the log was still growing a minute after the warm-up")
    sink.start_window()
    process_before = ask_server(stats_socket)
    if cell.uses_boundlog:
        result.stats_before = process_before["counters"]
    seconds = settings.overload_duration if cell.overload else settings.duration
    sink.pace(cell.reader_rate)
    syscalls = SyscallCounter(settings.workdir / "syscalls.csv")
    if settings.syscalls:
        syscalls.start(process_tree(process.pid))
    try:
        threads_before = tree_threads(process.pid)
        cpu_before = tree_cpu_seconds(process.pid)
        try:
            result.wrk = run_wrk(
                settings.wrk, url, seconds=seconds, connections=settings.connections,
                script=settings.script, cpu=settings.load_cpu,
            )  # fmt: skip
        finally:
            sink.pace(0)
        if process.poll() is not None:
            raise BenchError(f"the server exited with status {process.returncode} during the trial")
        before = result.stats_before

        def all_delivered() -> bool:
            # boundlog has nothing pending, and the sink shows every line it says it wrote.
            stats = fetch_stats(stats_socket)
            lines = sink.window_lines()
            written = stats["written"] - before["written"] if before else None
            return _nothing_pending(stats) and (lines is None or lines == written)

        result.settled = settle(
            sink, process.pid, all_delivered if before else _always, flush_seconds=flush_seconds
        )
        if not result.settled:
            result.notes.append("the log was still growing a minute after the timed window")
        result.cpu_seconds = tree_cpu_seconds(process.pid) - cpu_before
        threads_after = tree_threads(process.pid)
    finally:
        # Stopped on an error too: perf would stay attached to the server.
        syscall_counts = syscalls.stop()
    process_after = ask_server(stats_socket)
    result.breakdown = Breakdown.between(
        threads_before, threads_after, writer=process_after["writer_tid"],
        syscalls=syscall_counts,
        gc_collections=process_after["gc_collections"] - process_before["gc_collections"],
        gc_full_collections=process_after["gc_full_collections"]
        - process_before["gc_full_collections"],
    )  # fmt: skip
    if cell.uses_boundlog:
        result.stats_after = process_after["counters"]
    result.lines = sink.window_lines()
    result.peak_rss_bytes = tree_peak_rss_bytes(process.pid)


def run_trial(cell: Cell, round_index: int, settings: TrialSettings) -> TrialResult:
    """Run one trial; a problem the harness can explain ends up in ``result.error``."""
    started = time.monotonic()
    result = TrialResult(cell, round_index)
    stats_file = settings.workdir / "final-stats.json"
    stats_file.unlink(missing_ok=True)
    stderr_path = settings.workdir / "server.stderr"
    # Unique on the machine: the name is global, like a port.
    stats_socket = f"boundlog-bench-{os.getpid()}-{secrets.token_hex(8)}"
    port = free_port()
    sink = open_sink(cell.sink, settings.workdir, settings.load_cpu)
    try:
        url = sink.url or "stdout"
        config = LoggerConfig(cell.logger, str(stats_file), settings.max_queue, stats_socket, url)
        command = server_command(
            cell.server, cell.logger, port, gunicorn_threads=settings.gunicorn_threads,
            access_logfile=sink.url or "-",
        )  # fmt: skip
        with stderr_path.open("wb") as stderr:
            process = start_server(
                command, config, stdout_fd=sink.server_fd, stderr=stderr, cpu=settings.server_cpu
            )
        sink.handed_over()
        try:
            _measure(result, settings, sink, process, port, stderr_path, stats_socket)
        except (BenchError, OSError, subprocess.SubprocessError) as error:
            # One broken cell must not cost the rest of a run that takes an hour.
            result.error = str(error) or type(error).__name__
        finally:
            result.graceful_stop = stop(process, _STOP_TIMEOUT)
    finally:
        sink.close(_STOP_TIMEOUT)
    if cell.uses_boundlog and result.error is None:
        with contextlib.suppress(OSError, ValueError):
            result.final_stats = json.loads(stats_file.read_bytes())
        if result.final_stats is None:
            result.notes.append("the server wrote no final stats on its way out")
    diagnostics = stderr_path.read_bytes()
    if b"Traceback" in diagnostics:
        result.notes.append(
            f"the server printed a traceback, see {stderr_path.name}: " + _last_line(stderr_path)
        )
    if (message := DROP_MESSAGES.get(cell.logger)) and message in diagnostics:
        # A peer without counters: the only word of its drops is on stderr (once: the
        # peer filters out repeats), somewhere in the server's life.
        result.notes.append(f"the logger reported drops on stderr: {message.decode()}")
    result.seconds = time.monotonic() - started
    return result


def _last_line(path: Path) -> str:
    lines = path.read_bytes().decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""
