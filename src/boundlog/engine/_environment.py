"""Options from ``BOUNDLOG_*`` variables, the same for every integration.

gunicorn's logger class has no keyword arguments to take options from, and a deployed
ASGI or WSGI app is configured by its environment more often than by its code: so both
read the same variables, each checked by its option's rule, and an error names the
variable and gives an example.  A ``BOUNDLOG_*`` variable that is no setting is an
error too, with the closest setting suggested: a misspelt setting silently ignored is
a setting silently not applied.

A middleware that builds its own log (no ``log=`` given) takes the options its code
passes, and for every other option the variable's value when it is set: the code wins.
The sink and the format come from ``BOUNDLOG_SINK`` and ``BOUNDLOG_FORMAT`` there;
under gunicorn's logger class ``--access-logfile`` and ``--access-logformat`` name them,
so there those two variables are refused rather than silently ignored.

``BOUNDLOG_REQUEST_ID`` is the ASGI and WSGI middlewares' ``request_id`` option, which is
no option of the log: it changes what the server answers, which gunicorn's logger class
and the aiohttp and http.server integrations cannot do, so there it is refused too.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from .._core import NO_EXTENSIONS_VARIABLE
from .._errors import ConfigurationError, SinkError
from .._options import (
    check_variable_names,
    list_in_environment,
    number_in_environment,
    one_of,
    seconds,
    switch_in_environment,
    whole_number,
)
from ..capture._request_id import DEFAULT_HEADER, RequestIds, request_id_header
from ..formats._apache import make_format
from ..record._budget import (
    DEFAULT_MAX_QUEUE_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
    MIN_QUEUE_BYTES,
    MIN_RECORD_BYTES,
)
from ..selection._filters import make_select
from ..sinks._logging import SCHEME as LOGGING_SCHEME
from ..sinks._logging import parse_spec
from ..sinks._urls import looks_like_url, parse_url
from ._admission import POLICIES
from ._log import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_MAX_QUEUE,
    MAX_FLUSH_INTERVAL,
    AccessLog,
)

SINK_VARIABLE = "BOUNDLOG_SINK"
FORMAT_VARIABLE = "BOUNDLOG_FORMAT"

POLICY_VARIABLE = "BOUNDLOG_POLICY"
MAX_QUEUE_VARIABLE = "BOUNDLOG_MAX_QUEUE"
BATCH_SIZE_VARIABLE = "BOUNDLOG_BATCH_SIZE"
MAX_RECORD_BYTES_VARIABLE = "BOUNDLOG_MAX_RECORD_BYTES"
MAX_QUEUE_BYTES_VARIABLE = "BOUNDLOG_MAX_QUEUE_BYTES"
FLUSH_INTERVAL_VARIABLE = "BOUNDLOG_FLUSH_INTERVAL"
SKIP_PATHS_VARIABLE = "BOUNDLOG_SKIP_PATHS"
TRUSTED_PROXIES_VARIABLE = "BOUNDLOG_TRUSTED_PROXIES"
PROXY_HEADER_VARIABLE = "BOUNDLOG_PROXY_HEADER"
REDACT_QUERY_VARIABLE = "BOUNDLOG_REDACT_QUERY"
METRICS_VARIABLE = "BOUNDLOG_METRICS"
REPORT_LOSS_VARIABLE = "BOUNDLOG_REPORT_LOSS"
WEBSOCKETS_VARIABLE = "BOUNDLOG_WEBSOCKETS"
REQUEST_ID_VARIABLE = "BOUNDLOG_REQUEST_ID"


def _metrics(variable: str, text: str) -> bool | str:
    """On or off as any switch, or which metrics: ``prometheus``, ``opentelemetry``."""
    spelt = text.strip().lower()
    if spelt in ("prometheus", "opentelemetry"):
        return spelt
    try:
        return switch_in_environment(variable, text)
    except ConfigurationError:
        raise ConfigurationError(
            f"{variable}={text!r} is none of the metrics: {variable}=1 or {variable}=prometheus "
            f"for Prometheus, {variable}=opentelemetry for OpenTelemetry, {variable}=0 for none"
        ) from None


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
    # What the queued records keep of client and application bytes, in total: a full
    # queue holds at most max_queue * 1 KiB + max_queue_bytes (_queue, _budget).
    MAX_QUEUE_BYTES_VARIABLE: (
        "max_queue_bytes",
        _whole_number(DEFAULT_MAX_QUEUE_BYTES, minimum=MIN_QUEUE_BYTES),
    ),
    FLUSH_INTERVAL_VARIABLE: ("flush_interval", _flush_interval),
    SKIP_PATHS_VARIABLE: _selection("skip_paths", "/healthz,/static/*"),
    TRUSTED_PROXIES_VARIABLE: _selection("trusted_proxies", "127.0.0.1,10.0.0.0/8"),
    PROXY_HEADER_VARIABLE: _selection("proxy_header", "forwarded"),
    REDACT_QUERY_VARIABLE: _selection("redact_query", "token,password"),
    METRICS_VARIABLE: ("metrics", _metrics),
    REPORT_LOSS_VARIABLE: ("report_loss", switch_in_environment),
    WEBSOCKETS_VARIABLE: ("websockets", switch_in_environment),
}
# The BOUNDLOG_* variables that are not settings: `boundlog bench` hands its gunicorn
# servers their logger through these, BOUNDLOG_NO_EXTENSIONS picks the core (_core),
# BOUNDLOG_CFLAGS builds it (setup.py), and .ci/ keeps its cache in BOUNDLOG_CI_CACHE.
_NOT_SETTINGS = ("BOUNDLOG_BENCH_", "BOUNDLOG_CFLAGS", "BOUNDLOG_CI_", NO_EXTENSIONS_VARIABLE)


def _sink(variable: str, text: str) -> str:
    if not text.strip():
        raise ConfigurationError(
            f"{variable} is empty: name the sink, e.g. {variable}=/var/log/app/access.log "
            f"or {variable}=stdout"
        )
    spec = text.strip()
    # Parse what can be parsed without opening anything, so that the error names the
    # variable; opening the file is left to the log (log_for_middleware names it then).
    try:
        if spec.startswith(LOGGING_SCHEME):
            parse_spec(spec)
        elif looks_like_url(spec) or spec.startswith("://"):
            parse_url(spec)
    except ConfigurationError as error:
        raise ConfigurationError(f"{variable}={text!r}: {error}") from None
    return spec


# tcp:/host:514 is a file path to the letter; an error opening it says what was meant.
_HALF_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/?[^/]")


def _format(variable: str, text: str) -> str:
    try:
        make_format(text, utc=False)
    except ConfigurationError as error:
        raise ConfigurationError(f"{variable}={text!r}: {error}") from None
    return text


# The middlewares' own: under gunicorn, its command line names the sink and the format.
_MIDDLEWARE_VARIABLES: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    SINK_VARIABLE: ("sink", _sink),
    FORMAT_VARIABLE: ("format", _format),
}


def options_from_environment(
    environment: Mapping[str, str], *, gunicorn: bool = False, request_ids: bool = False
) -> dict[str, Any]:
    """The AccessLog options the ``BOUNDLOG_*`` variables of ``environment`` set.

    Each variable is checked by its option's rule, and an error names the variable; a
    ``BOUNDLOG_*`` variable that is no setting (a misspelt one) is an error too, and so
    are ``BOUNDLOG_SINK`` and ``BOUNDLOG_FORMAT`` for gunicorn's logger class, and
    ``BOUNDLOG_REQUEST_ID`` for an integration that gives no ``request_ids``.
    """
    variables = _VARIABLES if gunicorn else {**_MIDDLEWARE_VARIABLES, **_VARIABLES}
    if gunicorn:
        named = sorted(name for name in _MIDDLEWARE_VARIABLES if name in environment)
        if named:
            raise ConfigurationError(
                f"{named[0]} is not read under gunicorn's logger class: --access-logfile "
                f"names the sink and --access-logformat the format; remove {named[0]}"
            )
    if REQUEST_ID_VARIABLE in environment and not request_ids:
        where = "under gunicorn's logger class" if gunicorn else "by this integration"
        raise ConfigurationError(
            f"{REQUEST_ID_VARIABLE} is not read {where}, which cannot add a header to "
            "the response: only boundlog.asgi's and boundlog.wsgi's AccessLogMiddleware "
            f"give requests ids; remove {REQUEST_ID_VARIABLE}"
        )
    known = {*variables, REQUEST_ID_VARIABLE} if request_ids else set(variables)
    check_variable_names(environment, prefix="BOUNDLOG_", known=known, others=_NOT_SETTINGS)
    options: dict[str, Any] = {}
    for variable, (option, read) in variables.items():
        if variable in environment:
            options[option] = read(variable, environment[variable])
    return options


def log_for_middleware(
    log: AccessLog | None, options: dict[str, Any], *, request_ids: bool = False
) -> tuple[AccessLog, bool]:
    """The log a middleware writes to, and whether the middleware owns (and closes) it.

    A log the middleware builds takes ``options``, and the environment's value for
    every option they leave out; ``request_ids`` says whether the middleware reads
    ``BOUNDLOG_REQUEST_ID`` (see ``request_ids_for_middleware``).
    """
    if log is None:
        # A misspelt option is a ConfigurationError like any other, not a TypeError, so
        # that a middleware built lazily reports it at startup as it does the rest.
        unknown = sorted(set(options) - _ACCESS_LOG_OPTIONS)
        if unknown:
            close = difflib.get_close_matches(unknown[0], _ACCESS_LOG_OPTIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigurationError(
                f"unknown AccessLog option {unknown[0]!r}{hint}: the options are "
                f"{', '.join(sorted(_ACCESS_LOG_OPTIONS))}"
            )
        variables = options_from_environment(os.environ, request_ids=request_ids)
        try:
            return AccessLog(**{**variables, **options}), True
        except SinkError as error:
            if "sink" in options or "sink" not in variables:
                raise
            # The file the variable names cannot be opened (no such directory, no permission):
            # say which variable named it, as for every other error of a variable.
            raise SinkError(_sink_error(os.environ[SINK_VARIABLE], error)) from error
    if options:
        raise ConfigurationError(
            "pass either an AccessLog as log or its options, not both: "
            f"got log and {', '.join(sorted(options))}"
        )
    return log, False


def _sink_error(text: str, error: SinkError) -> str:
    """What to say when the file ``BOUNDLOG_SINK`` names cannot be opened."""
    message = f"{SINK_VARIABLE}={text!r}: {error}"
    if isinstance(error.__cause__, FileNotFoundError):
        directory = os.path.dirname(os.path.abspath(text.strip()))
        message += f": create its directory (mkdir -p {directory}) or name another file"
        if _HALF_URL.match(text.strip()):
            message += "; a network sink is scheme://HOST:PORT"
    return message


def request_ids_for_middleware(log: AccessLog | None, request_id: object) -> RequestIds | None:
    """What a middleware does to give each request an id, or None when it gives none.

    The code's ``request_id`` option, or for a middleware that builds its own log and
    is given none, ``BOUNDLOG_REQUEST_ID``'s: on, off, or the name of the header.
    """
    if request_id is None and log is None and REQUEST_ID_VARIABLE in os.environ:
        request_id = _request_id(REQUEST_ID_VARIABLE, os.environ[REQUEST_ID_VARIABLE])
    name = request_id_header("request_id", request_id)
    return None if name is None else RequestIds(name)


def _request_id(variable: str, text: str) -> bool | str:
    """On or off as any switch, or the name of the header."""
    try:
        return switch_in_environment(variable, text)
    except ConfigurationError:
        pass
    try:
        request_id_header(variable, text.strip())
    except ConfigurationError:
        raise ConfigurationError(
            f"{variable}={text!r} is neither on, off nor a header name: {variable}=1 keeps "
            f"ids in {DEFAULT_HEADER}, {variable}=X-Correlation-ID in that header, "
            f"{variable}=0 keeps none"
        ) from None
    return text.strip()


_ACCESS_LOG_OPTIONS = frozenset(inspect.signature(AccessLog).parameters)
