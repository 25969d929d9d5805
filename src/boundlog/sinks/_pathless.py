"""What the writer asks of a sink that is no file: a collector or a logger.

The writer reopens, watches and tells apart files by their path (see ``sinks._files``); a sink
without one answers those questions the same way, here once for all of them.
"""

from __future__ import annotations


class Pathless:
    """The file-only parts of ``sinks._files.Destination`` for a sink that has no file."""

    #: Only a file sink has a path to reopen.
    path: str | None = None
    #: A logger's handlers cannot be woken; a network sink says otherwise.
    wakes_when_stopped = False
    #: A logger's or an OTLP collector's write is final; RELP's says otherwise.
    confirms_later = False
    confirmed = 0

    def outage(self) -> str | None:
        """What the last failed attempt to reach the receiver said, while it is away
        (a network sink's; a logger has none)."""
        return None

    def settle(self) -> None:
        """Nothing is confirmed later (RELP's sink says otherwise)."""

    def isatty(self) -> bool:
        """No terminal: colours stay off."""
        return False

    def reopen(self) -> OSError | None:
        """Nothing to reopen: what the sink reaches reconnects or reopens by itself."""
        return None

    def identity(self) -> tuple[int, int] | None:
        """No file to tell apart."""
        return None

    def replaced(self) -> bool:
        """No path that could name another file."""
        return False

    def size(self) -> int | None:
        """No file whose size could tell that it was emptied."""
        return None
