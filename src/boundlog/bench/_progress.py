"""Progress lines while a run goes on for minutes: which cell, which trial, time left."""

from __future__ import annotations

import time
from typing import TextIO

from ._matrix import Cell
from ._trial import TrialResult

# Starting a server, probing it, settling and stopping it, on top of the wrk runs.
_OVERHEAD_GUESS_SECONDS = 4.0


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


class Progress:
    """Prints one line as each trial starts and one as it ends."""

    def __init__(self, total: int, rounds: int, seconds_per_trial: float, out: TextIO) -> None:
        self._total = total
        self._rounds = rounds
        self._guess = seconds_per_trial + _OVERHEAD_GUESS_SECONDS
        self._out = out
        self._done = 0
        self._started = time.monotonic()

    def _seconds_left(self) -> float:
        per_trial = (time.monotonic() - self._started) / self._done if self._done else self._guess
        return per_trial * (self._total - self._done)

    def starting(self, cell: Cell, round_index: int) -> None:
        """Announce the trial about to run."""
        width = len(str(self._total))
        self._out.write(
            f"[{self._done + 1:>{width}}/{self._total}] round {round_index + 1}/{self._rounds}"
            f"  {cell.name:<38} about {_duration(self._seconds_left())} left\n"
        )
        self._out.flush()

    def finished(self, result: TrialResult) -> None:
        """Report the trial's headline numbers, or why it failed."""
        self._done += 1
        if not result.ok or result.wrk is None:
            message = (result.error or "no requests completed").splitlines()[0]
            self._out.write(f"    FAILED: {message}\n")
        else:
            wrk = result.wrk
            parts = [
                f"{wrk.requests_per_second:,.0f} req/s",
                f"{result.cpu_us_per_request or 0:.1f} µs CPU/req",
                f"p99 {wrk.p99_us / 1000:.2f} ms",
            ]
            if result.delivery_pct is not None:
                parts.append(f"delivery {result.delivery_pct:.2f}%")
            if (dropped := result.window_delta("dropped")) is not None:
                parts.append(f"dropped {dropped:,}")
            if wrk.socket_errors or wrk.status_errors:
                parts.append(f"errors {wrk.socket_errors} socket / {wrk.status_errors} non-2xx")
            parts.extend(result.notes)
            self._out.write("    " + ", ".join(parts) + "\n")
        self._out.flush()

    def say(self, message: str) -> None:
        """A line of its own, such as a warning."""
        self._out.write(message + "\n")
        self._out.flush()
