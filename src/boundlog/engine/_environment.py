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
import os
import re
from collections.abc import Mapping
from typing import Any

from .._core import NO_EXTENSIONS_VARIABLE
from .._errors import ConfigurationError, SinkError
from .._options import OPTIONS, Option, check_variable_names, switch_in_environment
from ..capture._request_id import DEFAULT_HEADER, RequestIds, request_id_header
from ..formats._apache import make_format
from ..selection._filters import make_select
from ..sinks._logging import SCHEME as LOGGING_SCHEME
from ..sinks._logging import parse_spec
from ..sinks._urls import looks_like_url, parse_url, refuse_missing_slashes
from ._log import SELECTION_OPTIONS, AccessLog

SINK_VARIABLE = "BOUNDLOG_SINK"
REQUEST_ID_VARIABLE = "BOUNDLOG_REQUEST_ID"

# Examples of the selection variables, in their own syntax.
_SELECTION_EXAMPLES = {
    "skip_paths": "/healthz,/static/*",
    "trusted_proxies": "127.0.0.1,10.0.0.0/8",
    "proxy_header": "forwarded",
    "redact_query": "token,password",
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
        refuse_missing_slashes(spec)
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


def _check_selection(option: str, variable: str, text: str, value: Any) -> None:
    """make_select's check of one of its options, its error naming the variable."""
    try:
        make_select(**{option: value})
    except ConfigurationError as error:
        raise ConfigurationError(
            f"{variable}={text!r}: {error} "
            f"(in the environment: {variable}={_SELECTION_EXAMPLES[option]})"
        ) from None


def _read(option: Option, variable: str, text: str) -> Any:
    """The value a variable's text gives its option, checked by the option's rule."""
    if option.name == "sink":
        return _sink(variable, text)
    if option.name == "format":
        return _format(variable, text)
    value = option.parse(variable, text)
    if option.check is not None:
        return option.check(variable, value)
    if option.name in SELECTION_OPTIONS:
        _check_selection(option.name, variable, text, value)
    return value


# Each variable and its option, in the order of AccessLog's signature; under gunicorn's
# logger class, without the sink's and the format's (its command line names them).
_VARIABLES = {option.variable: option for option in OPTIONS.values() if option.variable}
_GUNICORN_VARIABLES = {
    variable: option for variable, option in _VARIABLES.items() if option.under_gunicorn
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
    variables = _GUNICORN_VARIABLES if gunicorn else _VARIABLES
    if gunicorn:
        named = sorted(name for name in _VARIABLES.keys() - variables if name in environment)
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
    for variable, option in variables.items():
        if variable in environment:
            options[option.name] = _read(option, variable, environment[variable])
    return options


def log_for_middleware(
    log: AccessLog | None, options: Mapping[str, object], *, request_ids: bool = False
) -> tuple[AccessLog, bool]:
    """The log a middleware writes to, and whether the middleware owns (and closes) it.

    A log the middleware builds takes ``options``, and the environment's value for
    every option they leave out; ``request_ids`` says whether the middleware reads
    ``BOUNDLOG_REQUEST_ID`` (see ``request_ids_for_middleware``).
    """
    if log is None:
        # A misspelt option is a ConfigurationError like any other, not a TypeError, so
        # that a middleware built lazily reports it at startup as it does the rest.
        unknown = sorted(set(options) - OPTIONS.keys())
        if unknown:
            close = difflib.get_close_matches(unknown[0], OPTIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigurationError(
                f"unknown AccessLog option {unknown[0]!r}{hint}: the options are "
                f"{', '.join(sorted(OPTIONS))}"
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
    if isinstance(error.__cause__, FileNotFoundError) and _HALF_URL.match(text.strip()):
        # The error says which directory to create (sinks/_files.py).
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
