"""What the run is judged by: exact accounting, the overload behaviour, the targets.

Accounting checks are exact: a failure is a bug, and it fails the run.  The overload
checks judge boundlog under a saturated queue, some exactly (wait loses nothing), some
with a margin (drop keeps the pace, memory stays bounded).  The targets are performance
goals from the project's tracker, measured on whatever machine runs the tool; they and
the overload checks are reported, never enforced.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from boundlog import Record

from ._loggers import BOUNDLOG_BATCH_SIZE
from ._matrix import BOUNDLOG_LOGGERS, SILENT_LOGGERS, Cell
from ._summary import CellSummary
from ._trial import TrialResult

# Memory a server may use under overload beyond the records boundlog may hold (a full
# queue plus the one batch being written): the writer thread's stack, the formatted
# batch, allocator slack.
RSS_SLACK_MIB = 8.0


@dataclass(frozen=True)
class Check:
    """One verdict: what was checked, whether it held, and the figure behind it."""

    #: "accounting" (exact, a failure is a bug), "delivery", "overload" or "target".
    kind: str
    subject: str
    passed: bool
    detail: str


def record_bytes() -> int:
    """Memory one queued record holds: the tuple, its own field objects, its queue slot."""
    # Counted as if every field were its own object; servers share some (the method,
    # small status codes), so this errs on the generous side by a few dozen bytes.  The
    # record keeps the server's list of request headers: wrk sends only Host.  The
    # response headers are the application's constant list, shared by every record.
    request_headers = [(b"host", b"127.0.0.1:8000")]
    record = Record(time.time(), 0.0001, "127.0.0.1", "GET", b"/", b"", "HTTP/1.1", 200, 1024,
                    request_headers, ())  # fmt: skip
    pointer = 8
    fields = sum(sys.getsizeof(field) for field in record[:9])
    headers = sys.getsizeof(request_headers) + sum(
        sys.getsizeof(pair) + sum(map(sys.getsizeof, pair)) for pair in request_headers
    )
    return sys.getsizeof(record) + fields + headers + pointer


def accounting_checks(trials: Sequence[TrialResult]) -> list[Check]:
    """Every record boundlog took in is a line at the sink, or counted as dropped or filtered."""
    checks = []
    for trial in trials:
        if not (trial.ok and trial.cell.uses_boundlog):
            continue
        subject = f"{trial.cell.name} round {trial.round + 1}"
        submitted = trial.window_delta("submitted")
        written = trial.window_delta("written")
        dropped = trial.window_delta("dropped")
        filtered = trial.window_delta("filtered")
        failed = trial.window_delta("failed")
        if submitted is not None and written is not None and dropped is not None:
            balance = written + dropped + (filtered or 0) + (failed or 0)
            checks.append(Check(
                "accounting",
                f"{subject}: window submitted == written + dropped + filtered + failed",
                submitted == balance,
                f"{submitted} == {written} + {dropped} + {filtered} + {failed}",
            ))  # fmt: skip
            if trial.lines is not None:
                checks.append(Check(
                    "accounting", f"{subject}: lines at the sink == written",
                    trial.lines == written,
                    f"{trial.lines} lines, {written} written",
                ))  # fmt: skip
        final = trial.final_stats
        if final is None:
            checks.append(Check("accounting", f"{subject}: final stats", False, "none reported"))
        else:
            checks.append(Check(
                "accounting",
                f"{subject}: final submitted == written + dropped + filtered, nothing failed",
                final["submitted"] == final["written"] + final["dropped"] + final["filtered"]
                and not final["failed"],
                "{submitted} == {written} + {dropped} + {filtered}, failed {failed}".format(
                    **final
                ),
            ))  # fmt: skip
    return checks


def delivery_checks(summaries: Sequence[CellSummary]) -> list[Check]:
    """Every logger without counters of its own wrote a line per request (reported only).

    For them the sink's line count is all there is: a logger that lost lines, or still
    held them when the trial settled, did less work in the window than one that wrote
    them all, and its ratios flatter it by that much.
    """
    checks = []
    for summary in summaries:
        cell = summary.cell
        if (
            cell.logger in (*SILENT_LOGGERS, *BOUNDLOG_LOGGERS)
            or cell.overload
            or summary.delivery_pct is None
        ):
            continue
        checks.append(Check(
            "delivery", f"{cell.name}: a line at the sink for every request",
            summary.delivery_pct >= 100.0,
            f"lowest trial {summary.delivery_pct:.2f}%",
        ))  # fmt: skip
    return checks


def _find(summaries: Sequence[CellSummary], cell: Cell) -> CellSummary | None:
    return next((summary for summary in summaries if summary.cell == cell), None)


def overload_checks(
    summaries: Sequence[CellSummary], trials: Sequence[TrialResult], max_queue: int
) -> list[Check]:
    """The overload scenario: wait delivers everything, drop keeps its pace, memory stays bounded."""
    checks = []
    held = max_queue + BOUNDLOG_BATCH_SIZE
    budget_mib = held * record_bytes() / 2**20 + RSS_SLACK_MIB
    for summary in summaries:
        cell = summary.cell
        if not (cell.overload and cell.uses_boundlog) or not summary.trials:
            continue
        peaks = [
            trial.final_stats["queue_peak"]
            for trial in trials
            if trial.cell == cell and trial.ok and trial.final_stats
        ]
        checks.append(Check(
            "overload", f"{cell.name}: the queue saturated",
            bool(peaks) and min(peaks) >= max_queue,
            f"queue peak {min(peaks, default=0)} of {max_queue}",
        ))  # fmt: skip
        if cell.logger == "boundlog-wait":
            checks.append(Check(
                "overload", f"{cell.name}: wait delivered every line, dropped none",
                (summary.delivery_pct or 0) >= 100.0 and not summary.dropped,
                f"delivery {summary.delivery_pct or 0:.2f}%, dropped {summary.dropped}",
            ))  # fmt: skip
        else:
            checks.append(Check(
                "overload", f"{cell.name}: drop kept the server's pace (>= 0.9x none)",
                (summary.rps_vs_none or 0) >= 0.9,
                f"{summary.rps_vs_none or 0:.2f}x none, dropped {summary.dropped}",
            ))  # fmt: skip
        baseline = _find(summaries, replace(cell, logger="none"))
        if baseline is not None and baseline.peak_rss_mib and summary.peak_rss_mib:
            growth = summary.peak_rss_mib - baseline.peak_rss_mib
            checks.append(Check(
                "overload", f"{cell.name}: peak RSS within the queue budget",
                growth <= budget_mib,
                f"+{growth:.1f} MiB over none, budget {budget_mib:.1f} MiB "
                f"({held} records x {record_bytes()} B + {RSS_SLACK_MIB:.0f} MiB)",
            ))  # fmt: skip
    return checks


# (server, sink, logger, figure, at least?, bound): the tracker's targets.
TARGETS = (
    ("uvicorn", "file", "boundlog-drop", "cpu_vs_none", False, 1.08),
    ("uvicorn", "file", "boundlog-drop", "rps_vs_none", True, 0.92),
    ("uvicorn", "file", "boundlog-drop", "rps_vs_default", True, 2.5),
    ("uvicorn", "file", "boundlog-wait", "rps_vs_default", True, 2.5),
    ("uvicorn", "file", "boundlog-drop", "delivery_pct", True, 100.0),
    ("uvicorn", "file", "boundlog-wait", "delivery_pct", True, 100.0),
    ("gunicorn", "file", "boundlog-drop", "cpu_vs_none", False, 1.05),
)


def target_checks(summaries: Sequence[CellSummary]) -> list[Check]:
    """The targets whose cells were measured in this run."""
    checks = []
    for server, sink, logger, figure, at_least, bound in TARGETS:
        summary = _find(summaries, Cell(server, logger, sink))
        value = getattr(summary, figure, None) if summary else None
        if value is None:
            continue
        passed = value >= bound if at_least else value <= bound
        checks.append(Check(
            "target", f"{server}/{logger}/{sink}: {figure} {'>=' if at_least else '<='} {bound:g}",
            passed,
            f"measured {value:.3g}",
        ))  # fmt: skip
    return checks
