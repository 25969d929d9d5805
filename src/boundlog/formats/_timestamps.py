"""Timestamps for log lines, computed once per second instead of once per record.

A batch of records usually spans one or two seconds, so the writer turns a record's
float time into text by looking up its whole second in a small cache; only a new second
pays for ``localtime`` and string formatting.

Both clocks read a time exactly as ``datetime.fromtimestamp`` does: rounded to the
microsecond (half to even) first, so a time a fraction of a microsecond before a whole
second belongs to the next second, and a printed millisecond is never 1000.  An offset
that is not a whole number of minutes (local mean time, used by some zones until 1972)
cannot be written in either format: it is truncated to the minute and the clock time is
shifted to match, so that the text still names the exact instant.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import add, floordiv, mul, sub
from typing import Generic, TypeVar

from ._escape import escape

_Text = TypeVar("_Text", bytes, str)

# Month names are fixed by the Common Log Format, whatever the process locale says.
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun",
           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")  # fmt: skip

# Enough seconds for a batch whose requests started in different seconds; clearing
# the whole cache when it fills is cheaper than tracking recency.
_CACHE_SECONDS = 16

_MICROSECONDS = 1_000_000
# The fraction of a second, in microseconds, from which datetime rounds up to the next
# second (999999.5 rounds to the even 1000000).
_ROUNDS_TO_NEXT_SECOND = 999_999.5
# One strftime directive, or the %% of a literal percent sign.
_DIRECTIVE = re.compile("%.", re.DOTALL)


def _second_and_microsecond(when: float) -> tuple[int, int]:
    """Split ``when`` into whole seconds and microseconds as ``datetime.fromtimestamp`` does."""
    second = int(when)
    microsecond = round((when - second) * 1e6)
    if microsecond >= _MICROSECONDS:
        return second + 1, microsecond - _MICROSECONDS
    if microsecond < 0:
        return second - 1, microsecond + _MICROSECONDS
    return second, microsecond


def _calendar(utc: bool) -> Callable[[int], tuple[time.struct_time, str, str]]:
    """Return a function giving a second's broken-down time and its offset as ±hhmm, ±hh:mm."""
    convert = time.gmtime if utc else time.localtime

    def calendar(second: int) -> tuple[time.struct_time, str, str]:
        tm = convert(second)
        offset = tm.tm_gmtoff
        if offset % 60:
            offset = int(offset / 60) * 60
            tm = time.gmtime(second + offset)
        sign = "-" if offset < 0 else "+"
        hours, minutes = divmod(abs(offset) // 60, 60)
        return tm, f"{sign}{hours:02d}{minutes:02d}", f"{sign}{hours:02d}:{minutes:02d}"

    return calendar


def _split_batch(times: Sequence[float]) -> tuple[list[int], list[float]] | None:
    """Return the seconds and fractions of ``times``, or None if they need exact splitting.

    Truncation gives the right second unless a time is negative or rounds up to the
    next second; the largest fraction decides the latter for the whole batch.
    """
    seconds = list(map(math.trunc, times))  # int(), at half the cost
    fractions = list(map(sub, times, seconds))
    if min(times) < 0 or max(fractions) * 1e6 >= _ROUNDS_TO_NEXT_SECOND:
        return None
    return seconds, fractions


class _PerSecond(Generic[_Text]):
    """One text per whole second, made on first use; cleared whole when it fills up."""

    __slots__ = ("_cache", "_make")

    def __init__(self, make: Callable[[int], _Text]) -> None:
        self._make: Callable[[int], _Text] = make
        self._cache: dict[int, _Text] = {}

    def __getitem__(self, second: int) -> _Text:
        text = self._cache.get(second)
        if text is None:
            if len(self._cache) >= _CACHE_SECONDS:
                self._cache.clear()
            text = self._cache[second] = self._make(second)
        return text

    def all(self, seconds: list[int]) -> list[_Text]:
        """Return the text of each second, in order.

        The texts are gathered apart from the cache, which is only read and added to
        one item at a time: a format object shared by several logs is used by as many
        writer threads, and another one may clear the cache meanwhile (without the GIL,
        even while this one iterates it).
        """
        texts = {second: self[second] for second in set(seconds)}
        return list(map(texts.__getitem__, seconds))


class ClfClock:
    """``[10/Oct/2000:13:55:36 -0700]`` as bytes, for the common and combined formats.

    ``prefix`` and ``suffix`` are cached with each stamp, so that a format can have the
    template text around the stamp for free.
    """

    __slots__ = ("_calendar", "_prefix", "_stamps", "_suffix")

    def __init__(self, utc: bool, *, prefix: bytes = b"", suffix: bytes = b"") -> None:
        self._calendar = _calendar(utc)
        self._prefix = prefix
        self._suffix = suffix
        self._stamps = _PerSecond(self._stamp)

    def __call__(self, when: float) -> bytes:
        second, _ = _second_and_microsecond(when)
        return self._stamps[second]

    def stamps(self, times: Sequence[float]) -> list[bytes]:
        """Return the stamp of each time, in order (the batch form of calling the clock)."""
        if not times:
            return []
        # A batch is gathered for milliseconds, so its times almost always share one
        # second: then two passes (min, max) replace splitting every time.
        first = min(times)
        second = math.trunc(first)
        if first >= 0 and (max(times) - second) * 1e6 < _ROUNDS_TO_NEXT_SECOND:
            return [self._stamps[second]] * len(times)
        split = _split_batch(times)
        if split is None:
            return list(map(self, times))
        return self._stamps.all(split[0])

    def _stamp(self, second: int) -> bytes:
        tm, offset, _ = self._calendar(second)
        stamp = (
            f"[{tm.tm_mday:02d}/{_MONTHS[tm.tm_mon - 1]}/{tm.tm_year:04d}:"
            f"{tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d} {offset}]"
        )
        return self._prefix + stamp.encode("ascii") + self._suffix


class StrftimeClock(ClfClock):
    """``time.strftime(format)`` as bytes, for the ``%{format}t`` of log templates.

    ``%z`` is the clock's own offset, which stays right where ``strftime`` would read
    the offset of a shifted struct_time.  The text is escaped: a locale's month names or
    the format's own text could hold a quote or a line break.
    """

    __slots__ = ("_format",)

    def __init__(self, format: str, utc: bool, *, prefix: bytes = b"", suffix: bytes = b"") -> None:
        super().__init__(utc, prefix=prefix, suffix=suffix)
        self._format = format

    def _stamp(self, second: int) -> bytes:
        tm, offset, _ = self._calendar(second)
        # Matching every directive in turn keeps the z of a "%%z" literal.
        format = _DIRECTIVE.sub(
            lambda match: offset if match[0] == "%z" else match[0], self._format
        )
        text = time.strftime(format, tm).encode("utf-8", "surrogatepass")
        return self._prefix + escape(text) + self._suffix


class Rfc3339Clock:
    """``2000-10-10T13:55:36.123-07:00`` (``Z`` in UTC), for JSON lines."""

    __slots__ = ("_calendar", "_templates", "_utc")

    def __init__(self, utc: bool) -> None:
        self._utc = utc
        self._calendar = _calendar(utc)
        # Per second, the stamp with a %03d where its milliseconds go.
        self._templates = _PerSecond(self._template)

    def __call__(self, when: float) -> str:
        second, microsecond = _second_and_microsecond(when)
        return self._templates[second] % (microsecond // 1000)

    def stamps(self, times: Sequence[float]) -> list[str]:
        """Return the stamp of each time, in order (the batch form of calling the clock)."""
        if not times:
            return []
        split = _split_batch(times)
        if split is None:
            return list(map(self, times))
        seconds, fractions = split
        # round(x) // 1000 without round(), which is slow: (x + 0.5) // 1000 differs only
        # for a tie k + 0.5 with k + 1 a multiple of 1000, and that k is odd, so rounding
        # half to even goes up as well.
        milliseconds = tuple(
            map(floordiv, map(add, map(mul, fractions, repeat(1e6)), repeat(0.5)), repeat(1000.0))
        )
        # One %-formatting for the whole batch: no template holds a newline or another %.
        return ("\n".join(self._templates.all(seconds)) % milliseconds).split("\n")

    def parts(self, second: int) -> tuple[bytes, bytes]:
        """The stamp of ``second`` as the text before its milliseconds and the text after
        them (for the C core, which writes the milliseconds between)."""
        before, after = self._templates[second].split("%03d")
        return before.encode("ascii"), after.encode("ascii")

    def _template(self, second: int) -> str:
        tm, _, offset = self._calendar(second)
        return (
            f"{tm.tm_year:04d}-{tm.tm_mon:02d}-{tm.tm_mday:02d}T"
            f"{tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d}.%03d"
            f"{'Z' if self._utc else offset}"
        )
