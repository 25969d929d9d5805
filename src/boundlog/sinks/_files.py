"""Where lines go: stdout, stderr, a file, a descriptor, a file object, a collector or a logger.

A sink is a file descriptor plus the knowledge of how to write a batch to it whole.
Every write is a plain ``os.write`` on the descriptor, bypassing Python's buffered file
objects: the writer thread already batches, and a second buffer would only hide lines
from ``tail -f`` and from a crash-loss bound.
"""

from __future__ import annotations

import errno
import io
import os
import select
import stat
import threading
from collections.abc import Callable
from typing import BinaryIO, Protocol

from .._errors import ConfigurationError, SinkError
from ._logging import SCHEME as LOGGING_SCHEME
from ._logging import LoggingSink
from ._network import NetworkSink
from ._urls import (
    OTLP_SCHEMES,
    looks_like_url,
    missing_slashes,
    refuse_blanks,
    refuse_missing_slashes,
)
from .otlp._sink import OtlpSink

#: What a sink string starts with to name an OTLP collector.
_OTLP_PREFIXES = tuple(f"{scheme}://" for scheme in OTLP_SCHEMES)

# Writes of at most PIPE_BUF bytes to a pipe are atomic: several processes sharing one
# pipe (gunicorn workers on one stdout) never interleave inside such a write.
PIPE_BUF = select.PIPE_BUF

SinkSpec = str | int | BinaryIO | NetworkSink | LoggingSink | OtlpSink


class Destination(Protocol):
    """What the writer thread needs of a sink: a :class:`Sink` (a descriptor), a
    :class:`~boundlog.NetworkSink` (a connection it makes itself) or a
    :class:`~boundlog.LoggingSink` (a logger)."""

    name: str
    path: str | None
    #: Bytes of the batch under way that went out, as whole lines or not.
    delivered: int
    #: Set by close() when it gives up on the sink.
    stopped: bool
    #: Whether setting ``stopped`` wakes a writer blocked in ``write`` (a socket shut
    #: down): close() then lets the writer thread end before it counts the totals.
    #: A write blocked on a file or pipe cannot be woken.
    wakes_when_stopped: bool
    #: Whether ``write`` returns before the collector confirmed the lines (RELP's
    #: acknowledgements): its lines are then neither written nor failed until the sink
    #: counts them in ``confirmed``.  False: ``write``'s result is final.
    confirms_later: bool
    #: Lines of earlier writes confirmed so far, in order: a running total that only
    #: the writer thread moves (inside ``write`` and ``settle``) and that only grows,
    #: read by close() giving up.  Always 0 unless ``confirms_later``.
    confirmed: int

    @property
    def retries(self) -> int:
        """Attempts that failed and were retried inside ``write``."""

    def write(self, data: bytes) -> tuple[int, OSError | None]:
        """Write the batch; return the bytes written and the error that stopped it.

        A sink that ``confirms_later`` returns once the batch is handed over: its lines
        are confirmed later, and one that cannot deliver them retries until ``stopped``.
        """

    def settle(self) -> None:
        """Wait until every line handed over is confirmed, or ``stopped``: the writer asks
        when nothing is left to write (flush, close, an idle moment)."""

    def isatty(self) -> bool:
        """Whether the lines go to a terminal."""

    def reopen(self) -> OSError | None:
        """Reopen by path, if the sink has one."""

    def identity(self) -> tuple[int, int] | None:
        """The file's device and inode, if any."""

    def replaced(self) -> bool:
        """Whether the path now names another file."""

    def size(self) -> int | None:
        """The size of the regular file being written; None for anything else."""

    def watch_backlog(self, waiting: Callable[[], int]) -> None:
        """Learn how many records wait in the queue behind the sink, for its own reports."""

    def hurry(self) -> None:
        """flush() or close() waits: retry at once whatever the sink waits to retry."""

    def after_fork(self) -> None:
        """In a forked child, before its writer starts."""

    def close(self) -> None:
        """Release what the sink opened."""


# How long a write to a non-blocking descriptor waits for room before it looks whether
# close() gave up on it.
_WAIT_WRITABLE_MS = 1000
# How often the writer tries again to open a FIFO that nobody reads: nothing tells a
# writer that a reader came, and an open that fails costs one system call.
_READER_RETRY_SECONDS = 0.2


class Sink:
    """An open descriptor and the rules for writing whole lines to it."""

    __slots__ = ("_hurried", "_owns_fd", "delivered", "fd", "is_pipe", "name", "path", "stopped",
                 "unavailable")  # fmt: skip

    #: A write blocked on a file or pipe cannot be woken.
    wakes_when_stopped = False

    # A write that fails returns its error to the writer, which counts it: none is
    # retried here.
    retries = 0

    #: A write's result is final: nothing is confirmed later.
    confirms_later = False
    confirmed = 0

    def settle(self) -> None:
        """Nothing is confirmed later."""

    def __init__(self, fd: int, name: str, *, owns_fd: bool, path: str | None = None) -> None:
        self.fd = fd
        self.name = name
        #: The file's path when the sink was named by one; only such a sink can reopen.
        self.path = path
        self._owns_fd = owns_fd
        # Progress of the write under way, readable by another thread: close() counts
        # the lines a stuck write already delivered before it gives up on the rest.
        self.delivered = 0
        # Set by close() when it gives up: no further chunk is started.
        self.stopped = False
        # Why the sink cannot take lines yet (a FIFO nobody reads), for the loss
        # reports; None once it can.
        self.unavailable: str | None = None
        # Cuts the writer's wait for a FIFO's reader short: flush() and close() ask.
        self._hurried = threading.Event()
        if fd < 0:
            self.is_pipe = True
            return
        try:
            self.is_pipe = _is_pipe(fd)
        except OSError as error:
            raise SinkError(f"cannot use {name}: {error.strerror}") from error

    @classmethod
    def awaiting_reader(cls, path: str) -> Sink:
        """A FIFO that nobody reads yet: ``open_when_read`` opens it on the writer thread.

        Opening a FIFO for writing blocks until a reader opens it: a server whose log
        opened it at startup would hang there, before it answers anything.
        """
        sink = cls(-1, path, owns_fd=True, path=path)
        sink.unavailable = (
            f"nobody reads the FIFO {path}: start its reader "
            f"(for instance `cat {path}`); lines are written once it opens the FIFO"
        )
        return sink

    def open_when_read(self, nothing_to_write: Callable[[], bool]) -> bool:
        """On the writer thread: wait until the FIFO has a reader and open it.

        True once open (at once for any other sink); False if close() gave up first, or
        once ``nothing_to_write`` says no record will come (a log closed with none
        waiting: gunicorn's master, which serves no request, exits without waiting for
        a reader).  Records wait in the queue meanwhile, as behind a slow sink: the
        policy decides.
        """
        while self.fd < 0:
            if self.stopped or nothing_to_write():
                return False
            assert self.path is not None
            try:
                self.fd = _open_for_append(self.path)
            except OSError as error:
                if error.errno != errno.ENXIO:
                    self.unavailable = f"cannot open {self.path}: {error.strerror or error}"
                self._hurried.wait(_READER_RETRY_SECONDS)
                self._hurried.clear()
                continue
            self.unavailable = None
        return True

    def isatty(self) -> bool:
        """Whether the descriptor is a terminal."""
        return os.isatty(self.fd)

    def reopen(self) -> OSError | None:
        """Open the path again and switch to it; on failure keep the old descriptor.

        Log rotation renames the file the descriptor points to; reopening starts a new
        file under the old name.  Sinks not named by a path have nothing to reopen.
        """
        if self.path is None:
            return None
        try:
            fd = _open_for_append(self.path)
            is_pipe = _is_pipe(fd)
        except OSError as error:
            return error
        old, self.fd, self.is_pipe = self.fd, fd, is_pipe
        if self._owns_fd:
            os.close(old)
        self._owns_fd = True
        return None

    def identity(self) -> tuple[int, int] | None:
        """The device and inode of the file being written; None if it cannot be told."""
        try:
            current = os.fstat(self.fd)
        except OSError:
            return None
        return current.st_dev, current.st_ino

    def replaced(self) -> bool:
        """Whether the path no longer names the file being written (moved or removed)."""
        if self.path is None:
            return False
        try:
            named = os.stat(self.path)
        except OSError:
            return True
        return (named.st_dev, named.st_ino) != self.identity()

    def size(self) -> int | None:
        """The size of the regular file being written; None for a pipe, a terminal, a
        socket or a descriptor that cannot be told."""
        try:
            current = os.fstat(self.fd)
        except OSError:
            return None
        return current.st_size if stat.S_ISREG(current.st_mode) else None

    def write(self, data: bytes) -> tuple[int, OSError | None]:
        """Write ``data``; return how many bytes went out and the error that stopped it.

        Lines are never split between two writes on a pipe, and a pipe write holds at
        most PIPE_BUF bytes unless one line alone is longer.
        """
        if not self.is_pipe or len(data) <= PIPE_BUF:
            return self._write_all(data, 0, len(data))
        done = 0
        size = len(data)
        while done < size:
            end = done + PIPE_BUF
            if end < size:
                cut = data.rfind(b"\n", done, end)
                # A line longer than PIPE_BUF goes out alone, in one write call.
                end = cut + 1 if cut >= 0 else data.find(b"\n", end) + 1 or size
            else:
                end = size
            written, error = self._write_all(data, done, end)
            done += written
            if error is not None:
                return done, error
        return done, None

    def _write_all(self, data: bytes, start: int, end: int) -> tuple[int, OSError | None]:
        view = memoryview(data)[start:end]
        done = 0
        while done < len(view) and not self.stopped:
            try:
                # os.write retries EINTR itself (PEP 475).
                written = os.write(self.fd, view[done:])
                done += written
                self.delivered += written
            except BlockingIOError:
                # Somebody made the descriptor non-blocking; wait instead of spinning.
                self._wait_writable()
            except OSError as error:
                return done, error
        return done, None

    def _wait_writable(self) -> None:
        # poll, not select: select cannot watch a descriptor >= FD_SETSIZE (1024), which
        # a busy server's log easily gets.  A timeout, so that a writer close() gave up
        # on sees ``stopped`` and ends.
        poller = select.poll()
        poller.register(self.fd, select.POLLOUT)
        poller.poll(_WAIT_WRITABLE_MS)

    def watch_backlog(self, waiting: Callable[[], int]) -> None:
        """A file does not report on its own: the writer does."""

    def hurry(self) -> None:
        """A failed batch is lost and counted; only a wait for a FIFO's reader is cut short."""
        self._hurried.set()

    def after_fork(self) -> None:
        """Parent and child may share a descriptor: O_APPEND keeps their lines apart."""

    def close(self) -> None:
        """Close the descriptor if this sink opened it; leave borrowed ones open."""
        if self._owns_fd:
            self._owns_fd = False
            if self.fd >= 0:
                os.close(self.fd)


def open_sink(spec: SinkSpec) -> Destination:
    """Open what the user named as a sink, or raise an error that says why not.

    A network sink only parses its URL here: it connects on the writer thread.
    """
    if isinstance(spec, NetworkSink | LoggingSink | OtlpSink):
        return spec
    if isinstance(spec, str) and spec != spec.strip() and _names_a_url(spec.strip()):
        # " syslog://host" would be a file named so; "syslog://host\n" a name that
        # breaks every report in two.
        refuse_blanks(spec)
    if isinstance(spec, str) and _names_otlp(spec):
        return OtlpSink(spec)
    if isinstance(spec, str) and spec.startswith(LOGGING_SCHEME):
        return LoggingSink.from_spec(spec)
    if isinstance(spec, str) and looks_like_url(spec):
        return NetworkSink(spec)
    if isinstance(spec, str):
        refuse_missing_slashes(spec)
    if spec == "stdout" or spec == "-":
        return Sink(1, "stdout", owns_fd=False)
    if spec == "stderr":
        return Sink(2, "stderr", owns_fd=False)
    if isinstance(spec, bool):
        raise ConfigurationError(_WHAT_A_SINK_IS % (spec,))
    if isinstance(spec, int):
        return Sink(spec, f"file descriptor {spec}", owns_fd=False)
    if isinstance(spec, str | os.PathLike):
        path = os.fspath(spec)
        if not isinstance(path, str) or not path:
            raise ConfigurationError(_WHAT_A_SINK_IS % (spec,))
        try:
            fd = _open_for_append(path)
        except OSError as error:
            if error.errno == errno.ENXIO and _is_fifo(path):
                return Sink.awaiting_reader(path)
            message = f"cannot open {path}: {error.strerror}"
            if isinstance(error, FileNotFoundError):
                directory = os.path.dirname(os.path.abspath(path))
                message += f": create its directory (mkdir -p {directory}) or name another file"
            raise SinkError(message) from error
        return Sink(fd, path, owns_fd=True, path=path)
    fileno = getattr(spec, "fileno", None)
    if fileno is None:
        raise ConfigurationError(_WHAT_A_SINK_IS % (spec,))
    try:
        fd = fileno()
    except io.UnsupportedOperation as error:  # BytesIO and friends: no descriptor at all
        raise ConfigurationError(_WHAT_A_SINK_IS % (spec,)) from error
    except (OSError, ValueError) as error:  # closed, or its descriptor is gone
        raise SinkError(f"cannot use {spec!r} as a sink: {error}") from error
    # Lines already buffered in the object must come before ours.
    spec.flush()
    name = getattr(spec, "name", None)
    return Sink(fd, name if isinstance(name, str) else repr(spec), owns_fd=False)


def names_a_path(spec: str) -> bool:
    """Whether open_sink takes ``spec`` as the path of a file (or a FIFO), not as
    stdout, stderr, a logger, a network URL or an OTLP collector."""
    return not (
        spec in ("stdout", "-", "stderr") or spec.startswith(LOGGING_SCHEME) or _names_a_url(spec)
    )


def _names_a_url(spec: str) -> bool:
    return _names_otlp(spec) or looks_like_url(spec) or missing_slashes(spec) is not None


def _names_otlp(spec: str) -> bool:
    return spec == "otlp" or spec.lower().startswith(_OTLP_PREFIXES)


def _open_for_append(path: str) -> int:
    # O_APPEND makes every write land at the current end of the file, so a file that
    # logrotate's copytruncate shrinks to zero is not filled with NUL bytes up to our
    # old offset, and several processes appending to one file never overwrite each other.
    # O_NONBLOCK only for the open: a FIFO that nobody reads then fails with ENXIO
    # instead of blocking until a reader comes; writes block as on any descriptor.
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
    fd = os.open(path, flags, 0o644)
    try:
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_fifo(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False  # whoever opens it says what is wrong (a NUL in the path: ValueError)


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


_WHAT_A_SINK_IS = (
    "cannot log to %r: a sink is 'stdout' (or '-'), 'stderr', a file path, "
    "an integer file descriptor, a binary file object with fileno(), "
    "a network URL (tcp://HOST:PORT, syslog://HOST:PORT, ...) or NetworkSink, "
    "or 'logging:LOGGER' or LoggingSink"
)
