"""From trials to one summary per cell: medians, spreads and ratios to a baseline.

Ratios to ``none`` (or to the server's default log) are paired by round: each trial is
divided by the baseline's trial of the same round, which ran minutes apart at most,
and the median of those per-round ratios is reported.  On a machine whose speed drifts
this is steadier than dividing two medians taken over the whole run.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ._breakdown import median_breakdown
from ._matrix import Cell
from ._trial import TrialResult

Metric = Callable[[TrialResult], float | None]


def rps(trial: TrialResult) -> float | None:
    """Requests per second of a trial."""
    return trial.wrk.requests_per_second if trial.wrk else None


def cpu_per_request(trial: TrialResult) -> float | None:
    """Server CPU microseconds per request of a trial."""
    return trial.cpu_us_per_request


def median(values: Sequence[float]) -> float | None:
    """The median, or None for no values."""
    return statistics.median(values) if values else None


def mad_pct(values: Sequence[float]) -> float | None:
    """The median absolute deviation, in percent of the median."""
    middle = median(values)
    if not middle:
        return None
    deviations = [abs(value - middle) for value in values]
    return 100.0 * statistics.median(deviations) / middle


@dataclass(frozen=True)
class CellSummary:
    """One cell's figures over all its successful trials."""

    cell: Cell
    trials: int
    failures: list[str]
    rps: float | None
    rps_mad_pct: float | None
    cpu_us: float | None
    cpu_mad_pct: float | None
    p50_ms: float | None
    p99_ms: float | None
    peak_rss_mib: float | None
    #: The lowest delivery of any trial: one lossy trial must show.
    delivery_pct: float | None
    #: The most records boundlog dropped in any trial's timed window.
    dropped: int | None
    socket_errors: int
    status_errors: int
    rps_vs_none: float | None = None
    cpu_vs_none: float | None = None
    rps_vs_default: float | None = None
    #: The medians of the trials' breakdowns per request (``_breakdown``); None without.
    breakdown: dict[str, float | None] | None = None


def _values(trials: Sequence[TrialResult], metric: Metric) -> list[float]:
    return [value for trial in trials if (value := metric(trial)) is not None]


def paired_ratio(
    trials: Sequence[TrialResult], baseline: Sequence[TrialResult], metric: Metric
) -> float | None:
    """The median over rounds of ``metric(trial) / metric(baseline trial)``."""
    by_round = {trial.round: metric(trial) for trial in baseline}
    ratios = []
    for trial in trials:
        value = metric(trial)
        reference = by_round.get(trial.round)
        if value is not None and reference:
            ratios.append(value / reference)
    return median(ratios)


def summarize_cell(cell: Cell, trials: Sequence[TrialResult]) -> CellSummary:
    """The figures of one cell, without ratios."""
    good = [trial for trial in trials if trial.ok]
    failures = [trial.error or "no requests completed" for trial in trials if not trial.ok]
    rates = _values(good, rps)
    cpus = _values(good, cpu_per_request)
    deliveries = _values(good, lambda trial: trial.delivery_pct)
    drops = [drop for trial in good if (drop := trial.window_delta("dropped")) is not None]
    rss = [trial.peak_rss_bytes / 2**20 for trial in good]
    p50 = median([trial.wrk.p50_us / 1000 for trial in good if trial.wrk])
    p99 = median([trial.wrk.p99_us / 1000 for trial in good if trial.wrk])
    breakdowns = [figures for trial in good if (figures := trial.breakdown_per_request)]
    return CellSummary(
        cell=cell,
        trials=len(good),
        failures=failures,
        rps=median(rates),
        rps_mad_pct=mad_pct(rates),
        cpu_us=median(cpus),
        cpu_mad_pct=mad_pct(cpus),
        p50_ms=p50,
        p99_ms=p99,
        peak_rss_mib=max(rss) if rss else None,
        delivery_pct=min(deliveries) if deliveries else None,
        dropped=max(drops) if drops else None,
        socket_errors=sum(trial.wrk.socket_errors for trial in good if trial.wrk),
        status_errors=sum(trial.wrk.status_errors for trial in good if trial.wrk),
        breakdown=median_breakdown(breakdowns) if breakdowns else None,
    )


def summarize(cells: Sequence[Cell], trials: Sequence[TrialResult]) -> list[CellSummary]:
    """One summary per cell, in the order given, with ratios to its baselines."""
    by_cell: dict[Cell, list[TrialResult]] = {cell: [] for cell in cells}
    for trial in trials:
        by_cell.setdefault(trial.cell, []).append(trial)

    def baseline(cell: Cell, logger: str) -> list[TrialResult]:
        return [t for t in by_cell.get(replace(cell, logger=logger), []) if t.ok]

    summaries = []
    for cell in cells:
        good = [trial for trial in by_cell[cell] if trial.ok]
        none, default = baseline(cell, "none"), baseline(cell, "default")
        summaries.append(
            replace(
                summarize_cell(cell, by_cell[cell]),
                rps_vs_none=paired_ratio(good, none, rps),
                cpu_vs_none=paired_ratio(good, none, cpu_per_request),
                rps_vs_default=paired_ratio(good, default, rps),
            )
        )
    return summaries
