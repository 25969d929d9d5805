"""Every ``AccessLog`` option, defined once, and the rules their values are checked by.

``OPTIONS`` holds one ``Option`` per keyword of ``AccessLog``: its name, default, the
rule that checks a value, its ``BOUNDLOG_*`` variable and how that variable's text is
read.  ``AccessLog`` checks its keywords through it, ``engine/_environment`` reads the
variables from it, and tests keep ``AccessLog``'s signature, the middlewares' typed
keywords (``LogOptions``) and the table in docs/configuration.md equal to it.

One rule per kind of value, used wherever a value is given: by ``AccessLog`` (which
checks every option before it opens anything, so that a log that cannot be built leaves
nothing open behind it), by the selection options in ``_filters``, and by the
``BOUNDLOG_*`` variables.  Every error names the option, says what
was wrong and gives an example.  A name in capitals is an environment variable: its
example is written in the variable's syntax (``BOUNDLOG_MAX_QUEUE=10000``), an option's
in Python's (``max_queue=10000``).

Booleans are not numbers here (``True`` would be 1), and neither is NaN, which compares
false with everything: a check that refuses what lies outside a range (``value < 0``)
lets it through, so each rule says what lies inside.
"""

from __future__ import annotations

import difflib
import math
import signal
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

from ._errors import ConfigurationError

# Signals no handler can catch, and the ones the kernel sends for a fault in the
# process itself: a Python handler returns to the faulting instruction, which faults
# again for ever.
_UNCATCHABLE = frozenset(
    getattr(signal, name) for name in ("SIGKILL", "SIGSTOP") if hasattr(signal, name)
)
_FAULTS = frozenset(
    getattr(signal, name)
    for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")
    if hasattr(signal, name)
)
_Choice = TypeVar("_Choice", bound=str)


def whole_number(name: str, value: object, *, example: int, minimum: int = 1) -> int:
    """``value`` if it is an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(
            f"{name} must be a whole number >= {minimum}, not {value!r}: {_example(name, example)}"
        )
    return value


def seconds(name: str, value: object, *, example: float, maximum: float | None = None) -> float:
    """``value`` as a float if it is a finite number of seconds from 0 to ``maximum``."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value < math.inf
        and (maximum is None or value <= maximum)
    ):
        return float(value)
    wanted = "a number of seconds " + (">= 0" if maximum is None else f"from 0 to {maximum:g}")
    raise ConfigurationError(f"{name} must be {wanted}, not {value!r}: {_example(name, example)}")


def seconds_to_wait(name: str, value: object, *, example: float) -> float | None:
    """A number of seconds >= 0 to wait, as threading takes it: None waits for ever.

    ``inf`` means for ever, and so does any wait longer than threading can time (about
    292 years), which it would refuse with an OverflowError.
    """
    if not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0:
        raise ConfigurationError(
            f"{name} must be a number of seconds >= 0, or {_python(math.inf)} to wait for "
            f"ever, not {value!r}: {_example(name, example)}"
        )
    return None if value >= threading.TIMEOUT_MAX else float(value)


def fraction(name: str, value: object, *, example: float) -> float:
    """``value`` as a float if it is from 0 to 1."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    raise ConfigurationError(
        f"{name} must be a fraction from 0 to 1, not {value!r}: {_example(name, example)}"
    )


def flag(name: str, value: object) -> bool:
    """``value`` if it is True or False (a truthy string like ``"false"`` is neither)."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, not {value!r}")
    return value


def one_of(name: str, value: object, choices: Iterable[_Choice]) -> _Choice:
    """The one of ``choices`` that ``value`` is."""
    choices = tuple(choices)
    for choice in choices:
        if value == choice:
            return choice
    raise ConfigurationError(f"unknown {name} {value!r}: choose one of {', '.join(choices)}")


def entries(name: str, value: object) -> list[Any]:
    """The entries of a list option; a lone string is one entry, never its characters."""
    if isinstance(value, str | bytes | int | range):
        return [value]
    if not isinstance(value, Iterable):
        raise ConfigurationError(f"{name} must be a list, not {value!r}")
    return list(value)


def signal_to_catch(name: str, value: object) -> int:
    """The number of the signal ``value`` names, if a handler can catch it.

    Takes a ``signal.Signals``, its number, or its name as kill(1) and server manuals
    write it: ``"SIGUSR1"``, ``"USR1"``, in any case.
    """
    examples = f"e.g. {name}=signal.SIGUSR1, {name}='SIGUSR1' or {name}='USR1'"
    if isinstance(value, str):
        upper = value.strip().upper()
        number = getattr(signal.Signals, upper if upper.startswith("SIG") else "SIG" + upper, None)
        if number is None:
            raise ConfigurationError(f"{name}={value!r} is not the name of a signal: {examples}")
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise ConfigurationError(f"{name} must be a signal, not {value!r}: {examples}")
    shown = f"{name}={_python(value)}"
    if number not in signal.valid_signals():
        raise ConfigurationError(f"{shown} is not a signal on this system: {examples}")
    if number in _UNCATCHABLE:
        raise ConfigurationError(f"{shown}: no process can catch {signal_name(number)}: {examples}")
    if number in _FAULTS:
        raise ConfigurationError(
            f"{shown}: {signal_name(number)} reports a fault in the process itself and "
            f"cannot ask for a reopen: {examples}"
        )
    return int(number)


def signal_name(number: int) -> str:
    """``"SIGUSR1"`` for 10; real-time signals, which have no name of their own, by number."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def number_in_environment(
    variable: str, text: str, kind: type[int] | type[float], *, example: float
) -> float:
    """The number a variable's text spells; the option's rule checks its range after."""
    try:
        return kind(text)
    except ValueError:
        wanted = "a whole number" if kind is int else "a number"
        raise ConfigurationError(
            f"{variable}={text!r} is not {wanted}: {_example(variable, example)}"
        ) from None


def switch_in_environment(variable: str, text: str) -> bool:
    """On (``1``, ``true``, ``yes``, ``on``) or off (``0``, ``false``, ``no``, ``off``)."""
    spelt = text.strip().lower()
    if spelt in ("1", "true", "yes", "on"):
        return True
    if spelt in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(
        f"{variable}={text!r} is neither on nor off: {variable}=1 turns it on, {variable}=0 off"
    )


def list_in_environment(variable: str, text: str) -> list[str]:
    """The entries of a comma-separated variable; an empty one is an empty list."""
    return [entry.strip() for entry in text.split(",") if entry.strip()]


def check_variable_names(
    environment: Mapping[str, str], *, prefix: str, known: Collection[str], others: Iterable[str]
) -> None:
    """Refuse a variable named like a setting that is none, suggesting the closest.

    A misspelt setting that is silently ignored is a setting that is silently not
    applied.  ``others`` are prefixes of variables that are not settings.
    """
    others = tuple(others)
    unknown = sorted(
        name
        for name in environment
        if name.startswith(prefix) and name not in known and not name.startswith(others)
    )
    if not unknown:
        return
    reports = []
    # Compared without the prefix they all share, which would make any two look alike.
    suffixes = {name.removeprefix(prefix): name for name in known}
    for name in unknown:
        closest = difflib.get_close_matches(name.removeprefix(prefix), suffixes, n=1, cutoff=0.5)
        reports.append(f"{name} (did you mean {suffixes[closest[0]]}?)" if closest else name)
    several = len(unknown) > 1
    raise ConfigurationError(
        f"unknown setting{'s' if several else ''} {', '.join(reports)}: the {prefix}* "
        f"variables are {', '.join(sorted(known))}; rename or remove "
        f"{'them' if several else 'it'}"
    )


def _example(name: str, value: object) -> str:
    if name.isupper():
        return f"e.g. {name}={value}"
    return f"e.g. {name}={_python(value)}"


def _python(value: object) -> str:
    """``value`` as a user would write it in Python."""
    if isinstance(value, signal.Signals):
        return f"signal.{value.name}"
    if value == math.inf:
        return 'float("inf")'
    return repr(value)


def text_in_environment(variable: str, text: str) -> str:
    """The variable's text as it is; the option's rule, or the part using it, checks it."""
    return text


def metrics_in_environment(variable: str, text: str) -> bool | str:
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


def _unless_none(rule: Callable[[str, object], object]) -> Callable[[str, object], object]:
    """``rule`` for an option whose None means "not asked for"."""

    def check(name: str, value: object) -> object:
        return None if value is None else rule(name, value)

    return check


# Defaults, chosen by measurement (docs/performance.md):
# - 10,000 waiting records is about 0.3 s of uvicorn's full single-core rate: enough
#   to ride out a sink stall of that length, in a few MiB of resident memory when full
#   (the benchmark's overload scenario checks the bound).
DEFAULT_MAX_QUEUE = 10_000
# - a batch of 512 lines is ~100 KiB, past which a bigger write saves nothing.
DEFAULT_BATCH_SIZE = 512
# - gathering for 10 ms after the first record costs at most 100 writer wake-ups a
#   second under load, and a line reaches the sink within ~10 ms of its response.
DEFAULT_FLUSH_INTERVAL = 0.01
# - close() and the exit backstop give a stuck sink this long before giving up.
DEFAULT_CLOSE_TIMEOUT = 5.0
# The longest flush_interval: a line held longer than an hour is a line not logged.  A
# test or a batch job that wants lines only at flush() or close() asks for this.
MAX_FLUSH_INTERVAL = 3600.0
#: The default ``max_record_bytes``: nginx's and Apache's default limits (4 buffers of
#: 8 KiB; 8,190 bytes a field) let through requests larger than this only rarely, and
#: a browser's ordinary request estimates at a quarter to a third of it.
DEFAULT_MAX_RECORD_BYTES = 16 * 1024
#: The default ``max_queue_bytes``: what the queued records may keep, in total, of what
#: clients sent and applications added.  With the default ``max_queue`` (10,000 records
#: of at most RECORD_OVERHEAD besides) a full queue holds at most about 30 MiB.
DEFAULT_MAX_QUEUE_BYTES = 20 * 1024 * 1024
#: The smallest ``max_queue_bytes`` allowed.
MIN_QUEUE_BYTES = 65536
#: The smallest ``max_record_bytes`` allowed: room for a few cut fields and their markers.
MIN_RECORD_BYTES = 4096

Policy = Literal["drop", "wait"]
#: The overload policies a log takes (``policy=``): ``drop`` refuses, and counts, a record
#: that finds the queue full; ``wait`` blocks its submitter until there is room.
POLICIES: tuple[Policy, ...] = ("drop", "wait")

#: The forwarding headers a log can read, the default first.
PROXY_HEADERS = ("x-forwarded-for", "forwarded")

#: Query parameters whose values are redacted unless ``redact_query`` says otherwise:
#: names that carry a password, a bearer or API credential or a request signature in
#: common frameworks and APIs (OAuth 2.0, OpenID Connect, AWS and Azure signed URLs,
#: GitLab).  Deliberately not listed, because they name ordinary data far more often
#: than secrets: ``key`` (sort keys, cache keys; Google's API keys use it), ``code``
#: (country or promotion codes; OAuth's one-time authorization code), ``session``,
#: ``state``.  Add them with ``redact_query=(*DEFAULT_REDACTED_QUERY, "key")``.
DEFAULT_REDACTED_QUERY = (
    "access_token",
    "api_key",
    "apikey",
    "auth",
    "auth_token",
    "client_secret",
    "id_token",
    "passwd",
    "password",
    "private_token",
    "pwd",
    "refresh_token",
    "secret",
    "sig",
    "signature",
    "token",
    "x-amz-security-token",
    "x-amz-signature",
)


@dataclass(frozen=True)
class Option:
    """One ``AccessLog`` option: everything that is said about it, said once."""

    name: str
    default: Any
    #: One line on what it does, for the docs and for errors.
    summary: str
    #: The rule a given value is checked by: ``check(name, value)`` returns the value as
    #: the log keeps it, or raises a ConfigurationError naming ``name`` (the option's,
    #: or its variable's).  None where the part that uses the value checks it while
    #: building from it (``open_sink``, ``make_format``, ``make_select``,
    #: ``metrics_option``), before the sink is opened all the same.
    check: Callable[[str, Any], Any] | None = None
    #: Its ``BOUNDLOG_*`` variable, if it has one.
    variable: str | None = None
    #: How the variable's text becomes a value, which ``check`` then checks.
    parse: Callable[[str, str], Any] = text_in_environment
    #: False for a variable only a middleware reads: gunicorn's logger class takes the
    #: sink and the format from its command line.
    under_gunicorn: bool = True
    #: True for the options ``make_select`` builds the writer's selection from.
    selects: bool = False


def _whole_number_option(
    name: str, default: int, summary: str, *, example: int, minimum: int = 1
) -> Option:
    return Option(
        name,
        default,
        summary,
        check=partial(whole_number, example=example, minimum=minimum),
        variable="BOUNDLOG_" + name.upper(),
        parse=partial(number_in_environment, kind=int, example=example),
    )


def _flag_option(name: str, default: bool, summary: str, *, variable: bool = False) -> Option:
    return Option(
        name,
        default,
        summary,
        check=flag,
        variable="BOUNDLOG_" + name.upper() if variable else None,
        parse=switch_in_environment,
    )


def _selection_option(name: str, default: Any, summary: str, *, variable: bool = False) -> Option:
    return Option(
        name,
        default,
        summary,
        variable="BOUNDLOG_" + name.upper() if variable else None,
        parse=text_in_environment if name == "proxy_header" else list_in_environment,
        selects=True,
    )


#: Every keyword of ``AccessLog``, in the order of its signature.
OPTIONS: dict[str, Option] = {
    option.name: option
    for option in (
        Option(
            "sink",
            "stdout",
            "where lines go: stdout, stderr, a file path, a descriptor, a URL, logging:NAME",
            variable="BOUNDLOG_SINK",
            under_gunicorn=False,
        ),
        Option(
            "format",
            "combined",
            "what a line says: a format name, a template, or a format object",
            variable="BOUNDLOG_FORMAT",
            under_gunicorn=False,
        ),
        Option(
            "policy",
            "drop",
            "what a full queue does: drop (and count) the record, or wait for room",
            check=partial(one_of, choices=POLICIES),
            variable="BOUNDLOG_POLICY",
        ),
        _whole_number_option(
            "max_queue",
            DEFAULT_MAX_QUEUE,
            "records that may wait for the writer",
            example=DEFAULT_MAX_QUEUE,
        ),
        _whole_number_option(
            "batch_size",
            DEFAULT_BATCH_SIZE,
            "the most records the writer takes and writes at once",
            example=DEFAULT_BATCH_SIZE,
        ),
        _whole_number_option(
            "max_record_bytes",
            DEFAULT_MAX_RECORD_BYTES,
            "the most a record keeps of what the client sent and the application added",
            example=65536,
            minimum=MIN_RECORD_BYTES,
        ),
        _whole_number_option(
            "max_queue_bytes",
            DEFAULT_MAX_QUEUE_BYTES,
            "what the queued records may keep of those bytes, in total",
            example=64 * 1024 * 1024,
            minimum=MIN_QUEUE_BYTES,
        ),
        Option(
            "flush_interval",
            DEFAULT_FLUSH_INTERVAL,
            "seconds the writer gathers after the first record of a batch",
            check=partial(seconds, example=DEFAULT_FLUSH_INTERVAL, maximum=MAX_FLUSH_INTERVAL),
            variable="BOUNDLOG_FLUSH_INTERVAL",
            parse=partial(number_in_environment, kind=float, example=DEFAULT_FLUSH_INTERVAL),
        ),
        _flag_option("utc", False, "timestamps in UTC instead of local time"),
        Option(
            "close_timeout",
            DEFAULT_CLOSE_TIMEOUT,
            "seconds close(), flush(), reopen() and the exit wait for a stuck sink",
            check=partial(seconds_to_wait, example=DEFAULT_CLOSE_TIMEOUT),
        ),
        Option(
            "reopen_signal",
            None,
            "a signal that makes the writer reopen a file sink",
            check=_unless_none(signal_to_catch),
        ),
        _flag_option("watch", False, "reopen a file sink when its path is moved or removed"),
        _selection_option("skip_paths", (), "paths not to log", variable=True),
        Option(
            "skip_path_errors",
            False,
            "skip_paths skips its paths' 4xx and 5xx responses too",
            check=flag,
            variable="BOUNDLOG_SKIP_PATH_ERRORS",
            parse=switch_in_environment,
            selects=True,
        ),
        _selection_option("skip_status", (), "status codes not to log, and ranges of them"),
        _selection_option("min_duration", 0.0, "log only requests at least this slow"),
        _selection_option("sample", 1.0, "the fraction of successful responses to log"),
        _selection_option("keep", None, "keep(record) -> bool: false skips the record"),
        _flag_option(
            "websockets", True, "the ASGI middleware logs websocket sessions", variable=True
        ),
        _selection_option(
            "redact_query",
            DEFAULT_REDACTED_QUERY,
            "query parameters whose values are logged as [redacted]",
            variable=True,
        ),
        _selection_option(
            "trusted_proxies",
            (),
            "reverse proxies whose forwarded client is logged",
            variable=True,
        ),
        _selection_option(
            "proxy_header",
            PROXY_HEADERS[0],
            "the one header the trusted proxies set",
            variable=True,
        ),
        Option(
            "metrics",
            False,
            "keep the counters in Prometheus or OpenTelemetry too",
            variable="BOUNDLOG_METRICS",
            parse=metrics_in_environment,
        ),
        _flag_option("report_loss", True, "say on stderr when records are lost", variable=True),
    )
}


def checked_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``given`` checked by its rule, in the order of ``OPTIONS``."""
    return {
        name: value if option.check is None else option.check(name, value)
        for name, option in OPTIONS.items()
        for value in (given[name],)
    }
