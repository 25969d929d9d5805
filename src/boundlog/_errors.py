"""The exceptions boundlog raises.

Every error is an :class:`AccessLogError`, so ``except boundlog.AccessLogError`` catches
anything this library raises on purpose.  The base class itself cannot be raised: an
error must say which kind of problem it is, configuration or sink, because the fix is
different (change an argument, or change the environment).

It also holds how the writer names an error raised by user code (a format, a ``keep``
predicate) in a report, which must not raise in turn, and how reports reach stderr.
"""

from __future__ import annotations

import os
import select
from typing import Any


class AccessLogError(Exception):
    """Base of every boundlog error; raise one of its subclasses instead."""

    def __init__(self, *args: Any) -> None:
        if type(self) is AccessLogError:
            raise TypeError("AccessLogError is abstract: raise ConfigurationError or SinkError")
        super().__init__(*args)


class ConfigurationError(AccessLogError, ValueError):
    """An argument has a value boundlog cannot use; the message names the valid ones."""


class SinkError(AccessLogError, OSError):
    """A log destination cannot be opened or reopened; the message has the path and cause."""


def describe(error: BaseException) -> str:
    """``repr(error)``, or its type's name when even that raises."""
    try:
        return repr(error)
    except BaseException:  # a user's __repr__ may raise anything
        return f"{type(error).__qualname__} (whose repr() raised)"


def report_on_stderr(message: str, *, wait: float | None = None) -> None:
    """Write ``boundlog: message`` as one line to file descriptor 2, and never raise.

    One ``write`` system call for a line (a pipe takes up to 4 KiB whole), so that
    lines of many threads and processes never mix, and no lock of Python's: a thread
    blocked on a stalled stderr holds nothing another thread, or the interpreter's
    exit, would wait for (``sys.stderr``'s buffer lock would be).  With ``wait``, the
    line is given up after that many seconds if stderr takes nothing (close() and
    the exit must not hang on it); without, the calling thread waits as long as it
    takes.
    """
    data = f"boundlog: {message}\n".encode("utf-8", "backslashreplace")
    try:
        if wait is not None and not select.select([], [2], [], wait)[1]:
            return
        while data:
            data = data[os.write(2, data) :]
    except (OSError, ValueError):
        pass  # stderr is closed or gone; the counters still tell
