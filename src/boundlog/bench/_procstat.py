"""CPU time and peak memory of a server's whole process tree, read from /proc.

Servers such as gunicorn and granian answer requests in worker processes forked from
the one the harness started, so every figure is summed over the tree.  ``utime`` and
``stime`` in ``/proc/<pid>/stat`` already include all of a process's threads;
``tree_threads`` reads them one by one, for the breakdown of where the CPU goes.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces or parentheses:
    # the fields that follow start after the last ")"; the first of them is field 3.
    return text[text.rindex(")") + 2 :].split()


def process_tree(root: int) -> list[int]:
    """``root`` and all its living descendants."""
    children: defaultdict[int, list[int]] = defaultdict(list)
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                children[int(fields[1])].append(int(entry.name))
    tree = [root]
    for pid in tree:
        tree.extend(children.get(pid, ()))
    return tree


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of one process (all its threads), in seconds."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # Fields 14 and 15 of the stat line: utime and stime, in clock ticks.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(root: int) -> float:
    """User plus system CPU time of ``root``'s whole process tree, in seconds."""
    return sum(cpu_seconds(pid) for pid in process_tree(root))


def peak_rss_bytes(pid: int) -> int:
    """The most resident memory the process has ever used (VmHWM), in bytes."""
    try:
        status = (_PROC / str(pid) / "status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def tree_peak_rss_bytes(root: int) -> int:
    """The sum of every process's peak RSS in ``root``'s tree.

    Each process's peak may fall at a different moment, so this is an upper bound on
    the tree's peak; with one worker process doing all the work it is close to exact.
    """
    return sum(peak_rss_bytes(pid) for pid in process_tree(root))


@dataclass(frozen=True)
class ThreadTimes:
    """One thread's CPU time and context switches so far, from ``/proc/<pid>/task/<tid>``."""

    #: User and system CPU time, in seconds.
    user: float
    system: float
    #: Switches away because it waited (a lock, a read, a sleep) and because the kernel
    #: took the CPU from it.
    voluntary: int
    involuntary: int


def _thread_times(task: Path) -> ThreadTimes | None:
    try:
        stat = (task / "stat").read_text()
        status = (task / "status").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    switches = dict.fromkeys(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"), 0)
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in switches:
            switches[name] = int(value)
    return ThreadTimes(
        user=int(fields[11]) / CLOCK_TICKS,
        system=int(fields[12]) / CLOCK_TICKS,
        voluntary=switches["voluntary_ctxt_switches"],
        involuntary=switches["nonvoluntary_ctxt_switches"],
    )


def tree_threads(root: int) -> dict[int, ThreadTimes]:
    """Every living thread of ``root``'s process tree, by its thread id."""
    threads = {}
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            for task in (_PROC / str(pid) / "task").iterdir():
                if (times := _thread_times(task)) is not None:
                    threads[int(task.name)] = times
    return threads
