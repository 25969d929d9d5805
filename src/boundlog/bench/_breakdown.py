"""Where a trial's CPU went: per thread, in the kernel, in switches and in the collector.

A ratio of CPU per request says how much a logger costs, not where.  The breakdown
splits the same timed window (wrk's run and the settling after it) by what /proc
counts per thread, what ``perf stat`` counts per thread (``_syscalls``) and what the
server's garbage collector counted (``gc.get_stats()``, read over its stats socket):

* user and system CPU of the server's own threads (the event loop, gunicorn's workers,
  granian's runtime) and of boundlog's writer thread, found by its name;
* context switches of all threads, voluntary (a thread waited: a lock, a read, a
  sleep) and involuntary (the kernel took its CPU);
* system calls of all threads and of the writer alone;
* garbage-collector runs in the process that answers the stats socket (the one that
  runs the application): all of them, and the full ones (of the oldest generation),
  which walk every object the process has.

Every figure is per request, from the requests wrk completed in the window.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._procstat import ThreadTimes


@dataclass(frozen=True)
class Breakdown:
    """What one trial's window cost, split up, in totals over the window."""

    server_user: float
    server_system: float
    writer_user: float
    writer_system: float
    voluntary: int
    involuntary: int
    #: None where perf could not count (see ``_syscalls``).
    syscalls: int | None
    writer_syscalls: int | None
    gc_collections: int | None
    gc_full_collections: int | None
    #: The writer thread's id, None where there is none (found by its name).
    writer: int | None = None

    @classmethod
    def between(
        cls,
        before: Mapping[int, ThreadTimes],
        after: Mapping[int, ThreadTimes],
        *,
        writer: int | None,
        syscalls: Mapping[int, int] | None,
        gc_collections: int | None,
        gc_full_collections: int | None,
    ) -> Breakdown:
        """The window from two snapshots of the tree's threads (``_procstat.tree_threads``).

        A thread started in the window counts from zero; one that ended in it is lost
        (the servers measured start their threads before the window and keep them).
        """
        nothing = ThreadTimes(0.0, 0.0, 0, 0)
        server = [0.0, 0.0]
        writer_times = [0.0, 0.0]
        voluntary = involuntary = 0
        for tid, now in after.items():
            then = before.get(tid, nothing)
            chosen = writer_times if tid == writer else server
            chosen[0] += now.user - then.user
            chosen[1] += now.system - then.system
            voluntary += now.voluntary - then.voluntary
            involuntary += now.involuntary - then.involuntary
        return cls(
            server_user=server[0],
            server_system=server[1],
            writer_user=writer_times[0],
            writer_system=writer_times[1],
            voluntary=voluntary,
            involuntary=involuntary,
            syscalls=None if syscalls is None else sum(syscalls.values()),
            writer_syscalls=None if syscalls is None or writer is None
            else syscalls.get(writer, 0),
            gc_collections=gc_collections,
            gc_full_collections=gc_full_collections,
            writer=writer,
        )  # fmt: skip

    def per_request(self, requests: int) -> dict[str, float | None]:
        """The figures the report shows, per request (µs, or counts per 1000 requests)."""

        def per(value: float | None, unit: float) -> float | None:
            return None if value is None or not requests else value * unit / requests

        return {
            "server_user_us": per(self.server_user, 1e6),
            "server_system_us": per(self.server_system, 1e6),
            "writer_user_us": per(self.writer_user, 1e6),
            "writer_system_us": per(self.writer_system, 1e6),
            "switches_per_1k": per(self.voluntary + self.involuntary, 1e3),
            "syscalls_per_request": per(self.syscalls, 1.0),
            "writer_syscalls_per_1k": per(self.writer_syscalls, 1e3),
            "gc_per_1k": per(self.gc_collections, 1e3),
            "full_gc_per_1k": per(self.gc_full_collections, 1e3),
        }


def median_breakdown(figures: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    """The median of each figure over the trials that have it."""
    names = dict.fromkeys(name for trial in figures for name in trial)
    medians: dict[str, float | None] = {}
    for name in names:
        values = [value for trial in figures if (value := trial.get(name)) is not None]
        medians[name] = statistics.median(values) if values else None
    return medians
