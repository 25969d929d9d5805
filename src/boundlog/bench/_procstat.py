"""CPU time and peak memory of a server's whole process tree, read from /proc.

Servers such as gunicorn and granian answer requests in worker processes forked from
the one the harness started, so every figure is summed over the tree.  ``utime`` and
``stime`` in ``/proc/<pid>/stat`` already include all of a process's threads.
"""

from __future__ import annotations

import os
from collections import defaultdict
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
