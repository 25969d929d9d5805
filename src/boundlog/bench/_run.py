"""A whole run: check the tools, pin the CPUs, run every trial in rotated rounds, report."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from ._checks import accounting_checks, delivery_checks, overload_checks, target_checks
from ._environment import environment
from ._errors import BenchError
from ._matrix import NETWORK_SINKS, Cell, not_applicable, rounds
from ._progress import Progress
from ._report import markdown, write_chart, write_json
from ._servers import PEER_REQUIREMENTS, REQUIREMENTS
from ._sinks import NEEDS_RSYSLOGD, find_rsyslogd
from ._summary import summarize
from ._trial import TrialResult, TrialSettings, run_trial
from ._wrk import BROWSER_HEADERS, find_wrk, write_script


@dataclass(frozen=True)
class Plan:
    """Everything the command line decided."""

    cells: tuple[Cell, ...]
    trials: int
    duration: int
    overload_duration: int
    warmup: int
    connections: int
    output: Path
    wrk: str
    gunicorn_threads: int
    max_queue: int
    #: Whether perf counts each thread's system calls (see ``_syscalls``).
    syscalls: bool = False
    #: Cells asked for whose logger does not run under that server (see ``not_applicable``).
    skipped: tuple[Cell, ...] = ()
    #: Whether requests carry a browser's header fields (``BROWSER_HEADERS``), not Host alone.
    browser: bool = False


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        # A dotted name whose parent package is missing.
        return False


def check_requirements(cells: Sequence[Cell]) -> None:
    """Stop with an explanation when a server's or a peer's Python package is missing."""
    missing = sorted({
        module
        for cell in cells
        for module in (*REQUIREMENTS[cell.server], *PEER_REQUIREMENTS.get(cell.logger, ()))
        if not _installed(module)
    })  # fmt: skip
    if missing:
        raise BenchError(
            f"missing Python packages: {', '.join(missing)}. "
            "Install the benchmark's dependencies with: pip install 'boundlog[bench]'"
        )
    if any(cell.sink in NETWORK_SINKS for cell in cells) and find_rsyslogd() is None:
        raise BenchError(NEEDS_RSYSLOGD)


def choose_cpus(progress: Progress) -> tuple[int | None, int | None]:
    """One CPU for the server, another for wrk (and the harness and sink readers)."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) >= 2:
        return available[0], available[-1]
    progress.say(
        "note: only one CPU is available, so the server and wrk share it: absolute "
        "numbers are lower than on two CPUs, ratios between loggers still compare"
    )
    return None, None


def _header(env: dict[str, Any], plan: Plan) -> str:
    packages = ", ".join(
        f"{name} {version}" for name, version in env["packages"].items() if version
    )
    git = env["git"]
    commit = "not a git checkout" if git is None else git["commit"][:12]
    if git and git["modified"]:
        commit += " with uncommitted changes"
    overload = (
        f" ({plan.overload_duration} s for overload cells)"
        if any(cell.overload for cell in plan.cells)
        else ""
    )
    pinning = (
        f"server on CPU {env['server_cpu']}, wrk on CPU {env['load_cpu']}"
        if env["server_cpu"] is not None
        else "server and wrk share one CPU"
    )
    bullets = [
        f"command: `{env['command']}`",
        f"{plan.trials} rotated trials of {plan.duration} s{overload} after {plan.warmup} s "
        f"of warm-up, {plan.connections} connections, "
        + (
            f"requests with a browser's {len(BROWSER_HEADERS) + 1} header fields"
            if plan.browser
            else "requests with a Host field alone (wrk's)"
        )
        + ", 1 KiB body, combined format for the "
        f"loggers that take one, boundlog queue {plan.max_queue:,} records",
        f"{env['cpu_model']}, {env['cpus_online']} CPUs, {pinning}, load average "
        f"{env['load_average'][0]:.2f} at start and {env['load_average_end'][0]:.2f} at the end",
        f"Python {env['python'].split()[0]}; {packages}; {env['wrk']}; commit {commit}",
        "ratios are medians of per-round ratios; MAD is the median absolute deviation of "
        "req/s in percent; delivery is the lowest of the trials, dropped the highest",
        f"delivery can pass 100%: wrk counts the responses it read before its window "
        f"closed, and the server still answers and logs the requests then in flight (up "
        f"to one per connection, {plan.connections})",
    ]
    title = f"### boundlog bench, {time.strftime('%Y-%m-%d %H:%M %Z')}"
    return "\n".join([title, "", *(f"- {bullet}" for bullet in bullets)])


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _run_trials(plan: Plan, settings: TrialSettings, progress: Progress) -> list[TrialResult]:
    results: list[TrialResult] = []
    # SIGTERM stops a run the way Ctrl-C does: servers stopped, finished trials reported.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        for round_index, cells in enumerate(rounds(plan.cells, plan.trials)):
            for cell in cells:
                progress.starting(cell, round_index)
                result = run_trial(cell, round_index, settings)
                results.append(result)
                progress.finished(result)
    except KeyboardInterrupt:
        progress.say("interrupted: reporting the trials that finished")
    finally:
        signal.signal(signal.SIGTERM, previous)
    return results


def run(plan: Plan, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the plan, print the tables, write the artifacts; return the exit status.

    ``out`` and ``err`` default to the streams ``sys.stdout`` and ``sys.stderr`` are when
    it runs (not when this module was imported), so that a redirection is honoured.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    total = len(plan.cells) * plan.trials
    progress = Progress(total, plan.trials, plan.warmup + plan.duration, err)
    try:
        wrk = find_wrk(plan.wrk)
        check_requirements(plan.cells)
    except BenchError as error:
        err.write(f"boundlog bench: {error}\n")
        return 2
    server_cpu, load_cpu = choose_cpus(progress)
    plan.output.mkdir(parents=True, exist_ok=True)
    env = environment(wrk, server_cpu, load_cpu)
    progress.say(
        f"boundlog bench: {len(plan.cells)} cells x {plan.trials} trials, results in {plan.output}/"
    )
    for cell in plan.skipped:
        progress.say(f"skipped {cell.name}: {not_applicable(cell.server, cell.logger, cell.sink)}")
    own_cpus = os.sched_getaffinity(0)
    with tempfile.TemporaryDirectory(dir=plan.output, prefix=".work-") as work:
        settings = TrialSettings(
            wrk=wrk, script=write_script(Path(work), BROWSER_HEADERS if plan.browser else ()),
            workdir=Path(work),
            duration=plan.duration, overload_duration=plan.overload_duration, warmup=plan.warmup, connections=plan.connections,
            gunicorn_threads=plan.gunicorn_threads, max_queue=plan.max_queue,
            server_cpu=server_cpu, load_cpu=load_cpu, syscalls=plan.syscalls,
        )  # fmt: skip
        if load_cpu is not None:
            # The harness polls while the server works: keep it off the server's CPU.
            os.sched_setaffinity(0, {load_cpu})
        try:
            results = _run_trials(plan, settings, progress)
        finally:
            os.sched_setaffinity(0, own_cpus)
    env["load_average_end"] = os.getloadavg()
    summaries = summarize(plan.cells, results)
    checks = [
        *accounting_checks(results),
        *delivery_checks(summaries),
        *overload_checks(summaries, results, plan.max_queue),
        *target_checks(summaries),
    ]
    report = markdown(_header(env, plan), summaries, checks, plan.skipped)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = plan.output / f"bench-{stamp}"
    settings_json = {
        **asdict(plan),
        "output": str(plan.output),
        "cells": [cell.name for cell in plan.cells],
        "skipped": [cell.name for cell in plan.skipped],
    }
    write_json(
        base.with_suffix(".json"), environment=env, settings=settings_json,
        summaries=summaries, checks=checks, trials=results,
    )  # fmt: skip
    base.with_suffix(".md").write_text(report)
    written = [base.with_suffix(".json"), base.with_suffix(".md")]
    if write_chart(base.with_suffix(".png"), summaries):
        written.append(base.with_suffix(".png"))
    out.write(report)
    out.flush()
    progress.say("wrote " + ", ".join(str(path) for path in written))
    failed = sum(not result.ok for result in results)
    broken = [check for check in checks if check.kind == "accounting" and not check.passed]
    if failed or broken or len(results) < total:
        progress.say(
            f"boundlog bench: {failed} failed trials, {len(broken)} failed accounting checks, "
            f"{total - len(results)} trials not run"
        )
        return 1
    return 0
