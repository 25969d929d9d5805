"""The rules options are checked by, and the ConfigurationErrors that name them.

One rule per kind of value, used wherever a value is given: by ``AccessLog`` (which
checks every option before it opens anything, so that a log that cannot be built leaves
nothing open behind it), by the selection options in ``_filters``, and by gunicorn's
logger class for its ``BOUNDLOG_*`` variables.  Every error names the option, says what
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
from collections.abc import Collection, Iterable, Mapping
from typing import Any, TypeVar

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


def list_in_environment(text: str) -> list[str]:
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
