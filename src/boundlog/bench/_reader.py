"""The process on the far end of a pipe or pseudo terminal: it drains and counts lines.

Run as ``python -m boundlog.bench._reader CONTROL_FILE`` with the read end as stdin.
It shares two numbers with the harness through a memory-mapped file: the lines it has
read so far (it writes them) and the rate it may read at (the harness writes it; 0 means
as fast as it can).  Sharing memory instead of messages keeps the harness's polling
free of system calls in the reader and lets the harness throttle the reader while it
runs.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import sys
import time
from pathlib import Path

_LAYOUT = struct.Struct("<QQ")
# Drain in big gulps when free; in small ones when throttled, so that the pace is smooth
# and the pipe fills up the way it does in front of a slow log shipper.
_FREE_READ = 1 << 20
_THROTTLED_READ = 4096
# While keeping to a pace, look at the allowed rate this often: a release takes effect
# at once even when the pace is slow.
_RECHECK_SECONDS = 0.05


class ReaderControl:
    """The two numbers shared between the harness and a reader process."""

    def __init__(self, path: Path, *, create: bool) -> None:
        if create:
            path.write_bytes(bytes(_LAYOUT.size))
        with path.open("r+b") as file:
            self._memory = mmap.mmap(file.fileno(), _LAYOUT.size)

    @property
    def lines(self) -> int:
        """Lines the reader has drained so far."""
        return int(_LAYOUT.unpack_from(self._memory)[0])

    @lines.setter
    def lines(self, count: int) -> None:
        struct.pack_into("<Q", self._memory, 0, count)

    @property
    def rate(self) -> int:
        """Lines per second the reader may drain; 0 for no limit."""
        return int(_LAYOUT.unpack_from(self._memory)[1])

    @rate.setter
    def rate(self, lines_per_second: int) -> None:
        struct.pack_into("<Q", self._memory, 8, lines_per_second)

    def close(self) -> None:
        """Unmap the shared memory."""
        self._memory.close()


def drain(fd: int, control: ReaderControl) -> int:
    """Read ``fd`` until end of file, counting lines and keeping to the allowed rate."""
    lines = 0
    # (start time, lines at start, rate) of the current throttled stretch.
    pace: tuple[float, int, int] | None = None
    while True:
        rate = control.rate
        try:
            chunk = os.read(fd, _THROTTLED_READ if rate else _FREE_READ)
        except OSError as error:
            # A pseudo terminal's master reports EIO once every slave end has closed.
            if error.errno == errno.EIO:
                break
            raise
        if not chunk:
            break
        lines += chunk.count(b"\n")
        control.lines = lines
        if not rate:
            pace = None
        elif pace is None or pace[2] != rate:
            pace = (time.monotonic(), lines, rate)
        else:
            started, lines_at_start, _ = pace
            due = started + (lines - lines_at_start) / rate
            while control.rate == rate and (ahead := due - time.monotonic()) > 0:
                time.sleep(min(ahead, _RECHECK_SECONDS))
    return lines


def main() -> int:
    """Drain stdin into the control file named on the command line."""
    control = ReaderControl(Path(sys.argv[1]), create=False)
    try:
        drain(sys.stdin.fileno(), control)
    finally:
        control.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
