"""The queue of records waiting for the writer, and the four things done to it.

Request paths append; the writer takes a batch at a time; a submitter that finds the
queue closed after its append withdraws its own record; a close that gives up drains
what is left.  Each is atomic, with or without the GIL, so that the Admission needs no
lock on the hot path (see ``_admission``).

``Pending`` is the reference, a ``deque``: ``append`` and ``popleft`` are atomic, and
so is everything built here from them.  The C core's ``Queue`` (csrc/engine/queue.h)
does the same in one call each, which matters most to ``take``: it moves a batch in one
pass, where a deque gives records back one call at a time.  The Admission gets one or
the other from :func:`new_queue`; ``tests/speedups/test_speedups_queue.py`` proves them
equal.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from itertools import repeat
from typing import Any, Protocol

from .. import _core


class RecordQueue(Protocol):
    """What the Admission asks of its queue (``Pending``, or the C core's ``Queue``)."""

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Any]: ...
    def append(self, record: Any, /) -> None: ...
    def take(self, count: int, /) -> list[Any]: ...
    def withdraw(self, record: Any, /) -> bool: ...
    def drain(self) -> int: ...


class Pending(deque[Any]):
    """The reference queue: a ``deque`` with the Admission's operations on it."""

    __slots__ = ()

    def take(self, count: int, /) -> list[Any]:
        """Remove and return the oldest ``min(count, len(self))`` records."""
        if count < 0:
            raise ValueError(f"Queue.take(): count must not be negative, not {count}")
        # map() calls popleft in C, each call atomic as in a loop: a Python loop costs
        # the writer a frame's worth of bytecode per record.  Only the writer takes, but
        # a withdraw() may remove meanwhile (a finalizer's takes no lock): without the
        # GIL it can land between the length read here and the last popleft, which
        # then finds the deque empty.  extend() keeps what it was given before that.
        taken: list[Any] = []
        with contextlib.suppress(IndexError):
            taken.extend(map(deque.popleft, repeat(self, min(count, len(self)))))
        return taken

    def withdraw(self, record: Any, /) -> bool:
        """Remove ``record`` itself (by identity) if it waits; whether it did.

        ``deque.remove`` is atomic (it deletes only if nothing changed the deque while
        it searched, else raises) but finds an *equal* record; ``_Same`` makes equal
        mean identical.  A search that another thread's append or take interrupted
        starts again.
        """
        same = _Same(record)
        while True:
            try:
                self.remove(same)
            except ValueError:
                return False
            except (IndexError, RuntimeError):  # "deque mutated during remove"
                continue
            return True

    def drain(self) -> int:
        """Remove every record; return how many there were."""
        count = 0
        while True:
            try:
                self.popleft()
            except IndexError:
                return count
            count += 1


class _Same:
    """Equal to one object only, itself (a record's tuple equality is by value)."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item

    def __eq__(self, other: object) -> bool:
        return other is self.item

    __hash__ = None  # type: ignore[assignment]


def new_queue() -> RecordQueue:
    """An empty queue: the C core's when it is in use, else the reference."""
    if _core.speedups is not None:
        queue: RecordQueue = _core.speedups.Queue()
        return queue
    return Pending()
