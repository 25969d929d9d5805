"""gunicorn: ``--logger-class boundlog.gunicorn.Logger`` writes the access log through boundlog.

The logger keeps everything gunicorn's own logger does (error log, syslog, logging
configuration) and takes over one thing: the access log named by ``--access-logfile``
(``-`` is stdout).  Each request becomes a :class:`~boundlog.Record` handed to an
:class:`~boundlog.AccessLog`, whose writer thread formats and writes lines in batches.
Without ``--access-logfile`` the logger behaves exactly as gunicorn's.

``--access-logformat`` chooses the format: the names ``combined``, ``common``,
``json``, ``ecs``, ``gcp`` and ``otel`` choose those formats.  Any other value, gunicorn's default included (so that
its ``%(u)s`` shows the Basic-auth user as gunicorn's does, where ``combined`` writes
``-``), is compiled as a :class:`~boundlog.Template` of gunicorn's atoms, ``%(h)s``,
``%({x-request-id}i)s`` and the rest, with gunicorn's meanings; unlike gunicorn,
boundlog escapes what the client sent, and writes ``%(b)s`` as ``-`` for an empty body,
as Apache does.  ``%({name}e)s`` is the environ's variable, read when the response
ends (so a view may set it), ``%({name}n)s`` a field the application added.  An atom
boundlog does not know stops gunicorn at startup with an error naming it.

The queue and policy come from the environment (or gunicorn's ``--env``/``raw_env``):
``BOUNDLOG_POLICY`` (``drop`` or ``wait``), ``BOUNDLOG_MAX_QUEUE``, ``BOUNDLOG_BATCH_SIZE``,
``BOUNDLOG_MAX_RECORD_BYTES`` and ``BOUNDLOG_FLUSH_INTERVAL``; what is logged from
``BOUNDLOG_SKIP_PATHS`` and ``BOUNDLOG_TRUSTED_PROXIES`` (comma-separated lists),
``BOUNDLOG_PROXY_HEADER`` (the one header those proxies set: ``x-forwarded-for``, the
default, or ``forwarded``) and ``BOUNDLOG_REDACT_QUERY`` (comma-separated names,
replacing the default list; empty turns redaction off); ``BOUNDLOG_METRICS=1`` (or
``prometheus``) keeps the counters in Prometheus too (``metrics=True``), and
``BOUNDLOG_METRICS=opentelemetry`` as OpenTelemetry instruments on the global
MeterProvider (``metrics="opentelemetry"``); ``BOUNDLOG_REPORT_LOSS=0`` turns off the
loss reports on stderr (``report_loss=False``).  A bad value, or a
``BOUNDLOG_*`` variable that is none of these (``BOUNDLOG_MAXQUEUE``; but
``BOUNDLOG_NO_EXTENSIONS``, which picks the core, is fine), stops gunicorn at startup
with an error naming the variable.  A subclass may override
:meth:`Logger.log_options`, e.g. to pass ``keep``, or a ``format`` object (see
:class:`~boundlog.Format`), which then replaces ``--access-logformat``.

For a format that reads a record's extras, the logger learns the route the
application left in the environ and whether the response completed: false when gunicorn
logs it with an exception on its way through (its workers log from a ``finally`` once
the response is done, so a write to a client that went away, or a body that raised, is
in flight then).  The bytes of the request body it cannot see (None); the WSGI
middleware counts them.

``--statsd-host`` (with ``--statsd-prefix`` and ``--dogstatsd-tags``) keeps gunicorn's
statsd metrics, which gunicorn itself sends only under its default logger class: with a
statsd host, gunicorn gets an instance of the logger class combined with its own
``gunicorn.instrument.statsd.Statsd``, whose methods send the request counter, duration
timer and status counters of every request (with or without an access log), the
log-level counters and the master's worker gauge, in gunicorn's format; a failed send is
a warning in the error log, as in gunicorn.  Without a statsd host the class is the
logger class itself, and its request path is unchanged.

The master builds the log, so each worker inherits it through ``fork`` and gets a writer
thread of its own (boundlog restarts its logs in a forked child).  A worker that exits
gracefully leaves through ``sys.exit``, whose exit handlers drain its log.  ``SIGUSR1``
reopens the file, as it does gunicorn's.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from datetime import timedelta
from time import time
from types import FrameType
from typing import Any, Protocol

from gunicorn.glogging import Logger as GunicornLogger  # type: ignore[import-untyped]

from . import _core
from ._errors import AccessLogError, ConfigurationError, report_on_stderr
from .capture._environ import compiled as _compiled_environ_record
from .capture._environ import environ_record
from .capture._extras import WsgiLearn, wsgi_learner
from .engine._environment import options_from_environment
from .engine._log import (
    AccessLog,
)
from .formats._apache import FORMATS
from .formats._templates import Template
from .record._record import Record
from .sinks._files import _is_fifo, names_a_path
from .wsgi import _STANDARD_STATUS_CODES, _parsed_status_code

# The logs the logger class opened in this process (gunicorn calls setup in its
# master).  The master only forks the workers that serve: each fork leaves its logs out
# of the queue capacity the metrics sum over processes (their gauges in
# prometheus_client's multiprocess mode), where a master's queue counted as one
# worker's more.  A worker starts with none (its copies restart and count as theirs),
# so a fork of its own changes nothing.
_logs_of_this_process: weakref.WeakSet[AccessLog] = weakref.WeakSet()


def _forked_a_worker() -> None:
    for log in list(_logs_of_this_process):
        log._serves_no_requests()


os.register_at_fork(after_in_parent=_forked_a_worker, after_in_child=_logs_of_this_process.clear)

# Whether this process said that BOUNDLOG_* settings came without --access-logfile.
_told_no_access_log = False


class _Response(Protocol):
    """What every gunicorn worker's ``resp`` offers: ``"200 OK"`` or 200, body bytes sent."""

    status: str | int | None
    sent: int | None


class _Elapsed(Protocol):
    """The ASGI worker's lighter stand-in for a ``datetime.timedelta``."""

    seconds: int
    microseconds: int


class Logger(GunicornLogger):  # type: ignore[misc]
    """gunicorn's logger, with the access log written by boundlog."""

    #: The log ``--access-logfile`` names; None when gunicorn's access log is off.
    boundlog: AccessLog | None = None
    #: What that log's format reads of a record's extras, learnt from the environ
    #: (see _extras); None for a log that reads none.
    _extras: WsgiLearn | None = None
    #: :meth:`access` in C for the usual request, with the C core (_compiled_access).
    _compiled_access: Callable[[Any, Any, Any, Any], bool] | None = None

    def __new__(cls, cfg: Any) -> Logger:
        """The logger gunicorn asks for, with its statsd metrics when ``--statsd-host`` is set.

        gunicorn picks its own ``Statsd`` logger for ``--statsd-host`` only in place of
        its default logger class, so a logger class has to bring the metrics itself:
        with a statsd host, the instance is of this class combined with gunicorn's
        ``Statsd`` (see :func:`_with_statsd`); without one, of this class, unchanged.
        """
        chosen = cls if getattr(cfg, "statsd_host", None) is None else _with_statsd(cls)
        instance: Logger = super().__new__(chosen)
        return instance

    def setup(self, cfg: Any) -> None:
        """Configure gunicorn's logging, then open (or, on reload, replace) the access log."""
        super().setup(cfg)
        if cfg.accesslog is None:
            replaced, self.boundlog = self.boundlog, None
            self._check_settings_without_a_log(cfg)
        else:
            _refuse_a_worker_that_never_calls_access(cfg)
            # gunicorn's setup opened a handler of its own on the file (creating it, and
            # giving it to the workers' user so that they can reopen it); boundlog
            # writes the lines instead.
            for handler in list(self.access_log.handlers):
                if getattr(handler, "_gunicorn", False):
                    self.access_log.removeHandler(handler)
                    handler.close()
            replaced, self.boundlog = self.boundlog, self._open(cfg)
        log = self.boundlog
        if log is not None:
            _logs_of_this_process.add(log)
        self._extras = (
            None
            if log is None
            else wsgi_learner(log.reads_extras, log.environ_names, log.record_budget.limit)
        )
        self._compiled_access = None if log is None else _compiled_access(log, self._extras)
        if replaced is not None:
            replaced.close()

    def _set_handler(self, log: Any, output: str | None, fmt: Any, stream: Any = None) -> None:
        # gunicorn would open a URL (--access-logfile syslog://...), a logger
        # (logging:gunicorn.access), stdout, stderr or otlp as a file of that name (an
        # empty file in the working directory, or a startup error where a directory has
        # that name), and its open of a FIFO nobody reads yet would block its startup
        # without a word; boundlog sends to each instead (and says so of a FIFO nobody
        # reads), so gunicorn only removes its previous handler.
        if (
            log is self.access_log
            and output is not None
            and (not names_a_path(output) or _is_fifo(output))
        ):
            output = None
        super()._set_handler(log, output, fmt, stream)

    def _check_settings_without_a_log(self, cfg: Any) -> None:
        # Without --access-logfile gunicorn writes no access log, and neither does
        # boundlog; BOUNDLOG_* settings then say a log was meant.  They are checked as
        # they would be with one (a misspelt one stops gunicorn, naming it), and the
        # missing option is said once a process (gunicorn calls setup again on HUP),
        # unless statsd is what the logger class is there for.
        global _told_no_access_log
        try:
            options = self.log_options(cfg)
        except AccessLogError as error:
            raise RuntimeError(f"boundlog: {error}") from error
        if options and not cfg.statsd_host and not _told_no_access_log:
            _told_no_access_log = True
            report_on_stderr(
                "BOUNDLOG_* settings are given, but no --access-logfile: gunicorn and "
                "boundlog write no access log; give --access-logfile PATH (- for stdout)"
            )

    def _open(self, cfg: Any) -> AccessLog:
        try:
            options = self.log_options(cfg)
            # A format object from a subclass (see log_options) has no name gunicorn's
            # command line could give.  A template is built here, so it takes the log's
            # time zone here: AccessLog keeps a format object's own options.
            log_format = options.pop("format", None) or _format_for(
                cfg.access_log_format, utc=options.get("utc", False)
            )
            return AccessLog(cfg.accesslog, log_format, **options)
        except AccessLogError as error:
            # gunicorn prints a RuntimeError from its startup as one line and exits.
            raise RuntimeError(f"boundlog: {error}") from error

    def log_options(self, cfg: Any) -> dict[str, Any]:
        """The AccessLog options besides sink and format: from the environment by default.

        Each variable is checked by its option's rule, and an error names the variable;
        a ``BOUNDLOG_*`` variable that is no setting (a misspelt one) is an error too.
        """
        return options_from_environment({**os.environ, **cfg.env}, gunicorn=True)

    def access(
        self,
        resp: _Response,
        req: Any,
        environ: Mapping[str, Any],
        request_time: timedelta | _Elapsed,
    ) -> None:
        """Hand the finished request to boundlog (to gunicorn's access log when it has none)."""
        # The C core does it all for the usual request; _log_by_reference is its
        # reference, and runs for every request it leaves (csrc/paths/gunicorn_access.c).
        compiled = self._compiled_access
        if compiled is not None and compiled(resp, req, environ, request_time):
            return
        if self.boundlog is None:
            super().access(resp, req, environ, request_time)
        else:
            self._log_by_reference(resp, req, environ, request_time)

    def _log_by_reference(
        self,
        resp: _Response,
        req: Any,
        environ: Mapping[str, Any],
        request_time: timedelta | _Elapsed,
    ) -> int | None:
        """Hand a request the C access left to boundlog; return the status logged in
        place of the response's (500 for an application that failed before anything
        was sent), or _LOGGED_ALREADY for gunicorn's second call for such a request,
        left out."""
        status = self._status_after_a_failure(resp, req)
        if status != _LOGGED_ALREADY:
            self._hand_over(resp, req, environ, request_time, status)
        return status

    def _status_after_a_failure(self, resp: _Response, req: Any) -> int | None:
        """500 for a request whose application failed before anything was sent;
        _LOGGED_ALREADY for gunicorn's second call for it; None for any other request.

        gunicorn logs such a request twice (its own logger writes two lines): from
        handle_request's ``finally``, with the status the application gave, and then
        from handle_error, with the error page it sends instead (500).  One line, with
        what the client got: the first call logs 500 and the second is left out.  Which
        call is which comes from the worker's frame (handle_error also logs requests
        that failed before handle_request's ``finally``, e.g. a forbidden scheme header,
        once, with their own status); runs only with an exception on its way through.
        """
        failure = sys.exception()
        if failure is None:
            return None
        if _worker_function() == "handle_error":
            if getattr(_failed, "req", None) is req:
                _failed.req = None
                return _LOGGED_ALREADY
            return None
        if isinstance(failure, OSError) or getattr(resp, "headers_sent", True):
            # A client that went away (gunicorn sends nothing more), or a response
            # already under way: gunicorn closes the connection, and logs once.
            return None
        _failed.req = req
        return 500

    def _hand_over(
        self,
        resp: _Response,
        req: Any,
        environ: Mapping[str, Any],
        request_time: timedelta | _Elapsed,
        answered: int | None,
    ) -> None:
        """Make the request's record and hand it to the log (the reference of the C
        access); ``answered`` in place of the response's status when not None."""
        log = self.boundlog
        assert log is not None
        # Runs in the request's thread once per request: no formatting, no I/O, no lock.
        # gunicorn's sync, gthread and async workers measure the request by the wall
        # clock, and a timedelta keeps its sign in ``days``, which ``seconds`` leaves
        # out: a clock step back during the request would read as a day minus the step.
        if type(request_time) is timedelta:
            duration = request_time.total_seconds()
            if duration < 0.0:
                duration = 0.0
        else:
            # The ASGI worker's stand-in, measured by the monotonic clock.
            duration = request_time.seconds + request_time.microseconds / 1_000_000
        status = resp.status if answered is None else answered
        if isinstance(status, str):
            status = _STANDARD_STATUS_CODES.get(status) or _parsed_status_code(status)
        elif status is None:
            # The application raised before start_response; gunicorn answers 500.
            status = 500
        # Built from the environ, as gunicorn's own atoms are: every worker class passes
        # one.  The request's headers are gunicorn's own pairs, which its atoms read
        # (the environ of a request that failed has no HTTP_ variables); some workers
        # pass the pairs in place of the request.
        received = time() - duration
        sent = resp.sent or 0
        request_headers = getattr(req, "headers", req)
        response_headers = getattr(resp, "headers", ()) if log.reads_response_headers else ()
        budget = log.record_budget
        # gunicorn logs once the response is sent: the application's environ holds what
        # it left there (the route, see _routes).
        learn = self._extras
        # Every worker logs from a ``finally`` (or, for an error page, an ``except``)
        # once the response is done: an exception on its way through then (a write to a
        # client that went away, the body raising, the application failing) means the
        # response did not complete.
        # gunicorn logs once the response is over: no span is current any more.
        extras = None if learn is None else learn(environ, sys.exception() is None, None)
        record = None if _compiled_environ_record is None else _compiled_environ_record(
            Record, environ, received, duration, status, sent, request_headers,
            response_headers, budget.bounded, budget.limit, None, extras,
        )  # fmt: skip
        if record is None:
            record = environ_record(
                environ, received, duration, status, sent, request_headers,
                response_headers, budget.bounded, None, extras,
            )  # fmt: skip
        # The lock-free offer first: submit applies the policy when the queue is full.
        if not log._offer(record):
            log.submit(record)

    def reopen_files(self) -> None:
        """Reopen gunicorn's files, then boundlog's (on ``SIGUSR1``)."""
        super().reopen_files()
        log = self.boundlog
        if log is not None:
            # A worker calls this from its SIGUSR1 handler, which may have interrupted
            # this very thread inside one of the log's locks: only ask, never wait.
            log.request_reopen()


def _refuse_a_worker_that_never_calls_access(cfg: Any) -> None:
    """Stop gunicorn at startup, saying what to do, under uvicorn's worker class.

    uvicorn's worker (``-k uvicorn.workers.UvicornWorker``, or uvicorn-worker's) logs
    through uvicorn and never calls the logger class's ``access``: it copies the
    handlers of gunicorn's access logger onto ``uvicorn.access``, and boundlog's logger
    class leaves it none.  The access log would stay empty, without a word.
    """
    try:
        worker = cfg.worker_class
    except Exception:  # gunicorn says itself what is wrong with its worker class
        return
    if any(type(base.__module__) is str and base.__module__.split(".")[0] in _UVICORN
           for base in getattr(worker, "__mro__", ())):  # fmt: skip
        raise RuntimeError(
            f"boundlog: gunicorn's worker class {cfg.worker_class_str} serves requests "
            "through uvicorn, which never calls the logger class: no access line would be "
            "written; drop --logger-class and wrap the application in "
            'boundlog.asgi.AccessLogMiddleware (docs/gunicorn.md, "uvicorn\'s worker"), '
            "or serve it with gunicorn's own -k asgi worker"
        )


# The packages of uvicorn's gunicorn worker classes.
_UVICORN = ("uvicorn", "uvicorn_worker")
# What Logger._status_after_a_failure says of gunicorn's second call for a request.
_LOGGED_ALREADY = -1
# In each of gunicorn's threads, the request whose failure it logged and whose second
# call (from handle_error) has yet to come.
_failed = threading.local()
_WORKERS = os.path.join("gunicorn", "workers", "")


def _worker_function() -> str:
    """The name of the gunicorn worker's function that called the logger's access (past
    the logger classes' own access methods, a subclass's included)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and _WORKERS not in frame.f_code.co_filename:
        frame = frame.f_back
    return "" if frame is None else frame.f_code.co_name


def _compiled_access(log: AccessLog, learn: WsgiLearn | None) -> Any:
    """Logger.access in C for ``log`` (its record made as Logger.access makes it, with
    ``learn`` for the extras), or None without the C core."""
    if _core.gunicorn_access is None:
        return None
    budget = log.record_budget
    return _core.gunicorn_access(
        offer=log._offer,
        submit=log.submit,
        bound=budget.bounded,
        limit=budget.limit,
        learn=learn,
        reads_response_headers=log.reads_response_headers,
        record_type=Record,
        status_codes=_STANDARD_STATUS_CODES,
        wall_clock=time,
    )


class _StatsdAccess(Logger):
    """The access method of a logger class combined with gunicorn's ``Statsd`` logger.

    Only :func:`_with_statsd` uses it, as the first base of a class whose next bases
    are the logger class and ``Statsd``, in that order.  Everything else comes from
    ``Statsd``: its socket, ``--statsd-prefix`` and ``--dogstatsd-tags`` (``__init__``),
    the datagrams, the counters of warnings, errors, exceptions and critical messages,
    and the metrics the master logs (the worker gauge, ``gunicorn.workers``).
    """

    #: The method gunicorn's Statsd.access sends the request's duration with, as
    #: ``name:milliseconds|ms``: ``timer`` since gunicorn 24, ``histogram`` before
    #: (whose ``histogram`` has sent ``|h`` since).  Set by _with_statsd.
    _send_duration: Callable[[str, float], None]

    def access(
        self,
        resp: _Response,
        req: Any,
        environ: Mapping[str, Any],
        request_time: timedelta | _Elapsed,
    ) -> None:
        """Log the request, then send the metrics gunicorn's Statsd logger sends for it."""
        if self.boundlog is None:
            # Logger.access hands the request to gunicorn's access method, Statsd's
            # here, which sends the metrics (access log or not, as gunicorn does).
            super().access(resp, req, environ, request_time)
            return
        # A request whose application failed is one request in the metrics too, with
        # the 500 gunicorn answered.
        compiled = self._compiled_access
        if compiled is not None and compiled(resp, req, environ, request_time):
            status = None
        else:
            status = self._log_by_reference(resp, req, environ, request_time)
            if status == _LOGGED_ALREADY:
                return
        # boundlog has the request; send what Statsd.access sends besides its line.
        # Three datagrams, as gunicorn's own logger sends them; _sock_send keeps a
        # failure to send out of the request (it logs a warning, as gunicorn does).
        duration = request_time.seconds * 1000 + float(request_time.microseconds) / 10**3
        self._send_duration("gunicorn.request.duration", duration)
        self.increment("gunicorn.requests", 1)
        self.increment(f"gunicorn.request.status.{status or _status_code(resp.status)}", 1)


# Each logger class combined with gunicorn's Statsd, made once per class.
_STATSD_CLASSES: dict[type[Logger], type[Logger]] = {}


def _with_statsd(cls: type[Logger]) -> type[Logger]:
    """``cls`` combined with gunicorn's ``Statsd`` logger: ``cls`` itself if it is one.

    The combined class's bases are :class:`_StatsdAccess`, ``cls`` and ``Statsd``: the
    lines still go through boundlog (and a subclass's overrides still apply), and
    gunicorn's own Statsd methods send the metrics, in the format of the gunicorn
    installed.
    """
    from gunicorn.instrument.statsd import Statsd  # type: ignore[import-untyped]

    if issubclass(cls, Statsd):
        return cls
    combined = _STATSD_CLASSES.get(cls)
    if combined is None:
        namespace = {
            "__module__": cls.__module__,
            "__qualname__": f"{cls.__qualname__}WithStatsd",
            "__doc__": f"{cls.__qualname__}, sending gunicorn's statsd metrics too.",
            "_send_duration": getattr(Statsd, "timer", Statsd.histogram),
        }
        combined = type(f"{cls.__name__}WithStatsd", (_StatsdAccess, cls, Statsd), namespace)
        _STATSD_CLASSES[cls] = combined
    return combined


def _status_code(status: str | bytes | int | None) -> int:
    """The code of a response's status as the metrics name it (the status boundlog logs)."""
    if isinstance(status, bytes):
        status = status.decode("latin-1")
    if isinstance(status, str):
        return _STANDARD_STATUS_CODES.get(status) or _parsed_status_code(status)
    # None: the application raised before start_response, and gunicorn answered 500.
    return 500 if status is None else status


def _format_for(template: str, *, utc: bool) -> str | Template:
    """The boundlog format an ``--access-logformat`` value asks for, or a ConfigurationError."""
    if template in FORMATS:
        return template
    if "%" not in template:
        raise ConfigurationError(
            f"--access-logformat {template!r} is neither a format name ({', '.join(FORMATS)}) "
            "nor a template of gunicorn atoms such as '%(h)s \"%(r)s\" %(s)s %(D)s'"
        )
    try:
        return Template(template, utc=utc)
    except ConfigurationError as error:
        raise ConfigurationError(f"--access-logformat: {error}") from None
