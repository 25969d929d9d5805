"""What a network sink says on stderr while its receiver is away: a failed attempt now
and then, and its return.

A receiver down for an hour is retried every few seconds; a line per attempt would
bury stderr.  So a report goes out at most every :data:`REPORT_EVERY` seconds, the
next one saying how many were held back, and one always goes out when the receiver
answers again after a failure was reported, so that the last word is the true one.
"""

from __future__ import annotations

import time

from .._errors import report_on_stderr

#: A failure is reported at most this often, so a collector that stays down for an hour
#: costs a few hundred lines of stderr, not one per attempt.
REPORT_EVERY = 5.0


class OutageReports:
    """The reports of one sink, named ``name`` in them."""

    __slots__ = (
        "_last_report", "_reported_failure", "_unreported", "failures", "last_failure", "name"
    )  # fmt: skip

    def __init__(self, name: str) -> None:
        self.name = name
        #: Failed attempts since the receiver last answered.
        self.failures = 0
        #: What the last failed attempt said, until the receiver answers again: the
        #: cause a closing line names when close() gives up (its reports may have been
        #: held back).
        self.last_failure: str | None = None
        self._reported_failure = False
        self._last_report = -REPORT_EVERY
        self._unreported = 0

    def report(self, message: str, *, always: bool = False) -> bool:
        """Say ``message`` unless another went out less than REPORT_EVERY ago (then it
        is counted, and the next report says how many were not shown); whether it went."""
        now = time.monotonic()
        if not always and now - self._last_report < REPORT_EVERY:
            self._unreported += 1
            return False
        if self._unreported:
            message += f" ({self._unreported} similar reports not shown)"
        self._last_report = now
        self._unreported = 0
        report_on_stderr(message)
        return True

    def failed(self, what: str, wait: float, waiting: int) -> None:
        """An attempt failed (``what`` says how); the next in ``wait`` seconds, with
        ``waiting`` records not yet sent."""
        self.failures += 1
        self.last_failure = what
        if self.report(
            f"{what}; retrying in {wait:.1f} s, "
            f"{waiting} record{'s' if waiting != 1 else ''} waiting"
        ):
            self._reported_failure = True

    def recovered(self) -> None:
        """The receiver answered: say so if a failure was said."""
        if self.failures and self._reported_failure:
            self.report(
                f"sending to {self.name} again, after {self.failures} failed "
                f"attempt{'s' if self.failures != 1 else ''}",
                always=True,
            )
        self.failures = 0
        self.last_failure = None
        self._reported_failure = False
