"""Finding header fields in a record's headers, on the writer thread.

The request path hands over the server's own header list (or the WSGI environ) without
looking into it: searching it costs as much as the rest of the record.  The writer
searches it once per record for exactly the fields its format and policy name.

Field names compare case-insensitively.  A field sent more than once is logged as its
values joined with ``", "``, which is what RFC 9110 says a recipient may do, and what
Apache's ``%{...}i`` shows.

Credentials never reach a log by accident: the fields in :data:`SENSITIVE_HEADERS`
come out as :data:`REDACTED` unless the log was told to allow them by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, repeat
from typing import Any

from .._errors import ConfigurationError
from ._record import Headers

#: Header fields whose values are credentials: logged as :data:`REDACTED` unless allowed.
SENSITIVE_HEADERS = frozenset(("authorization", "cookie", "proxy-authorization", "set-cookie"))
#: What a redacted value is replaced with.
REDACTED = b"[redacted]"

_SEPARATOR = b", "
_PAIR_LISTS = frozenset((list, tuple))
# The two request headers CGI (and so WSGI) keeps without the HTTP_ prefix.
_UNPREFIXED = {b"content-type": "CONTENT_TYPE", b"content-length": "CONTENT_LENGTH"}


def header_name(name: str) -> bytes:
    """The lower-case bytes of a header field name, or a ConfigurationError."""
    if not isinstance(name, str) or not name or not name.isascii() or not _is_token(name):
        raise ConfigurationError(
            f"{name!r} is not a header field name: use letters, digits and -, e.g. 'X-Request-ID'"
        )
    return name.lower().encode("ascii")


def header_names(option: str, names: Iterable[str]) -> tuple[str, ...]:
    """The header field names an option gives, checked; a lone string is refused, since
    it would be read one character at a time."""
    if isinstance(names, str | bytes):
        raise ConfigurationError(
            f"{option} must be a list of header names, not the single string {names!r}: "
            f"write [{names!r}]"
        )
    checked = tuple(names)
    for name in checked:
        header_name(name)
    return checked


def _is_token(name: str) -> bool:
    # RFC 9110 token characters.
    return all(c.isalnum() or c in "!#$%&'*+-.^_`|~" for c in name)


def _as_bytes(value: bytes | str) -> bytes:
    if type(value) is bytes:
        return value
    text = str(value)
    try:
        # WSGI and http.server decode headers as latin-1: this recovers the wire bytes.
        return text.encode("latin-1")
    except UnicodeEncodeError:
        # aiohttp's text headers are UTF-8 with surrogateescape; anything else is
        # kept encodable (and escaped by the format).
        return text.encode("utf-8", "surrogatepass")


def _spelt_alike(empty: Any, names: list[Any], check: Callable[[Any], bool]) -> bool:
    """Whether ``names`` are all of ``empty``'s type and pass ``check`` joined together."""
    try:
        return check(empty.join(names))
    except TypeError:
        return False


def environ_key(name: bytes) -> str:
    """The WSGI environ key of the request header field ``name`` (lower-case bytes)."""
    return _UNPREFIXED.get(name) or "HTTP_" + name.decode().upper().replace("-", "_")


class HeaderReader:
    """Picks the named fields out of each record's headers.

    ``names`` are the fields to find; ``allow`` names the :data:`SENSITIVE_HEADERS`
    whose values may be logged as they are.
    """

    __slots__ = ("_environ_keys", "_masked", "_upper_names", "_wanted", "names")

    def __init__(self, names: Iterable[str], *, allow: Iterable[str] = ()) -> None:
        self.names = tuple(dict.fromkeys(map(header_name, names)))
        self._wanted = frozenset(self.names)
        allowed = set(map(header_name, allow))
        self._masked = frozenset(
            name
            for name in self.names
            if name.decode() in SENSITIVE_HEADERS and name not in allowed
        )
        self._environ_keys = {name: environ_key(name) for name in self.names}
        self._upper_names = tuple(name.decode().upper() for name in self.names)

    def redacts(self, name: bytes) -> bool:
        """Whether the field ``name`` (one of :attr:`names`) is written as :data:`REDACTED`."""
        return name in self._masked

    def columns(self, sources: Sequence[Headers], missing: Any = None) -> list[list[Any]]:
        """One column per name: each record's value of that field, or ``missing``."""
        # The writer's cost per line is mostly here, so the two shapes servers hand over
        # are read a column at a time by C-level calls; anything else record by record.
        kinds = set(map(type, sources))
        if kinds == {dict}:
            return self._columns_of_environs(sources, missing)
        if kinds and kinds <= _PAIR_LISTS:
            columns = self._columns_of_plain_pairs(sources, missing)
            if columns is not None:
                return columns
        rows = list(map(self.values, sources))
        if not rows:
            return [[] for _ in self.names]
        return [
            [missing if value is None else value for value in column]
            for column in zip(*rows, strict=True)
        ]

    def _columns_of_environs(self, environs: Sequence[Any], missing: Any) -> list[list[Any]]:
        return [
            self._finished(name, environs, self._environ_keys[name], missing) for name in self.names
        ]

    def _columns_of_plain_pairs(
        self, sources: Sequence[Any], missing: Any
    ) -> list[list[Any]] | None:
        # Lists of pairs whose names share one spelling and are sent once each: lower-case
        # bytes (what ASGI servers pass) or upper-case text (gunicorn's request headers).
        # Then a dict per record finds every field.
        try:
            tables = list(map(dict, sources))
        except (TypeError, ValueError):
            return None
        names = list(chain.from_iterable(tables))
        # islower() and isupper() are one pass without a copy; they are also false for
        # names without a letter, which then take the general path.
        keys: Sequence[Any]
        if not names or _spelt_alike(b"", names, bytes.islower):
            keys = self.names
        elif _spelt_alike("", names, str.isupper):
            keys = self._upper_names
        else:
            return None
        if sum(map(len, tables)) != sum(map(len, sources)):
            return None
        return [
            self._finished(name, tables, key, missing)
            for name, key in zip(self.names, keys, strict=True)
        ]

    def _finished(
        self, name: bytes, tables: Sequence[dict[Any, Any]], key: Any, missing: Any
    ) -> list[Any]:
        """Field ``name``'s column, found under ``key`` in each table: bytes, redacted if
        it is masked, ``missing`` where it is absent."""
        if name in self._masked:
            return [
                missing if value is None else REDACTED
                for value in map(dict.get, tables, repeat(key))
            ]
        # The value for a missing field is put in by the lookup itself: a pass fewer.
        column: list[Any] = list(map(dict.get, tables, repeat(key), repeat(missing)))
        if not set(map(type, column)) <= {bytes, type(missing)}:
            # A WSGI record's picked fields hold None for an absent one, and text that
            # is bytes decoded as latin-1 for the others.
            try:
                column = [missing if value is None else value.encode("latin-1") for value in column]
            except (AttributeError, UnicodeEncodeError):
                column = [missing if value is None else _as_bytes(value) for value in column]
        return column

    def values(self, source: Headers) -> tuple[bytes | None, ...]:
        """The value of each named field in ``source``, or None where it is absent."""
        # A dict is a WSGI environ; a header mapping of another kind is read as pairs.
        found = self._from_environ(source) if isinstance(source, dict) else self._from_pairs(source)
        if self._masked:
            for name in self._masked.intersection(found):
                found[name] = REDACTED
        return tuple(map(found.get, self.names))

    def _from_pairs(self, source: Headers) -> dict[bytes, bytes]:
        pairs: Iterable[Any] = source.items() if isinstance(source, Mapping) else source
        wanted = self._wanted
        found: dict[bytes, bytes] = {}
        for name, value in pairs:
            if type(name) is not bytes:
                name = _as_bytes(name)
            name = name.lower()
            if name in wanted:
                value = _as_bytes(value)
                found[name] = found[name] + _SEPARATOR + value if name in found else value
        return found

    def _from_environ(self, environ: Mapping[str, Any]) -> dict[bytes, bytes]:
        # A WSGI server has already joined repeated fields with ", ".
        found: dict[bytes, bytes] = {}
        for name, key in self._environ_keys.items():
            value = environ.get(key)
            if value is not None:
                found[name] = _as_bytes(value)
        return found
