"""What the unit tests import: blocked pipes and fifos, deadlines instead of sleeps, a local
zone, threads run at once.

Tests import these from here, never from ``conftest`` (pytest imports conftest itself,
and a second import under another name would give a second ``BlockedPipe`` class).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

F_SETPIPE_SZ = 1031


@contextmanager
def local_zone(name: str) -> Iterator[None]:
    """Run the body with the process's local time zone set to ``name``."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` until it holds; fail the test if it does not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {condition}")
        time.sleep(0.001)


def run_in_threads(*targets: Callable[[], object]) -> None:
    """Start a thread for each of ``targets``, then wait until they have all ended."""
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@contextmanager
def stalled_fifo(directory: Path) -> Iterator[Path]:
    """A named pipe (4 KiB) whose reader never reads: a log's writer blocks writing to it.

    Its reader is closed at the end, which fails the stuck write, so that a writer
    close() gave up on ends too.
    """
    fifo = directory / "stalled"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fcntl.fcntl(reader, F_SETPIPE_SZ, 4096)
        yield fifo
    finally:
        os.close(reader)


class BlockedPipe:
    """A pipe already full, so that the first write to it blocks until ``release()``."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self._open = {self.read_fd, self.write_fd}
        fcntl.fcntl(self.write_fd, F_SETPIPE_SZ, 4096)
        os.set_blocking(self.write_fd, False)
        self.filler = 0
        try:
            while True:
                self.filler += os.write(self.write_fd, b"#" * 4096)
        except BlockingIOError:
            pass
        os.set_blocking(self.write_fd, True)
        self._chunks: list[bytes] = []
        self._reader: threading.Thread | None = None

    def release(self) -> None:
        """Start draining the pipe in a thread, so blocked writes complete."""
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while chunk := os.read(self.read_fd, 65536):
            self._chunks.append(chunk)

    def lines(self) -> list[bytes]:
        """Close the write end and return the lines written after the filler."""
        assert self._reader is not None
        self._close(self.write_fd)
        self._reader.join(10)
        data = b"".join(self._chunks)[self.filler :]
        return data.splitlines()

    def _close(self, fd: int) -> None:
        # Closing a descriptor number twice could close an unrelated file that reused it.
        if fd in self._open:
            self._open.remove(fd)
            os.close(fd)

    def close(self) -> None:
        """Close the write end, let the reader see end-of-file, then close the read end."""
        self._close(self.write_fd)
        if self._reader is not None:
            self._reader.join(10)
        self._close(self.read_fd)
