"""The sinks a server's log lines go to, and how the harness counts lines arriving there.

Every logger under test writes its lines to the server's standard output, so a sink is
just the descriptor handed to the server as stdout:

* ``file``: a regular file opened for appending, counted by reading it;
* ``devnull``: ``/dev/null``, where nothing can be counted;
* ``pipe``: a pipe drained by a reader process (see ``_reader``), which counts;
* ``tty``: a pseudo terminal whose master a reader process drains and counts;
* ``syslog``, ``relp``: a real rsyslogd on a loopback port (imtcp, imrelp) writing each
  message to a file, counted by reading it.  Only boundlog's loggers send there (their
  ``sink=`` is the collector's URL); the server's stdout goes to ``/dev/null``.
"""

from __future__ import annotations

import array
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import termios
import time
from pathlib import Path

from ._errors import BenchError
from ._reader import ReaderControl
from ._spawn import spawn, stop

_COUNT_CHUNK = 1 << 20


class Sink:
    """The descriptor a server writes its log to, and the line count at its far end."""

    #: The collector boundlog's loggers send to, for the network sinks.
    url: str | None = None

    def __init__(self, server_fd: int) -> None:
        #: Handed to the server as its stdout; the harness closes its copy afterwards.
        self.server_fd = server_fd
        self._window_start = 0

    def handed_over(self) -> None:
        """Close the harness's copy of the server's end, once the server holds it."""
        if self.server_fd >= 0:
            os.close(self.server_fd)
            self.server_fd = -1

    def lines(self) -> int | None:
        """Lines that have reached the far end so far, or None if they cannot be seen."""
        return None

    def start_window(self) -> None:
        """Start counting from zero: lines seen before now are not the trial's."""
        self._window_start = self.lines() or 0

    def window_lines(self) -> int | None:
        """Lines that arrived since :meth:`start_window`, or None if not countable."""
        lines = self.lines()
        return None if lines is None else lines - self._window_start

    def drained(self) -> bool:
        """Whether nothing waits between the server and the far end."""
        return True

    def pace(self, lines_per_second: int) -> None:
        """Throttle the far end to this many lines a second (0: no limit)."""
        if lines_per_second:
            raise ValueError(f"{type(self).__name__} cannot be throttled")

    def close(self, timeout: float) -> None:
        """Release everything the sink holds once the server has exited."""
        self.handed_over()


class _CountedFile:
    """Counts the lines of a file that only grows, reading each byte once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._counted_bytes = 0
        self._counted_lines = 0

    def lines(self) -> int:
        try:
            with self.path.open("rb") as file:
                file.seek(self._counted_bytes)
                while chunk := file.read(_COUNT_CHUNK):
                    self._counted_bytes += len(chunk)
                    self._counted_lines += chunk.count(b"\n")
        except FileNotFoundError:
            pass  # rsyslogd creates its file at the first message
        return self._counted_lines


class FileSink(_CountedFile, Sink):
    """A regular file, appended to, so that truncating it restarts the count."""

    def __init__(self, path: Path) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC
        Sink.__init__(self, os.open(path, flags, 0o644))
        _CountedFile.__init__(self, path)

    def start_window(self) -> None:
        # The writers append, so after truncation their next line lands at offset 0,
        # and the file holds exactly the trial's lines.
        os.truncate(self.path, 0)
        self._counted_bytes = self._counted_lines = 0
        super().start_window()

    def close(self, timeout: float) -> None:
        super().close(timeout)
        self.path.unlink(missing_ok=True)


class DevNullSink(Sink):
    """``/dev/null``: the cost of formatting and the write call, without any I/O."""

    def __init__(self) -> None:
        super().__init__(os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC))


class ReaderSink(Sink):
    """A pipe or pseudo terminal with a reader process draining the far end."""

    def __init__(self, read_fd: int, write_fd: int, control_path: Path, cpu: int | None) -> None:
        super().__init__(write_fd)
        self._control_path = control_path
        self._control = ReaderControl(control_path, create=True)
        command = [sys.executable, "-m", "boundlog.bench._reader", str(control_path)]
        # A second read end, never read from: it tells how many bytes wait unread.
        self._unread_probe = os.dup(read_fd)
        try:
            self._reader = spawn(command, cpu, stdin=read_fd)
        finally:
            os.close(read_fd)

    def lines(self) -> int:
        return self._control.lines

    def drained(self) -> bool:
        unread = array.array("i", [0])
        fcntl.ioctl(self._unread_probe, termios.FIONREAD, unread)
        return unread[0] == 0

    def pace(self, lines_per_second: int) -> None:
        self._control.rate = lines_per_second

    def close(self, timeout: float) -> None:
        super().close(timeout)
        self._control.rate = 0
        # The reader stops at end of file, which comes when the server has exited.
        try:
            self._reader.wait(timeout)
        except subprocess.TimeoutExpired:
            stop(self._reader, timeout)
        self._control.close()
        os.close(self._unread_probe)
        self._control_path.unlink(missing_ok=True)


class CollectorSink(_CountedFile, Sink):
    """A real rsyslogd that takes ``syslog://`` (imtcp) or ``relp://`` (imrelp) on a
    loopback port and writes each message as a line to a file."""

    def __init__(self, kind: str, workdir: Path, cpu: int | None) -> None:
        rsyslogd = find_rsyslogd()
        if rsyslogd is None:
            raise BenchError(NEEDS_RSYSLOGD)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        # Absolute: rsyslogd changes to / as it starts, and would not find a relative
        # path (the default results folder is one).
        directory = (workdir / f"rsyslog-{kind}").absolute()
        directory.mkdir(exist_ok=True)
        _CountedFile.__init__(self, directory / "received.log")
        self.path.unlink(missing_ok=True)
        module = "imtcp" if kind == "syslog" else "imrelp"
        config = directory / "rsyslog.conf"
        config.write_text(
            f'global(maxMessageSize="64k" workDirectory="{directory}")\n'
            f'module(load="{module}")\n'
            f'input(type="{module}" address="127.0.0.1" port="{port}")\n'
            'template(name="msg" type="string" string="%msg%\\n")\n'
            f'action(type="omfile" file="{self.path}" template="msg")\n'
        )
        Sink.__init__(self, os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC))
        self.url = f"{kind}://127.0.0.1:{port}"
        command = [rsyslogd, "-n", "-f", str(config), "-i", str(directory / "pid")]
        self._daemon = spawn(command, cpu, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not _listening(port):
            if self._daemon.poll() is not None or time.monotonic() > deadline:
                stop(self._daemon, 5)
                raise BenchError(f"rsyslogd did not start listening on {self.url}")
            time.sleep(0.02)

    def close(self, timeout: float) -> None:
        super().close(timeout)
        self._daemon.send_signal(signal.SIGTERM)
        try:
            self._daemon.wait(timeout)
        except subprocess.TimeoutExpired:
            stop(self._daemon, timeout)


NEEDS_RSYSLOGD = (
    "the syslog and relp sinks need rsyslogd: sudo apt-get install rsyslog rsyslog-relp"
)


def find_rsyslogd() -> str | None:
    """rsyslogd's path (in /usr/sbin, which a user's PATH may lack), or None."""
    return shutil.which("rsyslogd") or shutil.which("rsyslogd", path="/usr/sbin:/sbin")


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def open_sink(kind: str, workdir: Path, reader_cpu: int | None) -> Sink:
    """Create a fresh sink of ``kind`` for one trial."""
    if kind == "file":
        return FileSink(workdir / "access.log")
    if kind == "devnull":
        return DevNullSink()
    if kind == "pipe":
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        return ReaderSink(read_fd, write_fd, workdir / "pipe-reader.count", reader_cpu)
    if kind == "tty":
        master_fd, slave_fd = os.openpty()
        return ReaderSink(master_fd, slave_fd, workdir / "tty-reader.count", reader_cpu)
    if kind in ("syslog", "relp"):
        return CollectorSink(kind, workdir, reader_cpu)
    raise ValueError(f"unknown sink {kind!r}")
