"""What gets measured: the cells (server x logger x sink) and the order trials run in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SERVERS = ("uvicorn", "gunicorn", "granian", "stdlib")
# The peers: what a uvicorn user would deploy instead of boundlog, each set up the way
# its own documentation says (see ``_peers``).  They are ASGI middleware (or, for
# OpenTelemetry, a handler behind one), so they run under the ASGI servers only.
PEER_LOGGERS = ("asgi-logger", "fapilog", "otel-batch")
# How long a peer may hold a line before it writes it, by its defaults: the harness's
# settle waits this long for quiet, so that late lines are counted, and their CPU too.
FLUSH_SECONDS = {"fapilog": 0.25, "otel-batch": 1.0}
# What a peer prints on stderr when it drops records (it has no counter to read):
# OpenTelemetry's batch processor, when its queue is full (once, repeats filtered out).
DROP_MESSAGES = {"otel-batch": b"Queue full, dropping"}
LOGGERS = (
    "none", "default", "capture-only", "naive", "stdlib-queue", "boundlog-drop", "boundlog-wait",
    *PEER_LOGGERS,
)  # fmt: skip
# Loggers that write no line: their delivery is not measured.
SILENT_LOGGERS = ("none", "capture-only")
SINKS = ("file", "devnull", "pipe", "tty")
# Collectors, a real rsyslogd as the reader (see ``_sinks``): what shipping the lines off
# the machine costs.  Asked for by name (``--sinks syslog,relp``), not in --full: they
# need Debian's rsyslog and rsyslog-relp.
NETWORK_SINKS = ("syslog", "relp")
ALL_SINKS = (*SINKS, *NETWORK_SINKS)
BOUNDLOG_LOGGERS = ("boundlog-drop", "boundlog-wait")
ASGI_SERVERS = ("uvicorn", "granian")

# `make bench`: the two servers and the loggers that answer the main question (what does
# boundlog cost next to no log, the server's own and the peers), in about 4 minutes.
QUICK_SERVERS = ("uvicorn", "gunicorn")
QUICK_LOGGERS = ("none", "default", "boundlog-drop", *PEER_LOGGERS)
QUICK_SINKS = ("file",)

# The overload scenario: a pipe whose reader drains far fewer lines a second than the
# server answers, so boundlog's queue fills up and its policy decides what happens.
OVERLOAD_LOGGERS = ("none", *BOUNDLOG_LOGGERS)
OVERLOAD_SINK = "pipe"
DEFAULT_READER_RATE = 2000


@dataclass(frozen=True)
class Cell:
    """One configuration to measure; each trial of it starts a fresh server."""

    server: str
    logger: str
    sink: str
    #: Lines per second the sink's reader may drain; 0 means as fast as it can.
    reader_rate: int = 0

    @property
    def overload(self) -> bool:
        """Whether this is an overload cell (its reader is throttled)."""
        return self.reader_rate > 0

    @property
    def sink_label(self) -> str:
        """The sink as tables show it, with the reader's rate when throttled."""
        return f"slow-{self.sink}@{self.reader_rate}/s" if self.overload else self.sink

    @property
    def name(self) -> str:
        """``server/logger/sink``, unique within a run."""
        return f"{self.server}/{self.logger}/{self.sink_label}"

    @property
    def uses_boundlog(self) -> bool:
        """Whether the server logs through boundlog (and so reports its stats)."""
        return self.logger in BOUNDLOG_LOGGERS


def not_applicable(server: str, logger: str, sink: str = "file") -> str | None:
    """Why ``logger`` cannot run under ``server`` to ``sink``, or None when it can."""
    if logger in PEER_LOGGERS and server not in ASGI_SERVERS:
        return "an ASGI middleware: uvicorn and granian only"
    if sink in NETWORK_SINKS and logger not in (*BOUNDLOG_LOGGERS, *SILENT_LOGGERS):
        return "writes to stdout: only boundlog's loggers send to a collector"
    return None


def matrix(servers: Sequence[str], loggers: Sequence[str], sinks: Sequence[str]) -> list[Cell]:
    """Every combination that applies, grouped by server then sink, loggers in order given."""
    return [
        Cell(server, logger, sink)
        for server in servers
        for sink in sinks
        for logger in loggers
        if not_applicable(server, logger, sink) is None
    ]


def skipped(servers: Sequence[str], loggers: Sequence[str], sinks: Sequence[str]) -> list[Cell]:
    """The combinations :func:`matrix` leaves out because the logger does not apply."""
    return [
        Cell(server, logger, sink)
        for server in servers
        for sink in sinks
        for logger in loggers
        if not_applicable(server, logger, sink) is not None
    ]


def overload_cells(servers: Sequence[str], reader_rate: int) -> list[Cell]:
    """The overload scenario for each server: no log as the baseline, then both policies."""
    return [
        Cell(server, logger, OVERLOAD_SINK, reader_rate)
        for server in servers
        for logger in OVERLOAD_LOGGERS
    ]


def rounds(cells: Sequence[Cell], trials: int) -> list[list[Cell]]:
    """One list per trial round, each rotated so that no cell always runs first.

    Round ``r`` starts ``r * len(cells) / trials`` places further along, so the rounds
    spread their starting points over the whole list (A B C D, C D A B, ...): slow drift
    of the machine then lands on different cells in different rounds.
    """
    count = len(cells)
    ordered: list[list[Cell]] = []
    for round_index in range(trials):
        shift = round_index * count // trials if count else 0
        ordered.append([*cells[shift:], *cells[:shift]])
    return ordered
