"""System calls per thread over the timed window, counted by ``perf stat``.

/proc counts a thread's CPU time and context switches but not its system calls; the
kernel's ``raw_syscalls:sys_enter`` tracepoint does, and ``perf stat --per-thread``
reads it for every thread of the processes it attaches to.  The kernel then pays a
little for each call, so the count is asked for (``--syscalls``), not taken by
default.  Where perf is missing or the kernel refuses it (``perf_event_paranoid``, a container
without the tracepoint), the counts are None and the breakdown says n/a.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

_EVENT = "raw_syscalls:sys_enter"
_STOP_TIMEOUT = 10.0


class SyscallCounter:
    """``perf stat`` attached to some processes from ``start`` until ``stop``."""

    def __init__(self, output: Path) -> None:
        self._output = output
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, pids: Iterable[int]) -> None:
        """Count the system calls of every thread ``pids`` have now, from the moment
        this returns: perf starts disabled and is enabled through its control pipe, and
        its acknowledgement says when it counts."""
        perf = shutil.which("perf")
        if perf is None:
            return
        self._output.unlink(missing_ok=True)
        control_read, control = os.pipe()
        acknowledgements, ack_write = os.pipe()
        command = [perf, "stat", "--per-thread", "-x,", "-e", _EVENT, "--delay=-1",
                   f"--control=fd:{control_read},{ack_write}",
                   "-o", str(self._output), "-p", ",".join(map(str, pids))]  # fmt: skip
        try:
            self._process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(control_read, ack_write),
            )  # fmt: skip
        except OSError:
            self._process = None
        finally:
            os.close(control_read)
            os.close(ack_write)
        with open(control, "wb", buffering=0) as commands, open(acknowledgements, "rb") as answers:
            if self._process is None:
                return
            commands.write(b"enable\n")
            if answers.readline() != b"ack\n":
                # perf exited without counting (the kernel refused it).
                self.stop()

    def stop(self) -> dict[int, int] | None:
        """The counts by thread id since ``start``; None if perf did not count."""
        process, self._process = self._process, None
        if process is None:
            return None
        # perf stat prints its counts when interrupted, as after Ctrl-C.
        process.send_signal(signal.SIGINT)
        try:
            process.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return None
        try:
            text = self._output.read_text()
        except OSError:
            return None
        return parse_per_thread(text)


def parse_per_thread(text: str) -> dict[int, int] | None:
    """Counts by thread id from ``perf stat --per-thread -x,`` output.

    Each line reads ``<command>-<tid>,<count>,<unit>,<event>,...``; a thread perf could
    not count says ``<not counted>``, and a file without one counted line is None.
    """
    counts: dict[int, int] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 4 or fields[3] != _EVENT:
            continue
        _, _, tid = fields[0].rpartition("-")
        if tid.isdigit() and fields[1].isdigit():
            counts[int(tid)] = counts.get(int(tid), 0) + int(fields[1])
    return counts or None
