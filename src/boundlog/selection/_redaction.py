"""Query redaction: credentials in a query string never reach the log.

The writer replaces the value of every query parameter whose name is listed with
``[redacted]`` (the marker sensitive headers get, see ``_headers``), in the record
itself, so every format shows the same redacted query.  Names compare
case-insensitively after percent-decoding, as the application sees them:
``pass%77ord=x`` is a password too.  A name nested in brackets, as PHP, Rails and
JavaScript's ``qs`` send forms (``password[]``, ``user[password]``,
``a[b][token]``), is listed when any of its parts is.  Parameters are separated by
``&`` or ``;`` (some frameworks still split on both, so both are treated as
boundaries).

Sensitive *headers* (Authorization, Cookie, Set-Cookie, Proxy-Authorization) are
masked separately, by ``_headers.HeaderReader``, whenever a format reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from operator import itemgetter
from urllib.parse import unquote_to_bytes

from .._core import joined_queries as _joined_queries
from .._core import unpacked as _unpacked
from .._errors import ConfigurationError
from ..record._headers import REDACTED
from ..record._record import QUERY, Record, new_record

_SEPARATOR = re.compile(rb"([&;])")
# A percent escape followed by "=" with no separator between: an escaped name, or
# (rarely) a value with "=" after an escape.  Each try ends at the next escape, so the
# search is linear even in a query of nothing but "%".
_ESCAPED_NAME = re.compile(rb"%[^&;=%]*+=")
_BOUNDARY = b"&"
_BRACKET = re.compile(rb"[\[\]]")
_query = itemgetter(QUERY)


class QueryRedaction:
    """Rewrites records whose query holds a listed parameter; false when none are listed."""

    __slots__ = ("_candidate", "_names", "_needles")

    def __init__(self, names: Iterable[object]) -> None:
        self._names = frozenset(map(_parameter_name, names))
        # A batch is searched for these first, with bytes methods: a regex engine tries
        # every position of the batch's queries, which costs ten times as much.  A name
        # containing another needs no search of its own ("token" finds "id_token").
        self._needles = tuple(
            name for name in self._names if not any(n in name for n in self._names - {name})
        )
        # A query that may need redacting: a listed name as it stands, before brackets
        # or in them, or any name with a percent escape (decoded in ``redact``).  Each
        # alternative starts only where a parameter does and never backtracks over what
        # it consumed (possessive repeats): the search is linear in what a client sent.
        listed = b"|".join(map(re.escape, sorted(self._names, key=len, reverse=True)))
        as_it_stands = rb"(?:%s)[=\[]" % listed
        in_brackets_or_escaped = rb"[^&;=\[%%]*+(?:%%|\[(?:[^&;=\]]*+\]\[)*?(?:%s)\])" % listed
        self._candidate = re.compile(
            rb"(?:^|[&;])(?:%s|%s)" % (as_it_stands, in_brackets_or_escaped), re.IGNORECASE
        )

    def __bool__(self) -> bool:
        return bool(self._names)

    def __call__(self, batch: list[Record]) -> None:
        """Redact the listed parameters' values in the records of ``batch``, in place."""
        # One look at the whole batch's queries first: most batches hold no candidate.
        # The C core joins them alike (csrc/selection/select.c), or leaves it here.
        queries = _joined_queries(batch) if _joined_queries is not None else None
        if queries is None:
            queries = self.joined_python(batch)
        if not queries:
            return
        lowered = queries.lower()
        if not any(needle in lowered for needle in self._needles) and not (
            b"%" in queries and _ESCAPED_NAME.search(queries)
        ):
            return
        if _unpacked is not None:
            # Records the C hand-off packed (its bytes were searched above): only a
            # batch that may need redacting is unpacked, to be rewritten as Records.
            batch[:] = _unpacked(batch)
        search = self._candidate.search
        for index, record in enumerate(batch):
            query = record[QUERY]
            if query and search(query):
                redacted = self.redact(query)
                if redacted != query:
                    batch[index] = new_record(
                        Record, (*record[:QUERY], redacted, *record[QUERY + 1 :])
                    )

    @staticmethod
    def joined_python(batch: list[Record]) -> bytes:
        """The non-empty queries of ``batch`` joined with ``&``, in pure Python: the
        reference the C core is tested against."""
        return _BOUNDARY.join(filter(None, map(_query, batch)))

    def redact(self, query: bytes) -> bytes:
        """``query`` with the values of the listed parameters replaced by ``[redacted]``."""
        names = self._names
        parts = _SEPARATOR.split(query)
        # Separators sit at the odd indexes.
        for index in range(0, len(parts), 2):
            name, equals, value = parts[index].partition(b"=")
            if not value:
                continue
            decoded = unquote_to_bytes(name).lower()
            # The name itself, or any of its parts in brackets.
            if decoded in names or (
                b"[" in decoded and not names.isdisjoint(_BRACKET.split(decoded))
            ):
                parts[index] = name + equals + REDACTED
        return b"".join(parts)


def _parameter_name(name: object) -> bytes:
    if not isinstance(name, str) or not name or any(c in name for c in "&;=% \t"):
        raise ConfigurationError(
            f"redact_query entry {name!r} is not a query parameter name: give names "
            "like 'token' as text (redact_query=() turns redaction off)"
        )
    return name.lower().encode("utf-8")
