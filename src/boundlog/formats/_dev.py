"""The ``dev`` format: a short, optionally coloured line for a developer's terminal."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import mul

from ..record._record import Record
from ._color import use_color
from ._columns import (
    _NO_SEPARATOR_FOR_EMPTY_QUERY,
    _escaped_column,
    _Layout,
    _per_value,
    _text,
)
from ._escape import escape
from ._timestamps import StrftimeClock

_SGR_RESET = b"\x1b[0m"
_SGR_DIM = b"\x1b[2m"
# By status class: 2xx green, 3xx cyan, 4xx yellow, 5xx red.
_SGR_STATUS = {2: b"\x1b[32m", 3: b"\x1b[36m", 4: b"\x1b[33m", 5: b"\x1b[31m"}
# Below this many milliseconds a duration still reads as milliseconds once rounded.
_LAST_MILLISECONDS = 999.95


class DevFormat:
    """A short line for a developer's terminal: ``14:13:20 GET /items?page=2 201 4.2ms``.

    The time is the clock time alone (local, or UTC with ``utc=True``); the duration is
    in milliseconds, or in seconds from one second on.  ``color=True`` colours the
    status by its class and dims the duration; ``color=None`` decides from the
    environment and, in an :class:`AccessLog`, from whether the sink is a terminal
    (see ``_color``).
    """

    __slots__ = ("_clock", "_color", "_dim", "_layout", "_milliseconds_template", "_utc", "color")

    def __init__(self, *, color: bool | None = None, utc: bool = False) -> None:
        #: The colour choice as given: None leaves it to the environment and the sink.
        self.color = color
        self._utc = utc
        self._color = color if color is not None else use_color(os.environ, is_terminal=False)
        self._clock = StrftimeClock("%H:%M:%S", utc, suffix=b" ")
        self._dim = (_SGR_DIM, _SGR_RESET) if self._color else (b"", b"")
        self._milliseconds_template = self._dim[0] + b"%.1fms" + self._dim[1] + b"\n"
        self._layout = _Layout([None, None, None, None, None, b" ", None, b" ", None, b"\n"])

    #: A dev line shows no header field.
    request_header_names: frozenset[bytes] = frozenset()
    response_header_names: frozenset[bytes] = frozenset()
    #: Nor a record's notes.
    reads_notes: bool = False
    #: Nor its extras.
    reads_extras: frozenset[str] = frozenset()

    def for_sink(self, *, is_terminal: bool) -> DevFormat:
        """This format as it writes to a sink that is (or is not) a terminal."""
        if self.color is not None:
            return self
        return DevFormat(color=use_color(os.environ, is_terminal=is_terminal), utc=self._utc)

    def format_batch(self, records: Sequence[Record]) -> bytes:
        if not records:
            return b""
        times, durations, _, methods, paths, queries, _, statuses, _, _, _, _, _ = zip(
            *records, strict=True
        )
        fields: list[Iterable[bytes]] = [
            self._clock.stamps(times),
            _per_value(methods, lambda method: escape(_text(method)) + b" "),
            _escaped_column(paths),
            map(_NO_SEPARATOR_FOR_EMPTY_QUERY.get, queries, repeat(b"?")),
            _escaped_column(queries),
            _per_value(statuses, self._status),
            self._durations(durations),
        ]
        return b"".join(self._layout.lines(fields, len(records)))

    def _status(self, status: int) -> bytes:
        colour = _SGR_STATUS.get(status // 100) if self._color else None
        return b"%d" % status if colour is None else colour + b"%d" % status + _SGR_RESET

    def _durations(self, seconds: tuple[float, ...]) -> list[bytes]:
        milliseconds = tuple(map(mul, seconds, repeat(1000.0)))
        if math.isfinite(sum(milliseconds)) and max(milliseconds) < _LAST_MILLISECONDS:
            # The usual batch: one %-formatting for the whole column.
            fields = ((self._milliseconds_template * len(milliseconds)) % milliseconds).split(b"\n")
            fields.pop()  # the empty string after the last newline
            return fields
        return [self._dim[0] + _dev_duration(value) + self._dim[1] for value in seconds]


def _dev_duration(seconds: float) -> bytes:
    if not math.isfinite(seconds):
        return b"-"
    if seconds * 1000.0 < _LAST_MILLISECONDS:
        return b"%.1fms" % (seconds * 1000.0)
    return b"%.2fs" % seconds
