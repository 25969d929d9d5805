"""The ``boundlog bench`` command line."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from ._loggers import BOUNDLOG_MAX_QUEUE
from ._matrix import (
    ALL_SINKS,
    DEFAULT_READER_RATE,
    LOGGERS,
    QUICK_LOGGERS,
    QUICK_SERVERS,
    QUICK_SINKS,
    SERVERS,
    SINKS,
    matrix,
    overload_cells,
    skipped,
)
from ._run import Plan, run

DESCRIPTION = """\
Measure what access logging costs real servers: each server runs as its own process
on a loopback port, pinned to one CPU, loaded by wrk pinned to another, once per
logger and sink, in rotated trials.  Prints a table of requests/s and server CPU per
request as ratios to no logging, and writes a JSON artifact, a markdown table and
(with matplotlib) a PNG chart into the output folder.  Without options it runs the
quick matrix (uvicorn and gunicorn; none, default, boundlog-drop and the peers
asgi-logger, fapilog and otel-batch, which run under uvicorn and granian only; file sink).
"""


def _names(choices: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(name.strip() for name in text.split(",") if name.strip())
        if names == ("all",):
            return tuple(choices)
        unknown = [name for name in names if name not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"choose from {', '.join(choices)} (comma-separated) or all"
            )
        return names

    return parse


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"a whole number >= {minimum}, not {text!r}")
        return value

    return parse


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the benchmark's options to ``parser`` (shared by both ways to run it)."""
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    choose = parser.add_argument_group("what to measure")
    choose.add_argument("--servers", type=_names(SERVERS), help=f"of {', '.join(SERVERS)}")
    choose.add_argument("--loggers", type=_names(LOGGERS), help=f"of {', '.join(LOGGERS)}")
    choose.add_argument(
        "--sinks",
        type=_names(ALL_SINKS),
        help=f"of {', '.join(ALL_SINKS)} (syslog and relp: a real rsyslogd, not in --full)",
    )
    choose.add_argument(
        "--full",
        action="store_true",
        help="the whole matrix: every server, logger and sink, plus the overload scenario "
        "(--servers/--loggers/--sinks still narrow it)",
    )
    choose.add_argument(
        "--overload",
        action="store_true",
        help="add the overload scenario: none, boundlog-drop and boundlog-wait into a pipe "
        "whose reader is throttled to --reader-rate lines/s",
    )
    choose.add_argument(
        "--reader-rate",
        type=_count(1),
        default=DEFAULT_READER_RATE,
        help="lines/s the overload scenario's reader drains (default %(default)s)",
    )
    choose.add_argument(
        "--browser",
        action="store_true",
        help="send with every request the 14 header fields Firefox sends for a page (Host included), "
        "instead of wrk's Host alone",
    )
    how = parser.add_argument_group("how to measure")
    how.add_argument("--trials", type=_count(1), default=3, help="rotated rounds (default 3)")
    how.add_argument(
        "--duration", type=_count(1), default=5, help="seconds per timed trial (default 5)"
    )
    how.add_argument(
        "--overload-duration",
        type=_count(1),
        default=10,
        help="seconds per timed overload trial, long enough to fill the queue (default 10)",
    )
    how.add_argument(
        "--warmup", type=_count(0), default=1, help="seconds of warm-up per trial (default 1)"
    )
    how.add_argument(
        "--connections", type=_count(1), default=64, help="wrk connections (default 64)"
    )
    how.add_argument(
        "--gunicorn-threads",
        type=_count(1),
        default=4,
        help="threads of gunicorn's gthread worker (default 4)",
    )
    how.add_argument(
        "--max-queue",
        type=_count(1),
        default=BOUNDLOG_MAX_QUEUE,
        help="boundlog's queue bound (default %(default)s, boundlog's own default)",
    )
    how.add_argument("--wrk", default="wrk", help="the wrk executable (default: wrk on PATH)")
    how.add_argument(
        "--syscalls",
        action="store_true",
        help="count each thread's system calls with perf stat for the breakdown (Debian: "
        "linux-perf; root or a low perf_event_paranoid); each call then costs a little more",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("bench-results"),
        help="folder for the JSON, markdown and PNG results (default ./bench-results)",
    )


def plan_from(args: argparse.Namespace) -> Plan:
    """Turn parsed options into the list of cells and the settings."""
    full = args.full
    servers = args.servers or (SERVERS if full else QUICK_SERVERS)
    loggers = args.loggers or (LOGGERS if full else QUICK_LOGGERS)
    sinks = args.sinks or (SINKS if full else QUICK_SINKS)
    cells = matrix(servers, loggers, sinks)
    if full or args.overload:
        cells += overload_cells(servers, args.reader_rate)
    return Plan(
        cells=tuple(cells),
        skipped=tuple(skipped(servers, loggers, sinks)),
        trials=args.trials,
        duration=args.duration,
        overload_duration=args.overload_duration,
        warmup=args.warmup,
        connections=args.connections,
        output=args.output,
        wrk=args.wrk,
        gunicorn_threads=args.gunicorn_threads,
        max_queue=args.max_queue,
        syscalls=args.syscalls,
        browser=args.browser,
    )


def run_from(args: argparse.Namespace) -> int:
    """Run the benchmark the parsed options describe."""
    return run(plan_from(args))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m boundlog.bench``."""
    parser = argparse.ArgumentParser(prog="python -m boundlog.bench")
    configure_parser(parser)
    return run_from(parser.parse_args(argv))
