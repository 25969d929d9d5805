"""Timestamps for log lines, computed once per second instead of once per record.

A batch of records usually spans one or two seconds, so the writer turns a record's
float time into text by looking up its whole second in a small cache; only a new second
pays for ``localtime`` and string formatting.
"""

from __future__ import annotations

import time

# Month names are fixed by the Common Log Format, whatever the process locale says.
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun",
           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")  # fmt: skip

# Enough seconds for a batch whose requests started in different seconds; clearing
# the whole cache when it fills is cheaper than tracking recency.
_CACHE_SECONDS = 16


def _offset(tm: time.struct_time, separator: str) -> str:
    minutes = tm.tm_gmtoff // 60
    sign = "-" if minutes < 0 else "+"
    hours, minutes = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}{separator}{minutes:02d}"


class ClfClock:
    """``[10/Oct/2000:13:55:36 -0700]`` as bytes, for the common and combined formats."""

    __slots__ = ("_cache", "_convert")

    def __init__(self, utc: bool) -> None:
        self._convert = time.gmtime if utc else time.localtime
        self._cache: dict[int, bytes] = {}

    def __call__(self, when: float) -> bytes:
        second = int(when)
        stamp = self._cache.get(second)
        if stamp is None:
            if len(self._cache) >= _CACHE_SECONDS:
                self._cache.clear()
            tm = self._convert(second)
            stamp = (
                f"[{tm.tm_mday:02d}/{_MONTHS[tm.tm_mon - 1]}/{tm.tm_year:04d}:"
                f"{tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d} {_offset(tm, '')}]"
            ).encode("ascii")
            self._cache[second] = stamp
        return stamp


class Rfc3339Clock:
    """``2000-10-10T13:55:36.123-07:00`` (``Z`` in UTC), for JSON lines."""

    __slots__ = ("_cache", "_convert", "_utc")

    def __init__(self, utc: bool) -> None:
        self._utc = utc
        self._convert = time.gmtime if utc else time.localtime
        self._cache: dict[int, tuple[str, str]] = {}

    def __call__(self, when: float) -> str:
        second = int(when)
        parts = self._cache.get(second)
        if parts is None:
            if len(self._cache) >= _CACHE_SECONDS:
                self._cache.clear()
            tm = self._convert(second)
            parts = (
                f"{tm.tm_year:04d}-{tm.tm_mon:02d}-{tm.tm_mday:02d}T"
                f"{tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d}",
                "Z" if self._utc else _offset(tm, ":"),
            )
            self._cache[second] = parts
        milliseconds = int((when - second) * 1000)
        return f"{parts[0]}.{milliseconds:03d}{parts[1]}"
