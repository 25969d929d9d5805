"""The exceptions boundlog raises.

Every error is an :class:`AccessLogError`, so ``except boundlog.AccessLogError`` catches
anything this library raises on purpose.  The base class itself cannot be raised: an
error must say which kind of problem it is, configuration or sink, because the fix is
different (change an argument, or change the environment).

It also holds how the writer names an error raised by user code (a format, a ``keep``
predicate) in a report, which must not raise in turn, and how reports reach stderr.
"""

from __future__ import annotations

import sys
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


def report_on_stderr(message: str) -> None:
    """Write ``boundlog: message`` as one line to stderr, and never raise."""
    try:
        sys.stderr.write(f"boundlog: {message}\n")
        sys.stderr.flush()
    except Exception:
        pass  # stderr is gone or replaced by something odd; the counters still tell
