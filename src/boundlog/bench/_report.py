"""The run's outputs: markdown tables, the JSON artifact and the PNG chart."""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ._checks import Check
from ._matrix import Cell, not_applicable
from ._summary import CellSummary
from ._trial import TrialResult


def _number(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{suffix}"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _group_key(summary: CellSummary) -> tuple[str, str]:
    return summary.cell.server, summary.cell.sink_label


def _groups(summaries: Sequence[CellSummary]) -> dict[tuple[str, str], list[CellSummary]]:
    groups: dict[tuple[str, str], list[CellSummary]] = {}
    for summary in summaries:
        groups.setdefault(_group_key(summary), []).append(summary)
    return groups


# Delivery stands beside the ratios: a logger that loses lines does less work, and its
# ratios are only worth what its delivery is.
_MATRIX_HEADER = (
    "| logger | req/s | MAD | req/s vs none | CPU µs/req | CPU vs none | delivery | p50 ms "
    "| p99 ms | peak RSS MiB | dropped | socket errors / non-2xx |\n"
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
)
_OVERLOAD_HEADER = (
    "| logger | req/s | MAD | req/s vs none | CPU µs/req | delivery | dropped | p99 ms "
    "| peak RSS MiB | socket errors / non-2xx |\n"
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
)


def _failed_row(summary: CellSummary) -> str | None:
    if summary.trials:
        return None
    reason = (summary.failures[0] if summary.failures else "no trials").splitlines()[0]
    return f"| {summary.cell.logger} | failed: {reason[:100]} |"


def _label(summary: CellSummary) -> str:
    notes = []
    if failed := len(summary.failures):
        notes.append(f"{failed} failed")
    delivery = summary.delivery_pct
    if delivery is not None and delivery < 100.0 and not summary.cell.uses_boundlog:
        # boundlog counts what it drops (the dropped column); a peer's missing lines show here.
        notes.append(f"lines missing: {delivery:.1f}% delivered")
    return f"{summary.cell.logger} ({', '.join(notes)})" if notes else summary.cell.logger


def _count(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,}"


def _matrix_row(s: CellSummary) -> str:
    return _failed_row(s) or (
        f"| {_label(s)} | {_number(s.rps, 0)} | {_number(s.rps_mad_pct, 1, '%')} "
        f"| {_ratio(s.rps_vs_none)} | {_number(s.cpu_us)} | {_ratio(s.cpu_vs_none)} "
        f"| {_number(s.delivery_pct, 2, '%')} | {_number(s.p50_ms, 2)} "
        f"| {_number(s.p99_ms, 2)} | {_number(s.peak_rss_mib)} | {_count(s.dropped)} "
        f"| {s.socket_errors} / {s.status_errors} |"
    )


def _overload_row(s: CellSummary) -> str:
    return _failed_row(s) or (
        f"| {_label(s)} | {_number(s.rps, 0)} | {_number(s.rps_mad_pct, 1, '%')} "
        f"| {_ratio(s.rps_vs_none)} | {_number(s.cpu_us)} "
        f"| {_number(s.delivery_pct, 2, '%')} | {_count(s.dropped)} "
        f"| {_number(s.p99_ms, 2)} | {_number(s.peak_rss_mib)} "
        f"| {s.socket_errors} / {s.status_errors} |"
    )


_BREAKDOWN_HEADER = (
    "| logger | server user µs/req | server system µs/req | writer user µs/req "
    "| writer system µs/req | switches /1k req | syscalls /req | writer syscalls /1k req "
    "| GC runs /1k req | full GC runs /1k req |\n"
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
)
_BREAKDOWN_FIGURES = (
    ("server_user_us", 2), ("server_system_us", 2), ("writer_user_us", 2),
    ("writer_system_us", 2), ("switches_per_1k", 1), ("syscalls_per_request", 2),
    ("writer_syscalls_per_1k", 1), ("gc_per_1k", 2), ("full_gc_per_1k", 3),
)  # fmt: skip


def breakdown_tables(summaries: Sequence[CellSummary]) -> str:
    """Where the CPU went, one table per server and sink (see ``_breakdown``)."""
    parts = []
    for (server, sink), group in _groups(summaries).items():
        rows = [
            f"| {s.cell.logger} | "
            + " | ".join(
                _number(s.breakdown.get(name), digits) for name, digits in _BREAKDOWN_FIGURES
            )
            + " |"
            for s in group
            if s.breakdown is not None and not s.cell.overload
        ]
        if rows:
            parts.extend(
                [f"#### where the CPU goes: {server} · {sink}\n", _BREAKDOWN_HEADER, *rows, ""]
            )
    return "\n".join(parts)


def _skipped_row(cell: Cell) -> str:
    return f"| {cell.logger} | skipped: {not_applicable(cell.server, cell.logger, cell.sink)} |"


def tables(summaries: Sequence[CellSummary], skipped: Sequence[Cell] = ()) -> str:
    """One markdown table per server and sink, the overload scenario last.

    A cell asked for whose logger does not run under its server gets a row that says so.
    """
    groups: dict[tuple[str, str], list[str]] = {}
    titles: dict[tuple[str, str], tuple[str, str]] = {}
    for key, group in _groups(summaries).items():
        server, sink = key
        overload = group[0].cell.overload
        title = f"overload: {server}, pipe read at {group[0].cell.reader_rate:,} lines/s"
        titles[key] = (title if overload else f"{server} · {sink}",
                       _OVERLOAD_HEADER if overload else _MATRIX_HEADER)  # fmt: skip
        groups[key] = [(_overload_row if overload else _matrix_row)(s) for s in group]
    for cell in skipped:
        key = (cell.server, cell.sink_label)
        titles.setdefault(key, (f"{cell.server} · {cell.sink_label}", _MATRIX_HEADER))
        groups.setdefault(key, []).append(_skipped_row(cell))
    parts = []
    for key, rows in groups.items():
        title, header = titles[key]
        parts.extend([f"#### {title}\n", header, *rows, ""])
    return "\n".join(parts)


_CHECK_TITLES = {
    "accounting": "Exact accounting (boundlog's counters against the lines at the sink)",
    "delivery": "Delivery (lines at the sink per request, for loggers without counters)",
    "overload": "Overload scenario",
    "target": "Targets (performance goals; noisy on a shared machine)",
}


def checks_text(checks: Sequence[Check]) -> str:
    """The verdicts as markdown lists; passing accounting checks are only counted."""
    lines = []
    for kind, title in _CHECK_TITLES.items():
        chosen = [check for check in checks if check.kind == kind]
        if not chosen:
            continue
        lines.append(f"#### {title}\n")
        if kind == "accounting":
            held = sum(check.passed for check in chosen)
            lines.append(f"- {held} of {len(chosen)} checks hold")
            chosen = [check for check in chosen if not check.passed]
        for check in chosen:
            lines.append(f"- {'ok' if check.passed else 'MISS'}: {check.subject} ({check.detail})")
        if kind in ("overload", "target") and not all(check.passed for check in chosen):
            lines.append(
                "- a MISS is reported, not failed: these are goals a shared or slow "
                "machine may not reach; the exit status is 1 only for failed trials "
                "and accounting checks"
            )
        lines.append("")
    return "\n".join(lines)


def markdown(
    header: str,
    summaries: Sequence[CellSummary],
    checks: Sequence[Check],
    skipped: Sequence[Cell] = (),
) -> str:
    """The whole markdown report."""
    breakdown = breakdown_tables(summaries)
    return (
        f"{header}\n\n{tables(summaries, skipped)}\n"
        + (f"{breakdown}\n" if breakdown else "")
        + checks_text(checks)
    )


def write_json(
    path: Path,
    *,
    environment: dict[str, Any],
    settings: dict[str, Any],
    summaries: Sequence[CellSummary],
    checks: Sequence[Check],
    trials: Sequence[TrialResult],
) -> None:
    """The artifact: environment, settings, summaries, verdicts and every raw trial."""
    document = {
        "environment": environment,
        "settings": settings,
        "summaries": [{**asdict(s), "cell": s.cell.name} for s in summaries],
        "checks": [asdict(check) for check in checks],
        "trials": [trial.as_json() for trial in trials],
    }
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


_CHART_FIGURES = (
    ("rps_vs_none", "requests/s vs none\n(higher is better)"),
    ("cpu_vs_none", "server CPU per request vs none\n(lower is better)"),
)


def write_chart(path: Path, summaries: Sequence[CellSummary]) -> bool:
    """Bars of each logger's ratios to none: a column per server, a group per sink.

    Returns False when there is nothing to draw or matplotlib is not installed.
    """
    plotted = [s for s in summaries if s.cell.logger != "none" and s.rps_vs_none is not None]
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        return False
    if not plotted:
        return False
    matplotlib.use("Agg")
    pyplot = importlib.import_module("matplotlib.pyplot")
    servers = list(dict.fromkeys(s.cell.server for s in plotted))
    loggers = list(dict.fromkeys(s.cell.logger for s in plotted))
    width = 0.8 / len(loggers)
    figure, axes = pyplot.subplots(
        2, len(servers), figsize=(1 + 4.5 * len(servers), 7), squeeze=False, sharey="row"
    )
    handles = {}
    for column, server in enumerate(servers):
        sinks = list(dict.fromkeys(s.cell.sink_label for s in plotted if s.cell.server == server))
        for row, (figure_name, label) in enumerate(_CHART_FIGURES):
            axis = axes[row][column]
            for index, logger in enumerate(loggers):
                values = {
                    s.cell.sink_label: getattr(s, figure_name) or 0
                    for s in plotted
                    if s.cell.server == server and s.cell.logger == logger
                }
                offset = (index - (len(loggers) - 1) / 2) * width
                bars = axis.bar(
                    [position + offset for position in range(len(sinks))],
                    [values.get(sink, 0) for sink in sinks],
                    width,
                    label=logger,
                )
                handles[logger] = bars
            axis.axhline(1.0, color="black", linewidth=0.8)
            axis.set_xticks(range(len(sinks)), sinks, fontsize="small")
            if column == 0:
                axis.set_ylabel(label)
        axes[0][column].set_title(server)
    figure.legend(list(handles.values()), list(handles), loc="upper center", ncols=len(handles))
    figure.tight_layout(rect=(0, 0, 1, 0.94))
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return True
