"""What the writer logs of each batch: filters, and rewrites of the records it keeps.

All of it runs on the writer thread, before formatting, batch by batch: the request
path hands over every record as before, so a filter can never slow a response down.
A log with nothing to filter or rewrite has no selection at all (``make_select``
returns None) and its writer skips the step.

The order within a batch: the cheap filters (``skip_paths``, ``skip_status``,
``min_duration``, ``sample``), then the rewrites (the client behind trusted proxies,
query redaction), then the ``keep`` predicate, which sees each record as it will be
logged.  Every record a filter skips is counted in ``Stats.filtered``.

``skip_paths`` skips its paths' responses below 400 only: their errors are logged
(``skip_path_errors=True`` skips those too).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

from .._core import select_records as _select_records
from .._errors import ConfigurationError, describe
from .._options import (
    DEFAULT_REDACTED_QUERY,
    PROXY_HEADERS,
    entries,
    flag,
    fraction,
    seconds,
)
from ..record._record import DURATION, PATH, STATUS, Record
from ._proxies import TrustedProxies
from ._redaction import QueryRedaction

#: Rewrites the records of a batch in place (the writer owns the list).
Rewrite = Callable[[list[Record]], None]
#: The writer's stderr warning, rate-limited.
Report = Callable[[str], None]

# Status codes are three digits (RFC 9110 15).
_STATUS_CODES = range(100, 1000)


class Select:
    """Keeps the records a log's filters let through, rewritten as the log asks."""

    __slots__ = (
        "_exact_paths",
        "_header_names",
        "_keep",
        "_min_duration",
        "_path_prefixes",
        "_random",
        "_rewrites",
        "_sample",
        "_skip_path_errors",
        "_skip_status",
    )

    def __init__(
        self,
        *,
        skip_paths: frozenset[bytes],
        path_prefixes: tuple[bytes, ...],
        skip_path_errors: bool,
        skip_status: frozenset[int],
        min_duration: float,
        sample: float,
        keep: Callable[[Record], object] | None,
        rewrites: Sequence[Rewrite],
        header_names: frozenset[bytes] = frozenset(),
    ) -> None:
        self._exact_paths = skip_paths
        self._path_prefixes = path_prefixes
        self._skip_path_errors = skip_path_errors
        self._skip_status = skip_status
        self._min_duration = min_duration
        self._sample = sample
        self._keep = keep
        self._rewrites = tuple(rewrites)
        self._header_names = header_names
        # Each writer draws its own numbers: no lock shared with the application's use
        # of the random module, and reseeded in a forked child (see reseed).
        self._random = random.Random()

    @property
    def request_header_names(self) -> frozenset[bytes] | None:
        """The request header fields the rewrites read; None if ``keep`` may read any."""
        return None if self._keep is not None else self._header_names

    @property
    def takes_packed(self) -> bool:
        """Whether its batches may hold records the C hand-off packed: only when all
        it does is redact queries, which reads packed queries in C and unpacks the
        rare batch it rewrites."""
        return (
            not (self._exact_paths or self._path_prefixes or self._skip_status)
            and not self._min_duration
            and self._sample >= 1.0
            and self._keep is None
            and all(isinstance(rewrite, QueryRedaction) for rewrite in self._rewrites)
        )

    def reseed(self) -> None:
        """In a forked child: draw other numbers than the parent and its other children."""
        self._random.seed()

    def __call__(self, batch: list[Record], report: Report) -> list[Record]:
        """The records of ``batch`` to log, rewritten; never raises."""
        try:
            # A copy, because the rewrites work in place and a failure must leave the
            # records as they came for the second pass below.
            return self._select(batch.copy(), report)
        except BaseException as error:
            # BaseException too: the predicate is user code, and a SystemExit raised in
            # it would otherwise end the writer thread without a word.
            first_error = error
        # A record the rewrites cannot handle (a server's odd header container) is
        # logged as it came rather than lost; the others are selected as usual.
        kept: list[Record] = []
        unhandled = 0
        for record in batch:
            try:
                kept += self._select([record], report)
            except BaseException:
                unhandled += 1
                kept.append(record)
        report(f"cannot filter or rewrite {unhandled} record(s), logged as they came: "
               f"{describe(first_error)}")  # fmt: skip
        return kept

    def _select(self, batch: list[Record], report: Report) -> list[Record]:
        if self._exact_paths or self._path_prefixes or self._skip_status or self._min_duration:
            kept = (
                None
                if _select_records is None
                else _select_records(
                    batch,
                    self._exact_paths,
                    self._path_prefixes,
                    self._skip_path_errors,
                    self._skip_status,
                    self._min_duration,
                )
            )
            # The C core (csrc/selection/select.c) keeps the same records, or leaves the batch here.
            batch = self.filtered_python(batch) if kept is None else kept
        if self._sample < 1.0:
            draw, sample = self._random.random, self._sample
            batch = [r for r in batch if r[STATUS] >= 400 or draw() < sample]
        for rewrite in self._rewrites:
            if batch:
                rewrite(batch)
        if self._keep is not None and batch:
            batch = self._kept(batch, self._keep, report)
        return batch

    def filtered_python(self, batch: list[Record]) -> list[Record]:
        """What skip_paths, skip_status and min_duration keep of ``batch``, in pure
        Python: the reference the C core is tested against."""
        if self._exact_paths or self._path_prefixes:
            exact, prefixes = self._exact_paths, self._path_prefixes
            if self._skip_path_errors:
                batch = [
                    r for r in batch if r[PATH] not in exact and not r[PATH].startswith(prefixes)
                ]
            else:
                # A skipped path's errors are logged: a health check or a metrics scrape
                # is noise while it succeeds, and the first thing to look at when it fails.
                batch = [
                    r
                    for r in batch
                    if (r[PATH] not in exact and not r[PATH].startswith(prefixes))
                    or r[STATUS] >= 400
                ]
        if self._skip_status:
            skip = self._skip_status
            batch = [r for r in batch if r[STATUS] not in skip]
        if self._min_duration:
            # Fast errors are skipped too: a slow-request log (nginx users know it as
            # such) must mean slow, and mixing in errors would make both hard to read.
            # Errors belong in a log of their own: skip_status=range(100, 500).
            fastest_kept = self._min_duration
            batch = [r for r in batch if r[DURATION] >= fastest_kept]
        return batch

    def _kept(
        self, batch: list[Record], keep: Callable[[Record], object], report: Report
    ) -> list[Record]:
        kept = []
        raised = 0
        first_error: BaseException | None = None
        for record in batch:
            try:
                # Integrations and rewrites hand over Records; one submitted by hand
                # may be a plain tuple, and the predicate reads fields by name.
                named = record if type(record) is Record else Record._make(record)
                if not keep(named):
                    continue
            except BaseException as error:
                # Log rather than lose: a broken predicate must not empty the log.
                raised += 1
                if first_error is None:
                    first_error = error
            kept.append(record)
        if first_error is not None:
            report(f"the keep predicate raised for {raised} record(s), which were logged: "
                   f"{describe(first_error)}")  # fmt: skip
        return kept


def make_select(
    *,
    skip_paths: Iterable[str | bytes] | str | bytes = (),
    skip_path_errors: bool = False,
    skip_status: Iterable[int | range] | int | range = (),
    min_duration: float = 0.0,
    sample: float = 1.0,
    keep: Callable[[Record], object] | None = None,
    redact_query: Iterable[str] | str = DEFAULT_REDACTED_QUERY,
    trusted_proxies: Iterable[str] | str = (),
    proxy_header: str = PROXY_HEADERS[0],
) -> Select | None:
    """The selection these options ask for, or None when they ask for nothing.

    Raises a ConfigurationError naming the first option it cannot use.
    """
    exact, prefixes = _paths(skip_paths)
    skip_path_errors = flag("skip_path_errors", skip_path_errors)
    statuses = _statuses(skip_status)
    min_duration = seconds("min_duration", min_duration, example=0.5)
    sample = fraction("sample", sample, example=0.1)
    if keep is not None and not callable(keep):
        raise ConfigurationError(
            f"keep must be a function taking a Record and returning whether to log it, not {keep!r}"
        )
    rewrites: list[Rewrite] = []
    proxies = TrustedProxies(entries("trusted_proxies", trusted_proxies), header=proxy_header)
    if proxies:
        rewrites.append(proxies)
    # After the client is known, so that both see the record as the server gave it.
    redaction = QueryRedaction(entries("redact_query", redact_query))
    if redaction:
        rewrites.append(redaction)
    if not (exact or prefixes or statuses or min_duration or sample < 1.0 or keep or rewrites):
        return None
    return Select(
        skip_paths=exact,
        path_prefixes=prefixes,
        skip_path_errors=skip_path_errors,
        skip_status=statuses,
        min_duration=min_duration,
        sample=sample,
        keep=keep,
        rewrites=rewrites,
        header_names=proxies.request_header_names if proxies else frozenset(),
    )


def _paths(skip_paths: object) -> tuple[frozenset[bytes], tuple[bytes, ...]]:
    exact: set[bytes] = set()
    prefixes: list[bytes] = []
    for entry in entries("skip_paths", skip_paths):
        path = entry.encode("utf-8") if isinstance(entry, str) else entry
        if not isinstance(path, bytes) or not path.startswith(b"/") or b"*" in path[:-1]:
            raise ConfigurationError(
                f"skip_paths entry {entry!r} is not a path: give one starting with '/', "
                "either exact ('/healthz') or a prefix ending in '*' ('/static/*')"
            )
        if path.endswith(b"*"):
            prefixes.append(path[:-1])
        else:
            exact.add(path)
    return frozenset(exact), tuple(prefixes)


def _statuses(skip_status: object) -> frozenset[int]:
    statuses: set[int] = set()
    for entry in entries("skip_status", skip_status):
        codes = entry if isinstance(entry, range) else [entry]
        if not all(type(code) is int and code in _STATUS_CODES for code in codes) or not codes:
            raise ConfigurationError(
                f"skip_status entry {entry!r} is not a status code or a range of them: "
                "give codes from 100 to 999, e.g. [304, range(100, 200)]"
            )
        statuses.update(codes)
    return frozenset(statuses)
