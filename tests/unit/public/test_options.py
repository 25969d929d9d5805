"""Options: one rule per kind of value, checked before anything is opened, errors that name it.

Through the public API only: ``AccessLog(...)``, its ``close``/``flush``/``reopen``
timeouts, ``reopen_signal`` with real signals sent to this process, and gunicorn's
logger class reading its ``BOUNDLOG_*`` variables (a real gunicorn refusing to start
with a bad one is in test_integration_gunicorn.py).
"""

from __future__ import annotations

import math
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from gunicorn.config import Config

from _helpers import BlockedPipe, wait_until
from _records import make_record
from boundlog import AccessLog, ConfigurationError
from boundlog.gunicorn import Logger


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def usr1_calls() -> Iterator[list[int]]:
    """SIGUSR1 handled by a handler of the test's own, which records each delivery."""
    calls: list[int] = []

    def handler(number: int, frame: FrameType | None) -> None:
        calls.append(number)

    saved = signal.signal(signal.SIGUSR1, handler)
    try:
        yield calls
    finally:
        signal.signal(signal.SIGUSR1, saved)


def _send_usr1(calls: list[int]) -> None:
    """Send SIGUSR1 to this process and wait until the test's handler saw it."""
    before = len(calls)
    os.kill(os.getpid(), signal.SIGUSR1)
    wait_until(lambda: len(calls) > before)
    assert calls[before:] == [signal.SIGUSR1]


def _reopened_on_usr1(log: AccessLog, path: Path, calls: list[int]) -> bool:
    """Whether the log, its file moved away, opens a new one at ``path`` on SIGUSR1."""
    path.rename(path.with_suffix(".moved"))
    _send_usr1(calls)
    # The writer carries out a signal's request within a second, or at its next batch.
    wait_until(path.exists)
    log.submit(make_record(path=b"/after-reopen"))
    assert log.flush(timeout=10)
    return b"/after-reopen" in path.read_bytes()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"flush_interval": math.inf},
            "flush_interval must be a number of seconds from 0 to 3600, not inf: "
            "e.g. flush_interval=0.01",
        ),
        ({"flush_interval": 3600.5}, "flush_interval must be a number of seconds from 0 to 3600"),
        ({"flush_interval": math.nan}, "flush_interval must be a number of seconds from 0 to 3600"),
        ({"flush_interval": True}, "flush_interval must be a number of seconds from 0 to 3600"),
        ({"flush_interval": "0.01"}, "flush_interval must be a number of seconds from 0 to 3600"),
        (
            {"close_timeout": math.nan},
            'close_timeout must be a number of seconds >= 0, or float("inf") to wait for ever, '
            "not nan: e.g. close_timeout=5.0",
        ),
        ({"close_timeout": -1}, "close_timeout must be a number of seconds >= 0"),
        ({"close_timeout": True}, "close_timeout must be a number of seconds >= 0"),
        ({"max_queue": True}, "max_queue must be a whole number >= 1, not True: e.g. max_queue="),
        ({"batch_size": 0}, "batch_size must be a whole number >= 1, not 0: e.g. batch_size=512"),
        ({"min_duration": math.inf}, "min_duration must be a number of seconds >= 0, not inf"),
        ({"min_duration": False}, "min_duration must be a number of seconds >= 0, not False"),
        ({"sample": math.nan}, "sample must be a fraction from 0 to 1, not nan: e.g. sample=0.1"),
        ({"sample": True}, "sample must be a fraction from 0 to 1, not True"),
        ({"utc": "false"}, "utc must be True or False, not 'false'"),
        ({"watch": 1}, "watch must be True or False, not 1"),
        ({"policy": "block"}, "unknown policy 'block': choose one of drop, wait"),
    ],
)
def test_a_value_outside_its_rule_is_refused_before_the_sink_is_opened(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    """Infinite, NaN, boolean and out-of-range values: a ConfigurationError, and no file."""
    path = tmp_path / "access.log"
    before = _open_descriptors()
    with pytest.raises(ConfigurationError) as raised:
        AccessLog(str(path), **options)
    assert str(raised.value).startswith(message)
    assert not path.exists()
    assert _open_descriptors() == before


@pytest.mark.parametrize(
    ("attribute", "names"),
    [
        ("request_header_names", frozenset({"x-trace"})),
        ("request_header_names", frozenset({b"X-Trace"})),
        ("response_header_names", "content-type"),
    ],
    ids=["text", "upper-case", "one-string"],
)
def test_a_format_objects_header_names_of_the_wrong_kind_are_refused_before_the_sink_is_opened(
    tmp_path: Path, attribute: str, names: object
) -> None:
    """Integrations look a format's header names up in servers' headers and environs,
    as lower-case bytes: anything else is a ConfigurationError naming the attribute."""

    class Custom:
        def format_batch(self, records: Any) -> bytes:
            return b"".join(b"line\n" for _ in records)

    custom = Custom()
    setattr(custom, attribute, names)
    path = tmp_path / "access.log"
    before = _open_descriptors()
    with pytest.raises(ConfigurationError, match=f"Custom.{attribute} must be lower-case bytes"):
        AccessLog(str(path), format=custom)
    assert not path.exists()
    assert _open_descriptors() == before


def test_a_step_failing_after_the_sink_is_opened_closes_what_was_opened(
    tmp_path: Path, usr1_calls: list[int]
) -> None:
    """A format object whose ``reads_notes`` raises fails the log after its file is
    open: the error propagates, with the file and the handlers given back."""

    class Broken:
        request_header_names = frozenset({b"referer"})
        response_header_names = frozenset[bytes]()

        def format_batch(self, records: Any) -> bytes:
            return b"".join(b"line\n" for _ in records)

        @property
        def reads_notes(self) -> bool:
            raise RuntimeError("cannot say")

    path = tmp_path / "access.log"
    handlers = signal.getsignal(signal.SIGUSR1), signal.getsignal(signal.SIGTERM)
    before = _open_descriptors()
    with pytest.raises(RuntimeError, match="cannot say"):
        AccessLog(str(path), format=Broken(), reopen_signal="USR1")
    assert path.exists()  # opened, so the step failed after the sink was
    assert _open_descriptors() == before
    assert (signal.getsignal(signal.SIGUSR1), signal.getsignal(signal.SIGTERM)) == handlers
    # SIGUSR1 still reaches the handler that was there before.
    _send_usr1(usr1_calls)


def test_the_longest_flush_interval_still_writes_at_close(tmp_path: Path) -> None:
    """flush_interval=3600 holds lines until flush() or close(), and the writer survives."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path), flush_interval=3600)
    log.submit(make_record(path=b"/held"))
    assert log.close().written == 1
    assert b"/held" in path.read_bytes()


@pytest.mark.parametrize("close_timeout", [math.inf, 1e10], ids=["inf", "1e10"])
def test_close_timeout_beyond_what_threading_can_time_waits_for_the_sink(
    blocked_pipe: BlockedPipe, close_timeout: float
) -> None:
    """inf (or any wait longer than threading's ~292 years) waits as long as the sink needs."""
    log = AccessLog(blocked_pipe.write_fd, flush_interval=0, close_timeout=close_timeout)
    log.submit(make_record(path=b"/first"))
    accepted = 1
    wait_until(lambda: log.stats().queued == 0)  # the writer is in (or at) its blocked write

    def release_once_closing() -> None:
        nonlocal accepted
        # A record submitted once close() has begun is refused: that is how this thread
        # knows close() is waiting, without looking inside the log.
        while log.submit(make_record(path=b"/probe")):
            accepted += 1
        blocked_pipe.release()

    releaser = threading.Thread(target=release_once_closing)
    releaser.start()
    stats = log.close()
    releaser.join()
    assert (stats.written, stats.failed, stats.dropped) == (accepted, 0, 1)
    assert blocked_pipe.lines()[0].split(b" ")[6] == b"/first"


def test_timeouts_of_close_flush_and_reopen_follow_the_same_rule(tmp_path: Path) -> None:
    """inf waits for ever; NaN, negative and boolean timeouts are ConfigurationErrors."""
    log = AccessLog(str(tmp_path / "access.log"))
    log.submit(make_record())
    assert log.flush(timeout=math.inf)
    assert log.reopen(timeout=math.inf)
    for method in (log.flush, log.reopen, log.close):
        for bad in (math.nan, -1, True):
            with pytest.raises(ConfigurationError, match=r"^timeout must be a number of seconds"):
                method(timeout=bad)
    assert log.close(timeout=math.inf).written == 1


@pytest.mark.parametrize(
    "reopen_signal",
    [signal.SIGUSR1, int(signal.SIGUSR1), "SIGUSR1", "USR1", "usr1"],
    ids=["Signals", "int", "SIGUSR1", "USR1", "usr1"],
)
def test_reopen_signal_takes_a_signal_its_number_or_its_name(
    tmp_path: Path, usr1_calls: list[int], reopen_signal: object
) -> None:
    """As kill(1), gunicorn and nginx users write it; the handler found there still runs."""
    path = tmp_path / "access.log"
    log = AccessLog(str(path), reopen_signal=reopen_signal, flush_interval=0)  # type: ignore[arg-type]
    try:
        assert _reopened_on_usr1(log, path, usr1_calls)
    finally:
        log.close()


@pytest.mark.parametrize(
    ("reopen_signal", "message"),
    [
        (signal.SIGKILL, "reopen_signal=signal.SIGKILL: no process can catch SIGKILL: e.g. "),
        ("STOP", "reopen_signal='STOP': no process can catch SIGSTOP"),
        (999, "reopen_signal=999 is not a signal on this system"),
        ("SIGUSR3", "reopen_signal='SIGUSR3' is not the name of a signal"),
        (signal.SIGSEGV, "reopen_signal=signal.SIGSEGV: SIGSEGV reports a fault in the process"),
        (True, "reopen_signal must be a signal, not True"),
        (10.0, "reopen_signal must be a signal, not 10.0"),
    ],
)
def test_an_unusable_reopen_signal_is_refused_and_leaks_nothing(
    tmp_path: Path, usr1_calls: list[int], reopen_signal: object, message: str
) -> None:
    """Uncatchable, unknown and mistyped signals: no descriptor, file or handler left."""
    path = tmp_path / "access.log"
    handlers = {number: signal.getsignal(number) for number in signal.valid_signals()}
    before = _open_descriptors()
    with pytest.raises(ConfigurationError) as raised:
        AccessLog(str(path), reopen_signal=reopen_signal)  # type: ignore[arg-type]
    assert str(raised.value).startswith(message)
    assert "e.g. reopen_signal=signal.SIGUSR1, reopen_signal='SIGUSR1'" in str(raised.value)
    assert _open_descriptors() == before
    assert not path.exists()
    assert {number: signal.getsignal(number) for number in signal.valid_signals()} == handlers


def test_closing_thousands_of_logs_puts_the_original_handler_back(
    usr1_calls: list[int],
) -> None:
    """Handlers no longer stack up: after 2,000 logs, SIGUSR1 reaches the original once."""
    original = signal.getsignal(signal.SIGUSR1)
    for _ in range(2000):
        AccessLog(os.devnull, reopen_signal=signal.SIGUSR1).close()
    assert signal.getsignal(signal.SIGUSR1) is original
    _send_usr1(usr1_calls)


def test_logs_sharing_a_signal_may_close_in_any_order(
    tmp_path: Path, usr1_calls: list[int]
) -> None:
    """The first log closed does not take the signal from the second; the last gives it back."""
    original = signal.getsignal(signal.SIGUSR1)
    first = AccessLog(str(tmp_path / "first.log"), reopen_signal="USR1", flush_interval=0)
    second_path = tmp_path / "second.log"
    second = AccessLog(str(second_path), reopen_signal="USR1", flush_interval=0)
    first.close()
    assert signal.getsignal(signal.SIGUSR1) is not original
    try:
        assert _reopened_on_usr1(second, second_path, usr1_calls)
    finally:
        second.close()
    assert signal.getsignal(signal.SIGUSR1) is original
    _send_usr1(usr1_calls)


def test_a_handler_installed_over_boundlogs_stays_when_the_log_closes(
    tmp_path: Path, usr1_calls: list[int]
) -> None:
    """A server's own handler, installed after the log's, is never replaced by close()."""
    log = AccessLog(str(tmp_path / "access.log"), reopen_signal=signal.SIGUSR1)

    def server_handler(number: int, frame: FrameType | None) -> None:
        usr1_calls.append(-number)

    signal.signal(signal.SIGUSR1, server_handler)
    log.close()
    assert signal.getsignal(signal.SIGUSR1) is server_handler


def test_a_log_closed_outside_the_main_thread_leaves_a_handler_that_only_chains(
    tmp_path: Path, usr1_calls: list[int]
) -> None:
    """Python installs handlers only from the main thread: the next log there gives it back."""
    original = signal.getsignal(signal.SIGUSR1)
    log = AccessLog(str(tmp_path / "access.log"), reopen_signal=signal.SIGUSR1)
    closer = threading.Thread(target=log.close)
    closer.start()
    closer.join()
    _send_usr1(usr1_calls)
    AccessLog(os.devnull, reopen_signal=signal.SIGUSR1).close()
    assert signal.getsignal(signal.SIGUSR1) is original


def _environment_options(monkeypatch: pytest.MonkeyPatch, **variables: str) -> dict[str, Any]:
    for name in [name for name in os.environ if name.startswith("BOUNDLOG_")]:
        monkeypatch.delenv(name)
    # Made first: without --access-logfile, its setup checks the variables too.
    cfg = Config()
    logger = Logger(cfg)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return logger.log_options(cfg)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {"BOUNDLOG_SKIP_PATH": "/healthz"},
            "unknown setting BOUNDLOG_SKIP_PATH (did you mean BOUNDLOG_SKIP_PATHS?): the "
            "BOUNDLOG_* variables are BOUNDLOG_BATCH_SIZE, BOUNDLOG_FLUSH_INTERVAL, "
            "BOUNDLOG_MAX_QUEUE, BOUNDLOG_MAX_QUEUE_BYTES, BOUNDLOG_MAX_RECORD_BYTES, BOUNDLOG_METRICS, BOUNDLOG_POLICY, "
            "BOUNDLOG_PROXY_HEADER, BOUNDLOG_REDACT_QUERY, BOUNDLOG_REPORT_LOSS, "
            "BOUNDLOG_SKIP_PATHS, BOUNDLOG_SKIP_PATH_ERRORS, BOUNDLOG_TRUSTED_PROXIES, "
            "BOUNDLOG_WEBSOCKETS; rename or remove it",
        ),
        (
            {"BOUNDLOG_METRICS": "maybe"},
            "BOUNDLOG_METRICS='maybe' is none of the metrics: BOUNDLOG_METRICS=1 or "
            "BOUNDLOG_METRICS=prometheus for Prometheus, BOUNDLOG_METRICS=opentelemetry for "
            "OpenTelemetry, BOUNDLOG_METRICS=0 for none",
        ),
        (
            {"BOUNDLOG_MAXQUEUE": "100", "BOUNDLOG_COLOUR": "no"},
            "unknown settings BOUNDLOG_COLOUR, BOUNDLOG_MAXQUEUE (did you mean "
            "BOUNDLOG_MAX_QUEUE?): ",
        ),
        (
            {"BOUNDLOG_BATCH_SIZE": "-5"},
            "BOUNDLOG_BATCH_SIZE must be a whole number >= 1, not -5: e.g. BOUNDLOG_BATCH_SIZE=512",
        ),
        (
            {"BOUNDLOG_FLUSH_INTERVAL": "soon"},
            "BOUNDLOG_FLUSH_INTERVAL='soon' is not a number: e.g. BOUNDLOG_FLUSH_INTERVAL=0.01",
        ),
        (
            {"BOUNDLOG_SKIP_PATHS": "healthz"},
            "BOUNDLOG_SKIP_PATHS='healthz': skip_paths entry 'healthz' is not a path",
        ),
        (
            {"BOUNDLOG_REDACT_QUERY": "token,a=b"},
            "BOUNDLOG_REDACT_QUERY='token,a=b': redact_query entry 'a=b' is not a query "
            "parameter name",
        ),
    ],
)
def test_a_bad_or_misspelt_variable_is_reported_by_its_name(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], message: str
) -> None:
    """A misspelt setting is an error with the closest name, never silently ignored."""
    with pytest.raises(ConfigurationError, match="^" + re.escape(message)):
        _environment_options(monkeypatch, **variables)


def test_a_list_variables_error_gives_an_example_in_its_own_syntax(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The example is what to write in the environment, not a Python list."""
    with pytest.raises(ConfigurationError) as raised:
        _environment_options(monkeypatch, BOUNDLOG_TRUSTED_PROXIES="proxy.local")
    assert str(raised.value).endswith(
        "(in the environment: BOUNDLOG_TRUSTED_PROXIES=127.0.0.1,10.0.0.0/8)"
    )


def test_the_variables_of_boundlog_bench_are_not_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BOUNDLOG_BENCH_* (the servers of ``boundlog bench``) pass; the settings are read."""
    options = _environment_options(
        monkeypatch,
        BOUNDLOG_BENCH_LOGGER="boundlog-drop",
        BOUNDLOG_POLICY="wait",
        BOUNDLOG_MAX_QUEUE="100",
        BOUNDLOG_FLUSH_INTERVAL="0",
    )
    assert options == {"policy": "wait", "max_queue": 100, "flush_interval": 0.0}


def test_the_variable_that_picks_the_core_is_not_a_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BOUNDLOG_NO_EXTENSIONS (boundlog._core) does not stop gunicorn as a misspelt setting."""
    assert _environment_options(monkeypatch, BOUNDLOG_NO_EXTENSIONS="1") == {}
