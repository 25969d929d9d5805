"""The column-wise machinery every line format shares, on the writer thread.

A batch is formatted column by column, because a Python loop over records costs about
three times as much: the records are transposed with ``zip``, each column is converted
by C-level ``map``, ``join`` and ``%`` calls over the whole batch (values that repeat,
such as methods, protocols and statuses, are converted once per distinct value), and
the columns are laid between the template's own text by extended-slice assignment into
one list of pieces (a :class:`_Layout`) that is joined once.

Escaping is the expensive part of an Apache-style line, and almost no field needs it,
so a whole batch is built with the raw values first and then checked in one pass
against ``_PLAIN``; only the columns that hold an unsafe byte are escaped (see
``_escape``).  ``_apache``, ``_json``, ``_dev`` and ``_templates`` build on these.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import compress, repeat
from typing import Any, TypeVar, cast

from ._escape import PLAIN as _PLAIN
from ._escape import escape, escape_unquoted

_DASH = b"-"
_DASH_FOR_NONE: dict[bytes | None, bytes] = {None: _DASH}
_DASH_FOR_ZERO = {b"0": _DASH}
_BODILESS = frozenset((204, 304))
_NO_SEPARATOR_FOR_EMPTY_QUERY = {b"": b""}

_Value = TypeVar("_Value", bound=Hashable)
_Piece = TypeVar("_Piece", bytes, str)


def _text(value: str) -> bytes:
    # Servers hand over method, protocol and address as text; surrogatepass keeps any
    # code point encodable, and every non-ASCII byte is escaped afterwards.
    return value.encode("utf-8", "surrogatepass")


def _per_value(values: Sequence[_Value], convert: Callable[[_Value], _Piece]) -> Iterable[_Piece]:
    """Convert each distinct value once, then look every value up."""
    converted = {value: convert(value) for value in set(values)}
    return map(converted.__getitem__, values)


class _Layout:
    """A line as a list of pieces: the template's own text, with a place for each field."""

    __slots__ = ("_line", "_places")

    def __init__(self, template: Sequence[bytes | str | None]) -> None:
        self._line = [piece if piece is not None else "" for piece in template]
        self._places = [i for i, piece in enumerate(template) if piece is None]

    def lines(self, fields: Iterable[Iterable[_Piece]], count: int) -> list[_Piece]:
        """Return the pieces of ``count`` lines; ``fields`` holds a column per place."""
        pieces: list[Any] = self._line * count
        step = len(self._line)
        for place, field in zip(self._places, fields, strict=True):
            # Raises ValueError, never misaligns, if a column has the wrong length.
            pieces[place::step] = field
        return pieces


def _unchanged(value: _Value) -> _Value:
    return value


def _dash_for_none(values: Sequence[bytes | None]) -> Sequence[bytes]:
    if None in values:
        values = tuple(map(_DASH_FOR_NONE.get, values, values))
    return cast("Sequence[bytes]", values)


def _raw_clients(clients: Sequence[str | None]) -> list[bytes] | None:
    """Return the clients as bytes, or None if one holds a space or a newline."""
    # all() tests truth, which is cheaper than the equality that `None in` tests.
    if not all(clients):
        clients = [client or "-" for client in clients]
    text = "\n".join(cast("Sequence[str]", clients))
    # A space would end the unquoted field early and a newline would misalign the
    # split: both need the escaped path.
    if " " in text:
        return None
    fields = _text(text).split(b"\n")
    return fields if len(fields) == len(clients) else None


def _escaped_clients(
    clients: Sequence[str | None], raw_clients: list[bytes] | None
) -> Sequence[bytes]:
    """Return the clients escaped, reusing ``raw_clients`` when none needs escaping."""
    if raw_clients is not None and not b"".join(raw_clients).translate(None, _PLAIN):
        return raw_clients
    return [escape_unquoted(_text(client)) if client else _DASH for client in clients]


def _escaped_column(values: Sequence[bytes]) -> Sequence[bytes]:
    """Return ``values`` with the ones that need it escaped."""
    if not b"".join(values).translate(None, _PLAIN):
        return values
    # What is left of each value once its plain bytes are deleted: only the values
    # with something left go through escape().
    leftovers = map(bytes.translate, values, repeat(None), repeat(_PLAIN))
    escaped = list(values)
    for index in compress(range(len(values)), leftovers):
        escaped[index] = escape(values[index])
    return escaped


def _bytes_on_the_wire(
    methods: tuple[str, ...], statuses: tuple[int, ...], sents: tuple[int, ...]
) -> tuple[int, ...]:
    """The body bytes servers really send: none for HEAD, 204, 304 and 1xx responses
    other than 101.

    An application may hand a body to the server for those (a HEAD handler reusing its
    GET code does); the server discards it, so Apache and nginx would log 0 bytes.  A 101
    is followed by the protocol it switched to: its bytes are a websocket session's
    frames, which nginx counts too.
    """
    if "HEAD" not in methods and _BODILESS.isdisjoint(statuses) and min(statuses) >= 200:
        return sents
    return tuple(
        0
        if method == "HEAD" or status in _BODILESS or (100 <= status < 200 and status != 101)
        else sent
        for method, status, sent in zip(methods, statuses, sents, strict=True)
    )


def _sent_fields(sents: tuple[int, ...]) -> list[bytes]:
    # One %-formatting for the whole column; %b is "-" when no body byte was sent.
    fields = ((b"%d " * len(sents)) % sents).split()
    return fields if all(sents) else list(map(_DASH_FOR_ZERO.get, fields, fields))
