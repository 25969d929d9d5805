"""gunicorn: ``--logger-class boundlog.gunicorn.Logger`` writes the access log through boundlog.

The logger keeps everything gunicorn's own logger does (error log, syslog, logging
configuration) and takes over one thing: the access log named by ``--access-logfile``
(``-`` is stdout).  Each request becomes a :class:`~boundlog.Record` handed to an
:class:`~boundlog.AccessLog`, whose writer thread formats and writes lines in batches.
Without ``--access-logfile`` the logger behaves exactly as gunicorn's.

``--access-logformat`` chooses the format: the names ``combined``, ``common`` and
``json`` choose those formats.  Any other value, gunicorn's default included (so that
its ``%(u)s`` shows the Basic-auth user as gunicorn's does, where ``combined`` writes
``-``), is compiled as a :class:`~boundlog.Template` of gunicorn's atoms, ``%(h)s``,
``%({x-request-id}i)s`` and the rest, with gunicorn's meanings; unlike gunicorn,
boundlog escapes what the client sent, and writes ``%(b)s`` as ``-`` for an empty body,
as Apache does.  An atom boundlog does not know (or ``{name}e``) stops gunicorn at
startup with an error naming it.

The queue and policy come from the environment (or gunicorn's ``--env``/``raw_env``):
``BOUNDLOG_POLICY`` (``drop`` or ``wait``), ``BOUNDLOG_MAX_QUEUE``, ``BOUNDLOG_BATCH_SIZE``,
``BOUNDLOG_MAX_RECORD_BYTES`` and ``BOUNDLOG_FLUSH_INTERVAL``; what is logged from
``BOUNDLOG_SKIP_PATHS`` and ``BOUNDLOG_TRUSTED_PROXIES`` (comma-separated lists),
``BOUNDLOG_PROXY_HEADER`` (the one header those proxies set: ``x-forwarded-for``, the
default, or ``forwarded``) and ``BOUNDLOG_REDACT_QUERY`` (comma-separated names,
replacing the default list; empty turns redaction off); ``BOUNDLOG_METRICS=1`` keeps
the counters in Prometheus too (``metrics=True``), and ``BOUNDLOG_REPORT_LOSS=0`` turns
off the loss reports on stderr (``report_loss=False``).  A bad value, or a
``BOUNDLOG_*`` variable that is none of these (``BOUNDLOG_MAXQUEUE``; but
``BOUNDLOG_NO_EXTENSIONS``, which picks the core, is fine), stops gunicorn at startup
with an error naming the variable.  A subclass may override
:meth:`Logger.log_options`, e.g. to pass ``keep``, or a ``format`` object (see
:class:`~boundlog.Format`), which then replaces ``--access-logformat``.

The master builds the log, so each worker inherits it through ``fork`` and gets a writer
thread of its own (boundlog restarts its logs in a forked child).  A worker that exits
gracefully leaves through ``sys.exit``, whose exit handlers drain its log.  ``SIGUSR1``
reopens the file, as it does gunicorn's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from time import time
from typing import Any, Protocol

from gunicorn.glogging import Logger as GunicornLogger  # type: ignore[import-untyped]

from ._budget import DEFAULT_MAX_RECORD_BYTES, MIN_RECORD_BYTES
from ._core import NO_EXTENSIONS_VARIABLE
from ._environ import compiled as _compiled_environ_record
from ._environ import environ_record
from ._errors import AccessLogError, ConfigurationError
from ._filters import make_select
from ._formats import FORMATS
from ._log import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_MAX_QUEUE,
    MAX_FLUSH_INTERVAL,
    AccessLog,
)
from ._options import (
    check_variable_names,
    list_in_environment,
    number_in_environment,
    one_of,
    seconds,
    switch_in_environment,
    whole_number,
)
from ._queue import POLICIES
from ._record import Record
from ._templates import Template
from ._urls import looks_like_url
from .wsgi import _STANDARD_STATUS_CODES, _parsed_status_code

POLICY_VARIABLE = "BOUNDLOG_POLICY"
MAX_QUEUE_VARIABLE = "BOUNDLOG_MAX_QUEUE"
BATCH_SIZE_VARIABLE = "BOUNDLOG_BATCH_SIZE"
MAX_RECORD_BYTES_VARIABLE = "BOUNDLOG_MAX_RECORD_BYTES"
FLUSH_INTERVAL_VARIABLE = "BOUNDLOG_FLUSH_INTERVAL"
SKIP_PATHS_VARIABLE = "BOUNDLOG_SKIP_PATHS"
TRUSTED_PROXIES_VARIABLE = "BOUNDLOG_TRUSTED_PROXIES"
PROXY_HEADER_VARIABLE = "BOUNDLOG_PROXY_HEADER"
REDACT_QUERY_VARIABLE = "BOUNDLOG_REDACT_QUERY"
METRICS_VARIABLE = "BOUNDLOG_METRICS"
REPORT_LOSS_VARIABLE = "BOUNDLOG_REPORT_LOSS"


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

    def setup(self, cfg: Any) -> None:
        """Configure gunicorn's logging, then open (or, on reload, replace) the access log."""
        super().setup(cfg)
        if cfg.accesslog is None:
            replaced, self.boundlog = self.boundlog, None
        else:
            # gunicorn's setup opened a handler of its own on the file (creating it, and
            # giving it to the workers' user so that they can reopen it); boundlog
            # writes the lines instead.
            for handler in list(self.access_log.handlers):
                if getattr(handler, "_gunicorn", False):
                    self.access_log.removeHandler(handler)
                    handler.close()
            replaced, self.boundlog = self.boundlog, self._open(cfg)
        if replaced is not None:
            replaced.close()

    def _set_handler(self, log: Any, output: str | None, fmt: Any, stream: Any = None) -> None:
        # gunicorn would open a URL (--access-logfile syslog://...) as a file; boundlog
        # sends to it instead, so gunicorn only removes its previous handler.
        if log is self.access_log and output is not None and looks_like_url(output):
            output = None
        super()._set_handler(log, output, fmt, stream)

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
        environment = {**os.environ, **cfg.env}
        check_variable_names(
            environment, prefix="BOUNDLOG_", known=_VARIABLES, others=_NOT_SETTINGS
        )
        options: dict[str, Any] = {}
        for variable, (option, read) in _VARIABLES.items():
            if variable in environment:
                options[option] = read(variable, environment[variable])
        return options

    def access(
        self,
        resp: _Response,
        req: Any,
        environ: Mapping[str, Any],
        request_time: timedelta | _Elapsed,
    ) -> None:
        """Hand the finished request to boundlog (to gunicorn's access log when it has none)."""
        log = self.boundlog
        if log is None:
            super().access(resp, req, environ, request_time)
            return
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
        status = resp.status
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
        record = None if _compiled_environ_record is None else _compiled_environ_record(
            Record, environ, received, duration, status, sent, request_headers,
            response_headers, budget.bounded, budget.limit, None,
        )  # fmt: skip
        if record is None:
            record = environ_record(
                environ, received, duration, status, sent, request_headers,
                response_headers, budget.bounded,
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


def _policy(variable: str, text: str) -> str:
    return one_of(variable, text, POLICIES)


def _whole_number(example: int, minimum: int = 1) -> Callable[[str, str], int]:
    def read(variable: str, text: str) -> int:
        number = number_in_environment(variable, text, int, example=example)
        return whole_number(variable, number, example=example, minimum=minimum)

    return read


def _flush_interval(variable: str, text: str) -> float:
    example = DEFAULT_FLUSH_INTERVAL
    number = number_in_environment(variable, text, float, example=example)
    return seconds(variable, number, example=example, maximum=MAX_FLUSH_INTERVAL)


def _selection(option: str, example: str) -> tuple[str, Callable[[str, str], Any]]:
    """One of make_select's options, and how to read it; its errors name the variable."""

    def read(variable: str, text: str) -> Any:
        value: Any = text if option == "proxy_header" else list_in_environment(text)
        try:
            make_select(**{option: value})
        except ConfigurationError as error:
            raise ConfigurationError(
                f"{variable}={text!r}: {error} (in the environment: {variable}={example})"
            ) from None
        return value

    return option, read


# Each variable, the option it sets, and how its text is read and checked.
_VARIABLES: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    POLICY_VARIABLE: ("policy", _policy),
    MAX_QUEUE_VARIABLE: ("max_queue", _whole_number(DEFAULT_MAX_QUEUE)),
    BATCH_SIZE_VARIABLE: ("batch_size", _whole_number(DEFAULT_BATCH_SIZE)),
    MAX_RECORD_BYTES_VARIABLE: (
        "max_record_bytes",
        _whole_number(DEFAULT_MAX_RECORD_BYTES, minimum=MIN_RECORD_BYTES),
    ),
    FLUSH_INTERVAL_VARIABLE: ("flush_interval", _flush_interval),
    SKIP_PATHS_VARIABLE: _selection("skip_paths", "/healthz,/static/*"),
    TRUSTED_PROXIES_VARIABLE: _selection("trusted_proxies", "127.0.0.1,10.0.0.0/8"),
    PROXY_HEADER_VARIABLE: _selection("proxy_header", "forwarded"),
    REDACT_QUERY_VARIABLE: _selection("redact_query", "token,password"),
    METRICS_VARIABLE: ("metrics", switch_in_environment),
    REPORT_LOSS_VARIABLE: ("report_loss", switch_in_environment),
}
# The BOUNDLOG_* variables that are not settings: `boundlog bench` hands its gunicorn
# servers their logger through these, and BOUNDLOG_NO_EXTENSIONS picks the core (_core).
_NOT_SETTINGS = ("BOUNDLOG_BENCH_", NO_EXTENSIONS_VARIABLE)
