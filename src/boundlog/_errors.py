"""The exceptions boundlog raises.

Every error is an :class:`AccessLogError`, so ``except boundlog.AccessLogError`` catches
anything this library raises on purpose.  The base class itself cannot be raised: an
error must say which kind of problem it is, configuration or sink, because the fix is
different (change an argument, or change the environment).
"""

from __future__ import annotations

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
