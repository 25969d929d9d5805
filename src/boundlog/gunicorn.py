"""gunicorn: ``--logger-class boundlog.gunicorn.Logger`` writes the access log through boundlog.

The logger keeps everything gunicorn's own logger does (error log, syslog, logging
configuration) and takes over one thing: the access log named by ``--access-logfile``
(``-`` is stdout).  Each request becomes a :class:`~boundlog.Record` handed to an
:class:`~boundlog.AccessLog`, whose writer thread formats and writes lines in batches.
Without ``--access-logfile`` the logger behaves exactly as gunicorn's.

``--access-logformat`` chooses the format: gunicorn's default (the Apache combined
format) writes boundlog's ``combined``, and the names ``combined``, ``common`` and
``json`` choose those formats.  Any other value is compiled as a
:class:`~boundlog.Template` of gunicorn's atoms, ``%(h)s``, ``%({x-request-id}i)s`` and the
rest, with gunicorn's meanings; unlike gunicorn, boundlog escapes what the client sent,
and writes ``%(b)s`` as ``-`` for an empty body, as Apache does.  An atom boundlog does
not know (or ``{name}e``) stops gunicorn at startup with an error naming it.

The queue and policy come from the environment (or gunicorn's ``--env``/``raw_env``):
``BOUNDLOG_POLICY`` (``drop`` or ``wait``), ``BOUNDLOG_MAX_QUEUE``, ``BOUNDLOG_BATCH_SIZE``,
``BOUNDLOG_MAX_RECORD_BYTES`` and ``BOUNDLOG_FLUSH_INTERVAL``; what is logged from
``BOUNDLOG_SKIP_PATHS`` and ``BOUNDLOG_TRUSTED_PROXIES`` (comma-separated lists),
``BOUNDLOG_PROXY_HEADER`` (the one header those proxies set: ``x-forwarded-for``, the
default, or ``forwarded``) and ``BOUNDLOG_REDACT_QUERY`` (comma-separated names,
replacing the default list; empty turns redaction off).  A subclass may override :meth:`Logger.log_options`, e.g. to pass
``keep``.

The master builds the log, so each worker inherits it through ``fork`` and gets a writer
thread of its own (boundlog restarts its logs in a forked child).  A worker that exits
gracefully leaves through ``sys.exit``, whose exit handlers drain its log.  ``SIGUSR1``
reopens the file, as it does gunicorn's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from time import time
from typing import Any, Protocol

from gunicorn.config import AccessLogFormat  # type: ignore[import-untyped]
from gunicorn.glogging import Logger as GunicornLogger  # type: ignore[import-untyped]

from ._errors import AccessLogError, ConfigurationError
from ._formats import FORMATS
from ._log import AccessLog
from ._record import Record
from ._templates import Template
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

# gunicorn's default --access-logformat: the Apache combined format.
_GUNICORN_DEFAULT: str = AccessLogFormat.default


class _Response(Protocol):
    """What every gunicorn worker's ``resp`` offers: ``"200 OK"`` or 200, body bytes sent."""

    status: str | int | None
    sent: int | None


class _Elapsed(Protocol):
    """A ``datetime.timedelta``, or the ASGI worker's lighter stand-in for one."""

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

    def _open(self, cfg: Any) -> AccessLog:
        try:
            options = self.log_options(cfg)
            # A template is built here, so it takes the log's time zone here: AccessLog
            # keeps a format object's own options.
            log_format = _format_for(cfg.access_log_format, utc=options.get("utc", False))
            return AccessLog(cfg.accesslog, log_format, **options)
        except AccessLogError as error:
            # gunicorn prints a RuntimeError from its startup as one line and exits.
            raise RuntimeError(f"boundlog: {error}") from error

    def log_options(self, cfg: Any) -> dict[str, Any]:
        """The AccessLog options besides sink and format: from the environment by default."""
        environment = {**os.environ, **cfg.env}
        options: dict[str, Any] = {}
        for variable, option in (
            (POLICY_VARIABLE, "policy"),
            (PROXY_HEADER_VARIABLE, "proxy_header"),
        ):
            if variable in environment:
                options[option] = environment[variable]
        for variable, option, kind in (
            (MAX_QUEUE_VARIABLE, "max_queue", int),
            (BATCH_SIZE_VARIABLE, "batch_size", int),
            (MAX_RECORD_BYTES_VARIABLE, "max_record_bytes", int),
            (FLUSH_INTERVAL_VARIABLE, "flush_interval", float),
        ):
            if variable in environment:
                options[option] = _number(variable, environment[variable], kind)
        for variable, option in (
            (SKIP_PATHS_VARIABLE, "skip_paths"),
            (TRUSTED_PROXIES_VARIABLE, "trusted_proxies"),
            (REDACT_QUERY_VARIABLE, "redact_query"),
        ):
            if variable in environment:
                options[option] = _list(environment[variable])
        return options

    def access(
        self, resp: _Response, req: Any, environ: Mapping[str, Any], request_time: _Elapsed
    ) -> None:
        """Hand the finished request to boundlog (to gunicorn's access log when it has none)."""
        log = self.boundlog
        if log is None:
            super().access(resp, req, environ, request_time)
            return
        # Runs in the request's thread once per request: no formatting, no I/O, no lock.
        # Built from the environ, as gunicorn's own atoms are: every worker class passes
        # one.  Built here rather than in a function of its own, which cost 8% more
        # (callgrind: 11.1k instructions a request against 10.2k).
        duration = request_time.seconds + request_time.microseconds / 1_000_000
        status = resp.status
        if isinstance(status, str):
            status = _STANDARD_STATUS_CODES.get(status) or _parsed_status_code(status)
        elif status is None:
            # The application raised before start_response; gunicorn answers 500.
            status = 500
        # RAW_URI is the request target as the client sent it (PATH_INFO is decoded).
        target = environ.get("RAW_URI")
        if target is None:
            path, query = environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")
        else:
            path, _, query = target.partition("?")
        path, query = path.encode("latin-1"), query.encode("latin-1")
        # What the client sent, cut down if it is over the log's budget (see _budget).
        path, query, headers = log.record_budget.bounded(path, query, getattr(req, "headers", req))
        # A plain tuple in Record's field order (the NamedTuple constructor is a Python
        # call).  WSGI strings are the bytes on the wire decoded as latin-1.  The
        # request's headers are gunicorn's own pairs, which its atoms read (the environ
        # of a request that failed has no HTTP_ variables); some workers pass the pairs
        # in place of the request.
        record: Record = (  # type: ignore[assignment]
            time() - duration, duration, environ.get("REMOTE_ADDR") or None,
            environ.get("REQUEST_METHOD", "-"), path, query,
            environ.get("SERVER_PROTOCOL", "HTTP/1.0"), status, resp.sent or 0, headers,
            getattr(resp, "headers", ()) if log.reads_response_headers else (),
        )  # fmt: skip
        # The lock-free offer first: submit applies the policy when the queue is full.
        if not log.offer(record):
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
    if template == _GUNICORN_DEFAULT:
        return "combined"
    if "%" not in template:
        raise ConfigurationError(
            f"--access-logformat {template!r} is neither a format name ({', '.join(FORMATS)}) "
            "nor a template of gunicorn atoms such as '%(h)s \"%(r)s\" %(s)s %(D)s'"
        )
    try:
        return Template(template, utc=utc)
    except ConfigurationError as error:
        raise ConfigurationError(f"--access-logformat: {error}") from None


def _number(variable: str, text: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(text)
    except ValueError:
        raise ConfigurationError(
            f"{variable}={text!r} is not a number ({kind.__name__} expected)"
        ) from None


def _list(text: str) -> list[str]:
    return [entry.strip() for entry in text.split(",") if entry.strip()]
