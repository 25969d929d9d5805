"""A byte budget per record: what a queued record keeps alive, whatever a client sends.

A record keeps the server's own objects (its header list, the path and query bytes)
so that the request path copies nothing.  A queue bounded in records alone is then
bounded in bytes only by what the server accepts, and some accept a lot (httptools
takes a 1 MiB header field).  So each integration estimates what a record would keep
of what the client sent, with one pass over the header list and no copy::

    len(path) + len(query) + sum(len(name) + len(value) for name, value in headers)
              + FIELD_OVERHEAD * len(headers)

and only when that exceeds the log's ``max_record_bytes`` does it cut the record down
(the ASGI middleware computes it inline and calls :meth:`RecordBudget.pairs`; the
other integrations call :meth:`RecordBudget.bounded`, or for a WSGI environ or the
fields picked from one :meth:`RecordBudget.bounded_environ`).  A cut-down record keeps

* only the header fields the log reads (all of them when it may read any), a field
  sent more than once as its values joined with ``", "``, as the log shows it; when
  it may read any, fields are kept, forwarding headers first, while their names and
  :data:`FIELD_OVERHEAD` fit in half the budget;
* path, query and those values whole if they fit in the rest of the budget; if not,
  the longest are cut to one length so that they do, each cut value ending in the
  :data:`CUT_MARKER` (forwarding headers, which proxies append to, keep their end).

The fields the application adds (``add_fields``, the record's notes) count against
the same budget: :meth:`RecordBudget.notes` copies them when the application is done
and, when their names, values and :data:`FIELD_OVERHEAD` each do not fit in what the
rest of the record left of the budget, keeps the fields, in the order added, whose
names and :data:`FIELD_OVERHEAD` fit in half of it (the others dropped, and counted
in a last field, :data:`FIELDS_CUT`), then cuts the longest text values to one length
that fits the rest, each ending in the :data:`CUT_MARKER`.  A value that is not a JSON scalar
is made the text the formats would write (its ``str()``) then, so that what it keeps
alive is measured too.

So what a record keeps of the client's and the application's bytes, by the same
estimate, is at most ``max_record_bytes``, and a full queue holds at most ``max_queue * (RECORD_OVERHEAD +
max_record_bytes)`` bytes of records (see docs/reliability.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sized
from contextlib import suppress
from typing import Any

from .. import _core
from ._headers import _as_bytes, environ_key
from ._notes import note_text

#: What a header field costs a record besides its name and value bytes, in bytes: the
#: pair, two string objects and a list slot (CPython 3.11, 64-bit; text costs most).
FIELD_OVERHEAD = 160
#: What a record costs besides what the client sent, in bytes: the record and its
#: other fields, the header list itself and the queue's slot, with room for the
#: allocator's rounding (tracemalloc sees a fifth to a half of it).
RECORD_OVERHEAD = 1024
#: The field that says how many of the application's fields a record dropped: those
#: whose names did not fit in half of what the rest of the record left of the budget.
FIELDS_CUT = "fields_cut"
#: What ends a value cut to fit the budget; the number is the bytes cut.  It is
#: printable ASCII without quotes or backslashes, so every format writes it as it is.
CUT_MARKER = b"[...%d bytes cut]"

# Note values kept as they are and measured as nothing: the formats write them as
# short JSON scalars.  An int is measured by its size (it may be huge).
_SMALL_SCALARS = (type(None), bool, float)
# An int longer than this (in bits) is made its text, which note_text bounds.
_LONG_INT_BITS = 4096

# Headers that proxies append to: the newest, trusted entries are at the end.
_KEPT_FROM_THE_END = (b"x-forwarded-for", b"forwarded")
_SEPARATOR = b", "


def client_bytes(path: bytes, query: bytes, headers: Iterable[Any]) -> int:
    """What a record keeps of what the client sent, by the estimate the integrations use.

    ``headers`` must be a list or tuple of pairs (a TypeError otherwise).
    """
    # A plain loop: CPython 3.11 specialises its unpacking and len() calls, which made
    # it cheaper than sum(map(len, chain.from_iterable(headers))) for 1 to 17 fields.
    size = len(path) + len(query) + FIELD_OVERHEAD * len(headers)  # type: ignore[arg-type]
    for name, value in headers:
        size += len(name) + len(value)
    return size


class RecordBudget:
    """Cuts a record's client-controlled fields down to ``limit`` bytes.

    ``names`` are the request header fields the log reads (lower-case bytes), None when
    it may read any.  Only called for records whose estimate exceeds ``limit``.
    """

    __slots__ = ("_environ_keys", "limit", "names")

    def __init__(self, limit: int, names: frozenset[bytes] | None) -> None:
        self.limit = limit
        self.names = names
        self._environ_keys = None if names is None else {environ_key(name): name for name in names}

    def bounded(
        self, path: bytes, query: bytes, headers: Iterable[Any]
    ) -> tuple[bytes, bytes, Iterable[Any]]:
        """Path, query and header pairs as they are if within the budget, else cut down."""
        try:
            # client_bytes, inline: one call fewer on every request.
            size = len(path) + len(query) + FIELD_OVERHEAD * len(headers)  # type: ignore[arg-type]
            for name, value in headers:
                size += len(name) + len(value)
            if size <= self.limit:
                return path, query, headers
        except TypeError:
            pass  # a header container without len(): the slow path makes it a list
        return self.pairs(path, query, headers)

    def bounded_environ(
        self, path: bytes, query: bytes, environ: Mapping[str, Any]
    ) -> tuple[bytes, bytes, Mapping[str, Any]]:
        """Like :meth:`bounded`, for a WSGI environ or the fields picked from one."""
        if self._environ_keys is None:
            # The whole environ: its text values are the headers and CGI variables.
            values = [value for value in environ.values() if type(value) is str]
        else:
            values = [value for value in environ.values() if value is not None]
        size = len(path) + len(query) + FIELD_OVERHEAD * len(values) + sum(map(len, values))
        if size <= self.limit:
            return path, query, environ
        return self.environ(path, query, environ)

    def pairs(
        self, path: bytes, query: bytes, headers: Iterable[Any]
    ) -> tuple[bytes, bytes, list[tuple[Any, Any]]]:
        """Path, query and a header list of pairs, cut to the budget."""
        fields: dict[bytes, tuple[Any, list[Any]]] = {}
        names = self.names
        for name, value in headers:
            key = _as_bytes(name).lower()
            if names is None or key in names:
                if key in fields:
                    fields[key][1].append(value)
                else:
                    fields[key] = (name, [value])
        kept, room = self._kept(fields)
        path, query, *values = self._cut(
            [path, query, *(_joined(fields[key][1]) for key in kept)], kept, room
        )
        return (
            path,
            query,
            [(fields[key][0], value) for key, value in zip(kept, values, strict=True)],
        )

    def environ(
        self, path: bytes, query: bytes, environ: Mapping[str, Any]
    ) -> tuple[bytes, bytes, dict[str, Any]]:
        """Path, query and a WSGI environ of the header variables only, cut to the budget.

        ``environ`` is the server's, or the fields the middleware picked out of it
        (absent ones as None, which stay so).
        """
        fields: dict[bytes, tuple[str, list[Any]]]
        if self._environ_keys is None:
            fields = {
                _environ_name(variable): (variable, [value])
                for variable, value in environ.items()
                if type(value) is str and _is_header_variable(variable)
            }
        else:
            fields = {
                name: (variable, [environ.get(variable)])
                for variable, name in self._environ_keys.items()
                if environ.get(variable) is not None
            }
        kept, room = self._kept(fields)
        path, query, *values = self._cut(
            [path, query, *(fields[key][1][0] for key in kept)], kept, room
        )
        cut: dict[str, Any] = dict.fromkeys(self._environ_keys or ())
        cut.update((fields[key][0], value) for key, value in zip(kept, values, strict=True))
        return path, query, cut

    def notes(
        self, notes: dict[str, Any] | None, path: Sized, query: Sized, headers: Any
    ) -> dict[str, Any] | None:
        """The record's notes (``add_fields``): a copy, None when empty, cut to the room
        the record's path, query and ``headers`` (pairs or an environ) leave in the budget.

        Called once the application is done with the request, and only for a log that
        reads notes.
        """
        if not notes:
            return None
        return self.notes_within(notes, _used(path, query, headers, self.limit))

    def notes_within(self, notes: dict[str, Any] | None, used: int) -> dict[str, Any] | None:
        """:meth:`notes` for a record whose path, query and header fields take ``used``
        of the budget (by :func:`_used`): the C core's packed records, which keep only
        the header fields lines read, measure all of them as they are packed."""
        if not notes:
            return None
        copy, size = _measured_copy(notes)
        room = self.limit - used
        if size <= room:
            return copy
        # The names are the application's bytes too, and may be a client's
        # (add_fields(**request_json)): fields are kept in the order added while their
        # names and FIELD_OVERHEAD fit in half the room, the others dropped, and
        # FIELDS_CUT says how many were.
        names = FIELD_OVERHEAD + len(FIELDS_CUT)
        kept: dict[str, Any] = {}
        for name, value in copy.items():
            cost = FIELD_OVERHEAD + len(name)
            if names + cost <= room // 2:
                names += cost
                kept[name] = value
        if len(kept) == len(copy):
            names -= FIELD_OVERHEAD + len(FIELDS_CUT)
        else:
            kept[FIELDS_CUT] = len(copy) - len(kept)
        copy = kept
        texts = [name for name, value in copy.items() if type(value) is str]
        share = _share([len(copy[name]) for name in texts], room - names)
        if share is not None:
            for name in texts:
                if len(copy[name]) > share:
                    copy[name] = _cut(copy[name], share, False)
        return copy

    def _kept(self, fields: Mapping[bytes, tuple[Any, list[Any]]]) -> tuple[list[bytes], int]:
        """The fields a cut record keeps, forwarding headers first, while their names and
        per-field overheads fit in half the budget; and the room they leave for values."""
        order = [key for key in _KEPT_FROM_THE_END if key in fields]
        order += [key for key in fields if key not in _KEPT_FROM_THE_END]
        kept = []
        room = self.limit // 2
        for key in order:
            cost = FIELD_OVERHEAD + len(fields[key][0])
            if cost <= room:
                room -= cost
                kept.append(key)
        return kept, self.limit - self.limit // 2 + room

    def _cut(self, values: list[Any], keys: list[bytes], room: int) -> list[Any]:
        """``values`` (path, query, then the fields ``keys``) cut to fit in ``room``: the
        short ones whole, the long ones to one length that fits."""
        share = _share(list(map(len, values)), room)
        if share is None:
            return values
        from_the_end = [False, False, *(key in _KEPT_FROM_THE_END for key in keys)]
        return [
            _cut(value, share, at_the_end) if len(value) > share else value
            for value, at_the_end in zip(values, from_the_end, strict=True)
        ]


# The header containers record_cost measures.
_MEASURED = (list, tuple, dict)


def queued_cost(record: Any) -> int:
    """What a queued record costs the queue's byte budget: for a record the C hand-off
    packed (``_core.Packed``) the bytes it holds of its path, query and header fields
    (8 a field besides: not the Python objects ``FIELD_OVERHEAD`` stands for) and its
    notes' estimate; for any other, :func:`record_cost`."""
    if type(record) is _core.Packed:
        return record.cost
    return record_cost(record)


def record_cost(record: Any) -> int:
    """What a queued record keeps of the client's and the application's bytes, by the
    estimate: path, query, request header fields and notes (the queue's byte budget)."""
    size = len(record[4]) + len(record[5])
    headers = record[9]
    # Only the containers servers and integrations make are measured: anything else
    # (a record built by hand) is the caller's, and its iteration may be anything, even
    # raise, which the request path must not.  So must a list of odd items.
    if type(headers) in _MEASURED:
        with suppress(TypeError, ValueError):
            size += _headers_size(headers)
    notes = record[11]
    if type(notes) is dict:
        for name, value in notes.items():
            size += FIELD_OVERHEAD + len(name) + (len(value) if type(value) is str else 0)
    return size


def _measured_copy(notes: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """A copy of the notes as a record keeps them (a value not a JSON scalar, or an int
    too long for one, as its text), and what they cost the budget by the estimate."""
    copy: dict[str, Any] = {}
    size = 0
    for name, value in notes.items():
        kind = type(value)
        if kind is int:
            if value.bit_length() > _LONG_INT_BITS:
                value = note_text(value)
                size += len(value)
            else:
                size += value.bit_length() >> 3
        elif kind is str:
            size += len(value)
        elif kind not in _SMALL_SCALARS:
            # Its text now: a large object would otherwise stay alive, unmeasured.
            value = note_text(value)
            size += len(value)
        size += FIELD_OVERHEAD + len(name)
        copy[name] = value
    return copy, size


def _share(lengths: list[int], room: int) -> int | None:
    """The one length the longest values are cut to so that all fit in ``room`` (the
    shorter ones whole); None when all fit as they are."""
    room = max(room, 0)
    lengths = sorted(lengths)
    for index, length in enumerate(lengths):
        share = room // (len(lengths) - index)
        if length > share:
            return share
        room -= length
    return None


def _used(path: Sized, query: Sized, headers: Any, limit: int) -> int:
    """What a record's path, query and headers (pairs, or an environ or the fields
    picked from one) take of the budget, by the estimate: at most ``limit``, which a
    record over it was cut to."""
    return min(len(path) + len(query) + _headers_size(headers), limit)


def _headers_size(headers: Any) -> int:
    """Header fields by the estimate: pairs, or an environ's (or picked fields') text."""
    size = 0
    # The exact types first: an isinstance check against an ABC costs more.
    kind = type(headers)
    if kind is not list and kind is not tuple and (kind is dict or isinstance(headers, Mapping)):
        for value in headers.values():
            if type(value) is str:
                size += FIELD_OVERHEAD + len(value)
    else:
        for name, value in headers:
            size += FIELD_OVERHEAD + len(name) + len(value)
    return size


def _joined(values: list[Any]) -> Any:
    if len(values) == 1:
        return values[0]
    if all(type(value) is bytes for value in values):
        return _SEPARATOR.join(values)
    return ", ".join(map(str, values))


def _cut(value: Any, size: int, from_the_end: bool) -> Any:
    """``value`` (bytes, or text of any other kind) cut to at most ``size``, marked: its
    start, or for a forwarding header its end from the first whole element on."""
    if type(value) is not bytes:
        value = str(value)
    text = type(value) is str
    # Room for the separator and the marker with the largest count it may show.
    keep = max(size - len(_SEPARATOR) - len(CUT_MARKER % len(value)), 0)
    if from_the_end:
        tail = value[len(value) - keep :]
        comma = tail.find("," if text else b",")
        if comma >= 0:
            tail = tail[comma + 1 :].lstrip()
        return _marker(len(value) - len(tail), text) + (", " if text else _SEPARATOR) + tail
    # Not in the middle of a UTF-8 sequence (nor of a latin-1 decoding of one).
    for _ in range(3):
        if keep and _continues(value[keep]):
            keep -= 1
    return value[:keep] + _marker(len(value) - keep, text)


def _marker(cut: int, text: bool) -> Any:
    marker = CUT_MARKER % cut
    return marker.decode() if text else marker


def _continues(unit: int | str) -> bool:
    """Whether a byte (or a latin-1 character) continues a UTF-8 sequence."""
    code = unit if isinstance(unit, int) else ord(unit)
    return 0x80 <= code < 0xC0


def _is_header_variable(variable: str) -> bool:
    return variable.startswith("HTTP_") or variable in ("CONTENT_TYPE", "CONTENT_LENGTH")


def _environ_name(variable: str) -> bytes:
    """The lower-case field name of a header variable: HTTP_USER_AGENT -> user-agent."""
    return variable.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
