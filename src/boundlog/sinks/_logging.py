"""The stdlib logging bridge: ``LoggingSink(name)`` emits one ``LogRecord`` per record.

People who already route everything through :mod:`logging` (dictConfig handlers,
python-json-logger, structlog's ``ProcessorFormatter``, a server's ``--log-config``)
keep their handlers and formatters: the writer thread hands each record to the named
logger, and the request path still only appends to the queue.

Design.  The writer thread knows formats (records to bytes) and destinations (bytes
to a sink), and must not learn about logging.  A ``LoggingSink`` is a destination like
:class:`~boundlog.NetworkSink`, and it brings its own format step: the log replaces
its format with :meth:`LoggingSink.messages`, whose ``format_batch`` builds, for each
record, the ``msg``, ``args`` and attributes of its ``LogRecord``, keeps them for the
sink, and returns each record's message as a line.  ``write`` then emits what that step
kept, in order, and returns how far into those lines it got, so the writer counts
written and failed records exactly as it does for a file, with no code of its own for
logging.  (Emitting inside ``format_batch`` instead would make the writer's retry of a
failed batch, record by record, emit some records twice.)

The message has the shape the target logger's formatters expect:

* ``"uvicorn"`` (the default for ``uvicorn.access``): uvicorn's
  ``'%s - "%s %s HTTP/%s" %d'`` with uvicorn's args (client, method, path with query,
  HTTP version, status), which ``uvicorn.logging.AccessFormatter`` unpacks.  A record
  holds the client's host, not its port: the client is the host alone.
* ``"gunicorn"`` (the default for ``gunicorn.access``): the log's gunicorn template
  (``--access-logformat``) or gunicorn's default one, with a dict of gunicorn's atoms
  as the only arg, as ``glogging.Logger.access`` logs.
* ``"line"`` (any other logger): the line the log's format makes, without args.

Where only a string names the sink (``BOUNDLOG_SINK``, gunicorn's ``--access-logfile``),
the options follow the name as a URL's query does: ``logging:app.access?message=uvicorn``
or ``logging:app.access?message=line&level=WARNING``.  ``?`` cannot be part of a logger
name there (``LoggingSink(name)`` takes any), and every option is checked as the
keyword is, so that a misspelt one fails at startup instead of being ignored.

Whatever the shape, the record's fields are attributes of the ``LogRecord`` too
(:data:`ATTRIBUTES`, all ``http_``-prefixed, so none clashes with ``LogRecord``'s own),
for formatters that write attributes (python-json-logger, structlog).

Counting.  A record is written once ``logger.handle`` returned for it (the logger's
level and filters may still discard it: that is the logger's choice), and failed when
building its ``LogRecord`` or ``logger.handle`` raised: a filter that raises, or a
handler whose ``emit`` lets an error out.  The stdlib's handlers catch their own errors
and report them on stderr (``Handler.handleError``): such a record counts as written,
because logging swallows the error before boundlog can see it.  The other records of a
batch are emitted whatever one of them did; the writer is told how many failed (the
offset of as many whole lines as were written), which it counts as for a failed write.
A logger that no handler reaches (none of its own, and none up to a logger that does
not propagate, or to a root without one), or a disabled one, drops what it is handed
without a word: such a batch is counted failed, not written, and the first batch on
the writer thread says so on stderr, once (see ``_warn_if_unreached``).
``bytes_written`` counts the messages in UTF-8 plus a newline each, what a
``%(message)s`` handler writes: exact when a batch loses nothing, otherwise the bytes
of as many of the batch's first messages as records were written.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
import sys
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any

from .._errors import ConfigurationError, describe, report_on_stderr
from ..formats._apache import Format
from ..formats._escape import escape
from ..formats._templates import _user
from ..record._headers import HeaderReader
from ..record._record import Record
from ._pathless import Pathless

#: The scheme of ``sink="logging:NAME"``.
SCHEME = "logging:"

#: What may follow a logger name after ``?`` in a spec: LoggingSink's options.
SPEC_OPTIONS = ("message", "level")
_SPEC_EXAMPLE = "logging:app.access?message=uvicorn"

#: The shapes of message, by name (see the module docstring).
SHAPES = ("uvicorn", "gunicorn", "line")
_SHAPE_OF_LOGGER = {"uvicorn.access": "uvicorn", "gunicorn.access": "gunicorn"}

#: gunicorn's default ``access_log_format``.
GUNICORN_DEFAULT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
_UVICORN_MESSAGE = '%s - "%s %s HTTP/%s" %d'

#: The attributes every ``LogRecord`` gets (docs/logging.md says what each holds).
ATTRIBUTES = (
    "http_client", "http_method", "http_path", "http_query", "http_protocol", "http_status",
    "http_bytes_sent", "http_duration", "http_referer", "http_user_agent", "http_fields",
)  # fmt: skip
_REFERER_AND_AGENT = HeaderReader(("referer", "user-agent"))

# A record's msg, args and time; and with its attributes, what write() hands over.
_Message = tuple[str, Any, float]
_Entry = tuple[str, Any, dict[str, Any], float]


class LoggingSink(Pathless):
    """A sink that hands each record to ``logging.getLogger(logger_name)``, at ``level``.

    ``sink="logging:NAME"`` (and ``BOUNDLOG_SINK=logging:NAME``) makes one with the
    defaults, ``"logging:NAME?message=SHAPE&level=LEVEL"`` with those.  ``message``
    chooses the shape of the ``LogRecord``'s msg and args: ``"uvicorn"``,
    ``"gunicorn"`` or ``"line"``; by default ``uvicorn`` for the
    ``uvicorn.access`` logger, ``gunicorn`` for ``gunicorn.access``, ``line`` for any
    other.  One sink serves one log.
    """

    #: Nothing is retried inside write().
    retries = 0

    def __init__(
        self, logger_name: str, level: int | str = logging.INFO, *, message: str | None = None
    ) -> None:
        self.level, self.shape = _checked(logger_name, level, message)
        self.logger = logging.getLogger(logger_name)
        self.name = SCHEME + logger_name
        self.delivered = 0
        self.stopped = False
        # What the format step built for the batch under way, for write() to emit.
        self._pending: list[_Entry] = []
        # Set once a log took the sink: two logs' batches would mix in _pending.
        self._taken = False
        # Whether a check found the logger reaching no handler and said so (once).
        self._warned = False
        # Whether the writer checked, on its first batch, what the log's opening could not.
        self._checked_first_batch = False

    @classmethod
    def from_spec(cls, spec: str) -> LoggingSink:
        """The sink ``"logging:NAME"``, or ``"logging:NAME?message=SHAPE&level=LEVEL"``, names."""
        try:
            name, options = parse_spec(spec)
            return cls(name, **options)
        except ConfigurationError as error:
            raise ConfigurationError(f"sink {spec!r}: {error}") from None

    def messages(self, fmt: Format) -> Format:
        """The format step of a log writing to this sink; ``fmt`` is the log's format."""
        if self._taken:
            raise ConfigurationError(
                f"{self!r} already serves a log: give each log a LoggingSink of its own"
            )
        self._taken = True
        # Said at once only when uvicorn cut the logger off (--no-access-log), which is
        # done before uvicorn imports the application; any other logger may still be
        # configured after the log is built (Django's LOGGING, a dictConfig after the
        # imports), so the writer's first batch checks again (see write).
        if self.logger.name == "uvicorn.access" and "uvicorn" in sys.modules:
            self._warn_if_unreached(opening=True)
        wanted = frozenset(_REFERER_AND_AGENT.names)
        if self.shape == "uvicorn":
            return _Messages(self._pending, _uvicorn_entry, None, wanted, frozenset())
        if self.shape == "gunicorn":
            template = getattr(fmt, "template", None)
            if not isinstance(template, str) or "%(" not in template:
                template = GUNICORN_DEFAULT
            # Its %({name}i)s and %({name}o)s atoms may name any field.
            return _Messages(self._pending, _gunicorn_entry(template), None, None, None)
        read = getattr(fmt, "request_header_names", None)
        return _Messages(
            self._pending,
            _line_entry,
            fmt,
            None if read is None else wanted | frozenset(read),
            getattr(fmt, "response_header_names", None),
        )

    def write(self, data: bytes) -> tuple[int, OSError | None]:
        """Emit the batch's records; return how far into ``data`` as many lines go as
        records were handed over, and an error if any failed.

        ``data`` holds one line per pending record.  Every record is emitted whatever
        another one did, so the offset counts the records handed over, not which: the
        writer counts that many written and the rest failed, as for a write cut short.
        """
        pending, self._pending[:] = self._pending[:], []
        logger = self.logger
        level = self.level
        if not self._checked_first_batch:
            self._checked_first_batch = True
            self._warn_if_unreached(opening=False)
        unreached = _unreached(logger, level)
        if unreached is not None and pending and not self.stopped:
            # logger.handle would drop every record without a word: they are lost, and
            # counted so (failed), not written.
            return 0, OSError(unreached)
        # The factory, as Logger.makeRecord calls it (logging.setLogRecordFactory is how
        # libraries add attributes), without makeRecord's check of each extra key: none
        # of ATTRIBUTES can clash with a LogRecord's own.
        factory = logging.getLogRecordFactory()
        end = 0
        failed = 0
        first: BaseException | None = None
        for msg, args, extra, created in pending:
            if self.stopped:
                # close() gave up on this batch and counted what was not delivered.
                break
            try:
                if logger.isEnabledFor(level):
                    record = factory(logger.name, level, __file__, 0, msg, args, None)
                    record.__dict__.update(extra)
                    # When the response ended, as the server's own record says, not when
                    # the writer got to it.
                    record.created = created
                    record.msecs = int((created - int(created)) * 1000) + 0.0
                    logger.handle(record)
            except BaseException as error:  # a filter or handler is user code
                failed += 1
                first = first or error
            else:
                end = data.index(b"\n", end) + 1
                self.delivered = end
        if first is None:
            return end, None
        return end, OSError(f"{failed} record(s) raised in logger.handle: {describe(first)}")

    def _warn_if_unreached(self, *, opening: bool) -> None:
        """Say on stderr, once, that the logger reaches no handler, and what to do."""
        unreached = _unreached(self.logger, self.level)
        if unreached is None and not opening and not self._warned:
            self._warn_if_below_the_level()
        if unreached is None or self._warned:
            return
        if opening and not _cut_off(self.logger):
            return
        self._warned = True
        name = self.logger.name
        if name == "uvicorn.access" and _cut_off(self.logger):
            fix = (
                "uvicorn's --no-access-log (access_log=False) does that: name another "
                "logger, given a handler in --log-config, e.g. "
                "sink='logging:app.access?message=uvicorn' (docs/integrations.md, "
                "\"Through uvicorn's --log-config\"), or log to a file, e.g. sink='access.log'"
            )
        else:
            fix = (
                f"give {name!r} or a logger above it a handler (logging.basicConfig(), a "
                "dictConfig's handlers), or name another sink, e.g. a file: sink='access.log' "
                "(BOUNDLOG_SINK, or --access-logfile under gunicorn)"
            )
        report_on_stderr(f"{unreached}: its access lines are lost (counted as failed); {fix}")

    def _warn_if_below_the_level(self) -> None:
        """Say on stderr, once, that the logger discards the lines for their level.

        A level is the logger's choice, so such lines count as written; but the usual
        cause is no choice: ``logging.basicConfig()`` leaves the root logger at WARNING,
        and a logger that sets no level of its own takes that one.
        """
        logger, level = self.logger, self.level
        if logger.isEnabledFor(level):
            return
        self._warned = True
        name = logging.getLevelName(level)
        keeps = logging.getLevelName(logger.getEffectiveLevel())
        report_on_stderr(
            f"logger {logger.name!r} keeps {keeps} and above: it discards the access lines, "
            f"at {name} (they count as written, the logger's choice); a logger with no "
            "level takes its parent's, and logging.basicConfig() leaves the root at WARNING: "
            f"give it one (logging.getLogger({logger.name!r}).setLevel(logging.{name}), or "
            "level in a dictConfig), or log at a level it keeps (level=... in the sink)"
        )

    def watch_backlog(self, waiting: Callable[[], int]) -> None:
        """The writer reports a slow handler, as it does a slow file."""

    def hurry(self) -> None:
        """Nothing waits to be retried."""

    def after_fork(self) -> None:
        """Forget a batch the parent's writer was building: the child's records are its own.

        (logging resets its own locks in a forked child.)
        """
        self._pending.clear()

    def close(self) -> None:
        """The handlers are the application's: they stay open."""

    def __repr__(self) -> str:
        return f"<LoggingSink {self.logger.name} {logging.getLevelName(self.level)} {self.shape}>"


def reaches_a_handler(logger: logging.Logger) -> bool:
    """Whether a record ``logger`` handles reaches a handler of its own or of a logger
    above it (as ``Logger.callHandlers`` walks them), the handler of last resort aside."""
    current: logging.Logger | None = logger
    while current is not None:
        if current.handlers:
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def _cut_off(logger: logging.Logger) -> bool:
    """Whether the walk up from ``logger`` ends at a logger that does not propagate:
    someone cut it off on purpose, rather than not having configured logging yet."""
    current: logging.Logger | None = logger
    while current is not None and not current.handlers:
        if not current.propagate:
            return True
        current = current.parent
    return False


def _unreached(logger: logging.Logger, level: int) -> str | None:
    """Why a record at ``level`` handed to ``logger`` is dropped without a word, or None.

    A logger that is disabled (a dictConfig that did not name it, with
    ``disable_existing_loggers``) or that reaches no handler drops every record, at any
    level: that is a loss.  Otherwise a level the logger does not keep is its choice,
    and records at WARNING and above reach the handler of last resort (stderr).
    """
    if logger.disabled:
        return (
            f"logger {logger.name!r} is disabled (a dictConfig that does not name it "
            "disables it: name it, or set disable_existing_loggers to False)"
        )
    if reaches_a_handler(logger):
        return None
    last = logging.lastResort
    if last is not None and level >= last.level and logger.isEnabledFor(level):
        return None
    return f"no handler reaches logger {logger.name!r}"


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """The logger name and the options of ``"logging:NAME?message=SHAPE&level=LEVEL"``.

    Raises the ConfigurationError a LoggingSink of them would, without making one.
    """
    name, query_mark, query = spec.removeprefix(SCHEME).partition("?")
    options: dict[str, Any] = {}
    for pair in query.split("&") if query_mark else ():
        option, _, value = pair.partition("=")
        if option not in SPEC_OPTIONS:
            close = difflib.get_close_matches(option, SPEC_OPTIONS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigurationError(
                f"unknown option {option!r}{hint}: after the logger name come "
                f"message=SHAPE and level=LEVEL, e.g. {_SPEC_EXAMPLE}"
            )
        if option in options:
            raise ConfigurationError(f"{option}= is given twice: give it once")
        if not value:
            raise ConfigurationError(f"{option}= has no value, e.g. {_SPEC_EXAMPLE}")
        # A level by number is a number, as logging's own configuration reads it.
        options[option] = int(value) if option == "level" and value.isdigit() else value
    _checked(name, options.get("level", logging.INFO), options.get("message"))
    return name, options


def _checked(logger_name: object, level: object, message: object) -> tuple[int, str]:
    """A LoggingSink's level and shape, or the ConfigurationError its arguments deserve."""
    if not isinstance(logger_name, str) or not logger_name.strip():
        raise ConfigurationError(
            f"LoggingSink needs a logger name, not {logger_name!r}: e.g. "
            "LoggingSink('uvicorn.access') or sink='logging:uvicorn.access'"
        )
    if message is None:
        message = _SHAPE_OF_LOGGER.get(logger_name, "line")
    if message not in SHAPES:
        raise ConfigurationError(f"unknown message {message!r}: choose one of {', '.join(SHAPES)}")
    return _level(level), str(message)


class _Messages:
    """The format step of a :class:`LoggingSink`: keeps each record's entry, returns lines."""

    __slots__ = (
        "_entry", "_lines", "_pending", "request_header_names", "response_header_names"
    )  # fmt: skip

    #: Notes become the ``http_fields`` attribute.
    reads_notes = True

    def __init__(
        self,
        pending: list[_Entry],
        entry: Callable[[Record, str | None], _Message],
        lines: Format | None,
        request_names: frozenset[bytes] | None,
        response_names: frozenset[bytes] | None,
    ) -> None:
        self._pending = pending
        self._entry = entry
        # The log's format, whose lines are the messages of the "line" shape.
        self._lines = lines
        # The fields the attributes and the message read (None: any), as Format says.
        self.request_header_names = request_names
        self.response_header_names = response_names

    def format_batch(self, records: Sequence[Record]) -> bytes:
        if self._lines is None:
            messages = list(map(self._entry, records, repeat(None)))
            # One line per record whatever a message holds, or the counts would be off.
            data = "".join(
                _message(msg, args).replace("\n", " ") + "\n" for msg, args, _ in messages
            ).encode("utf-8", "replace")
        else:
            # The messages are the format's lines: its bytes are already what to count.
            data = self._lines.format_batch(records)
            texts = data.decode("utf-8", "replace").split("\n")[:-1]
            if len(texts) != len(records):
                raise ValueError(
                    f"the log's format made {len(texts)} line(s) of {len(records)} record(s)"
                )
            messages = list(map(self._entry, records, texts))
        # A column at a time, as the formats read header fields.
        referers, agents = _REFERER_AND_AGENT.columns(
            [record.request_headers for record in records]
        )
        entries = [
            (msg, args, _attributes(record, referer, agent), created)
            for (msg, args, created), record, referer, agent in zip(
                messages, records, referers, agents, strict=True
            )
        ]
        # Kept only once the whole batch is built: the writer retries a batch that
        # raised record by record, and no record may be kept twice.
        self._pending.extend(entries)
        return data


def _message(msg: str, args: Any) -> str:
    # LogRecord.getMessage's rule: a lone mapping is the args themselves.
    if not args:
        return msg
    if len(args) == 1 and isinstance(args[0], Mapping):
        args = args[0]
    return str(msg % args)


def _attributes(record: Record, referer: bytes | None, agent: bytes | None) -> dict[str, Any]:
    return {
        "http_client": record.client,
        "http_method": record.method,
        "http_path": record.path.decode("latin-1"),
        "http_query": record.query.decode("latin-1"),
        "http_protocol": record.protocol,
        "http_status": record.status,
        "http_bytes_sent": record.bytes_sent,
        "http_duration": record.duration,
        "http_referer": None if referer is None else referer.decode("latin-1"),
        "http_user_agent": None if agent is None else agent.decode("latin-1"),
        "http_fields": None if record.notes is None else dict(record.notes),
    }


def _line_entry(record: Record, line: str | None) -> _Message:
    return line or "", (), record.time + record.duration


def _uvicorn_entry(record: Record, _: str | None) -> _Message:
    # uvicorn's get_path_with_query_string: its path is the decoded path, quoted again.
    path = urllib.parse.quote(urllib.parse.unquote(record.path.decode("latin-1")))
    if record.query:
        path += "?" + escape(record.query).decode("ascii")
    args = (
        record.client or "",
        record.method,
        path,
        record.protocol.removeprefix("HTTP/"),
        record.status,
    )
    return _UVICORN_MESSAGE, args, record.time + record.duration


def _gunicorn_entry(template: str) -> Callable[[Record, str | None], _Message]:
    try:
        template % SafeAtoms({})
    except (TypeError, ValueError, KeyError) as error:
        raise ConfigurationError(
            f"{template!r} is not a template of gunicorn atoms: {describe(error)}"
        ) from None

    def entry(record: Record, _: str | None) -> _Message:
        ended = record.time + record.duration
        # Read here, not once: gunicorn's master builds the log its workers fork.
        atoms = _atoms(record, ended, f"<{os.getpid()}>")
        # A dict as the only arg, as gunicorn logs: LogRecord takes it as the args.
        return template, (atoms,), ended

    return entry


def _atoms(record: Record, ended: float, pid: str) -> SafeAtoms:
    """gunicorn's ``glogging.Logger.atoms`` of a record, with gunicorn's meanings, as
    its ``SafeAtoms`` holds them: every text value with its quotes escaped."""
    micros = round(record.duration * 1_000_000)
    seconds, micro = divmod(micros, 1_000_000)
    path = record.path.decode("latin-1")
    query = record.query.decode("latin-1")
    uri = f"{path}?{query}" if query else path
    method = record.method.replace('"', '\\"')
    protocol = record.protocol.replace('"', '\\"')
    atoms = SafeAtoms(
        h=(record.client or "-").replace('"', '\\"'),
        l="-",
        u="-",
        t=_clf_time(int(ended)),
        r=f"{record.method} {uri} {record.protocol}".replace('"', '\\"'),
        s=str(record.status),
        m=method,
        U=urllib.parse.unquote(path, "latin-1").replace('"', '\\"'),
        q=query.replace('"', '\\"'),
        H=protocol,
        b=str(record.bytes_sent),
        B=record.bytes_sent,
        T=seconds,
        D=micros,
        M=micros // 1000,
        L="%d.%06d" % (seconds, micro),
        p=pid,
    )
    for kind, headers in (("}i", record.request_headers), ("}o", record.response_headers)):
        if isinstance(headers, dict):
            # A WSGI environ: its HTTP_* variables (and two more) are the request's fields.
            pairs: Any = [
                (key.removeprefix("HTTP_").replace("_", "-"), str(value))
                for key, value in headers.items()
                if key.startswith("HTTP_") or key in _CONTENT_VARIABLES
            ]
        else:
            pairs = headers.items() if isinstance(headers, Mapping) else headers
        for name, value in pairs:
            if type(name) is bytes:
                name = name.decode("latin-1")
            if type(value) is bytes:
                value = value.decode("latin-1")
            atoms["{" + name.lower() + kind] = value.replace('"', '\\"')
    atoms["f"] = atoms.get("{referer}i", "-")
    atoms["a"] = atoms.get("{user-agent}i", "-")
    authorization = atoms.get("{authorization}i")
    if authorization is not None:
        atoms["u"] = _user(authorization.encode("latin-1")).decode("latin-1")
    return atoms


# The request's fields a WSGI environ holds without the HTTP_ prefix (PEP 3333).
_CONTENT_VARIABLES = frozenset(("CONTENT_TYPE", "CONTENT_LENGTH"))


@functools.lru_cache(maxsize=4)
def _clf_time(second: int) -> str:
    """gunicorn's %(t)s: the local time in Apache's format (records of one second share it)."""
    return time.strftime("[%d/%b/%Y:%H:%M:%S %z]", time.localtime(second))


class SafeAtoms(dict[str, Any]):
    """What gunicorn's ``glogging.SafeAtoms`` is to a format: header atoms in any case,
    a dash for any atom it lacks.  Its own copy, so that the shape needs no gunicorn;
    the values come escaped (see _atoms), as gunicorn's are."""

    def __getitem__(self, key: str) -> Any:
        if key.startswith("{"):
            key = key.lower()
        return super().__getitem__(key) if key in self else "-"


def _level(level: object) -> int:
    if isinstance(level, str):
        number = logging.getLevelNamesMapping().get(level.upper())
        if number is not None:
            return number
    elif isinstance(level, int) and not isinstance(level, bool) and level > 0:
        return level
    raise ConfigurationError(
        f"level must be a logging level, e.g. level=logging.INFO or level='INFO', not {level!r}"
    )
