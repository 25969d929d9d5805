"""Starting helper processes pinned to a CPU, and stopping them for sure."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from typing import Any


def pinning(cpu: int | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that pins the child (and everything it forks) to ``cpu``."""
    if cpu is None:
        return None

    def pin() -> None:
        os.sched_setaffinity(0, {cpu})

    return pin


def spawn(command: Sequence[str], cpu: int | None, **options: Any) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own process group, pinned to ``cpu`` when one is given.

    The harness runs no threads of its own, which is what makes ``preexec_fn`` safe.
    """
    return subprocess.Popen(
        list(command), preexec_fn=pinning(cpu), start_new_session=True, **options
    )


def stop(process: subprocess.Popen[bytes], timeout: float, sig: int = signal.SIGTERM) -> bool:
    """Ask the process to stop with ``sig``; kill its whole group after ``timeout`` s.

    Returns whether it stopped on its own (a graceful exit, whose drain we rely on).
    Whatever is left of its process group afterwards (a child it did not wait for) is
    killed either way: nothing the harness started may outlive it and load the CPUs of
    the next measurement.
    """
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
    try:
        process.wait(timeout)
        graceful = True
    except subprocess.TimeoutExpired:
        graceful = False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return graceful
