"""gunicorn's ``--statsd-host`` metrics under ``--logger-class boundlog.gunicorn.Logger``.

gunicorn switches to its own statsd logger only when the logger class is its default,
so the logger class brings the metrics itself: with a statsd host it is combined with
gunicorn's ``Statsd`` class.  A real statsd listener (a UDP socket on loopback, port 0)
parses every datagram; the same requests are served by a real gunicorn under boundlog's
logger class and under gunicorn's own logger, and must give the same metrics, while the
access log is still boundlog's.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from gunicorn.config import Config
from gunicorn.instrument.statsd import Statsd

from _servers import (
    LOOPBACK,
    PYTHON,
    SERVER_TZ,
    Exchange,
    build_exchanges,
    check_log,
    read_log_lines,
    running_server,
    send_exchanges,
    stop_gracefully,
)
from boundlog.gunicorn import Logger, _status_code

# Four rounds of the shared routes: every status, a /raise (500, which gunicorn logs as
# an exception) and a /healthz (which the access log skips, the metrics do not) each.
REQUESTS = 64
APP = "tests.apps.bare_wsgi:app"
BOUNDLOG = "boundlog.gunicorn.Logger"
GUNICORN = "gunicorn.glogging.Logger"
# The access log skips the health checks; the metrics count every request.
POLICY_ENVIRONMENT = {"BOUNDLOG_SKIP_PATHS": "/healthz", "BOUNDLOG_TRUSTED_PROXIES": "127.0.0.1"}
WAIT_TIMEOUT = 20.0

# name:value|type, then |@rate (counters) and |#tags (--dogstatsd-tags), as gunicorn
# writes them.
_DATAGRAM = re.compile(
    r"(?P<name>[^:|]+):(?P<value>-?[0-9.]+(?:e[-+]?[0-9]+)?)\|(?P<type>c|ms|g|h)"
    r"(?:\|@(?P<rate>[0-9.]+))?(?:\|#(?P<tags>.+))?"
)


class Metric(NamedTuple):
    name: str
    value: float
    type: str
    rate: str | None
    tags: str | None


def parse(datagram: bytes) -> Metric:
    """One statsd line; anything else fails the test."""
    match = _DATAGRAM.fullmatch(datagram.decode("ascii"))
    assert match is not None, f"not a statsd line: {datagram!r}"
    return Metric(match["name"], float(match["value"]), match["type"], match["rate"], match["tags"])


class StatsdListener:
    """A statsd server on a loopback UDP port: a thread keeps every datagram it receives."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # Room for bursts while the thread is not scheduled (the kernel may cap it).
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self._socket.bind((LOOPBACK, 0))
        self.address = "%s:%d" % self._socket.getsockname()
        self._datagrams: list[bytes] = []
        self._received = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._receive, name="statsd", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while True:
            datagram = self._socket.recv(65536)
            if self._stopping:
                return
            with self._received:
                self._datagrams.append(datagram)
                self._received.notify_all()

    def metrics(self) -> list[Metric]:
        with self._received:
            datagrams = list(self._datagrams)
        return [parse(datagram) for datagram in datagrams]

    def wait_for(self, condition: Callable[[list[Metric]], bool], what: str) -> list[Metric]:
        """The metrics once ``condition`` holds for them; fails after WAIT_TIMEOUT."""
        deadline = time.monotonic() + WAIT_TIMEOUT
        with self._received:
            while True:
                metrics = [parse(datagram) for datagram in self._datagrams]
                if condition(metrics):
                    return metrics
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"not within {WAIT_TIMEOUT} s: {what}; got {metrics}")
                self._received.wait(left)

    def close(self) -> None:
        # An empty datagram to itself wakes the thread, which then sees it should stop.
        self._stopping = True
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as waker:
            waker.sendto(b"", self._socket.getsockname())
        self._thread.join(WAIT_TIMEOUT)
        self._socket.close()


@contextmanager
def statsd_listener() -> Iterator[StatsdListener]:
    listener = StatsdListener()
    try:
        yield listener
    finally:
        listener.close()


def unprefixed(metrics: list[Metric], prefix: str) -> list[Metric]:
    """The metrics with ``prefix`` taken off their names (each must carry it)."""
    assert all(metric.name.startswith(prefix) for metric in metrics), metrics
    return [metric._replace(name=metric.name.removeprefix(prefix)) for metric in metrics]


def count(metrics: list[Metric], name: str) -> float:
    """The total of the counter ``name``."""
    return sum(metric.value for metric in metrics if metric.name == name and metric.type == "c")


def summary(metrics: list[Metric]) -> dict[tuple[str, str], float | None]:
    """What two loggers must agree on: each (name, type), a counter's total and the
    number of timings; a gauge's values depend on when the master looked."""
    totals: dict[tuple[str, str], float | None] = {}
    for metric in metrics:
        key = (metric.name, metric.type)
        if metric.type == "c":
            totals[key] = (totals.get(key) or 0) + metric.value
        elif metric.type == "ms":
            totals[key] = (totals.get(key) or 0) + 1
        else:
            totals[key] = None
    return totals


def serve(
    tmp_path: Path,
    logger_class: str,
    listener: StatsdListener,
    exchanges: list[Exchange],
    *options: str,
) -> tuple[list[Metric], float, float]:
    """Serve ``exchanges`` by a gunicorn sending its metrics to ``listener``; stop it
    once the listener has every request's counter and the worker gauge.  The metrics,
    and the wall-clock times that bracket the traffic."""

    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "--logger-class", logger_class,
            "-b", f"{LOOPBACK}:{port}", "-w", "2", "-k", "gthread", "--graceful-timeout", "10",
            "--log-level", "warning", "--statsd-host", listener.address, *options, APP,
        ]  # fmt: skip

    output = tmp_path / f"{logger_class}.out"
    environment = {"TZ": SERVER_TZ, **POLICY_ENVIRONMENT}
    with running_server(command, environment, output) as server:
        started = time.time()
        send_exchanges(server.port, exchanges)
        finished = time.time()

        # gunicorn sends a request's metrics after its response, so wait for them.
        def everything_sent(metrics: list[Metric]) -> bool:
            names = {metric.name.rpartition("gunicorn.")[2] for metric in metrics}
            requests = sum(metric.name.endswith("gunicorn.requests") for metric in metrics)
            return requests == len(exchanges) and "workers" in names

        listener.wait_for(everything_sent, f"{len(exchanges)} requests and the worker gauge")
        stop_gracefully(server)
    return listener.metrics(), started, finished


def check_request_metrics(metrics: list[Metric], exchanges: list[Exchange]) -> None:
    """One request counter, one duration timer and one status counter per request, and
    gunicorn's exception counter for each request whose application raised."""
    requests = [metric for metric in metrics if metric.name == "gunicorn.requests"]
    assert len(requests) == len(exchanges)
    assert {(metric.value, metric.type, metric.rate) for metric in requests} == {(1, "c", "1.0")}
    durations = [metric for metric in metrics if metric.name == "gunicorn.request.duration"]
    assert len(durations) == len(exchanges)
    assert {metric.type for metric in durations} == {"ms"}
    assert status_counts(metrics) == Counter(exchange.status for exchange in exchanges)
    raised = sum(exchange.path == b"/raise" for exchange in exchanges)
    assert raised > 0
    assert count(metrics, "gunicorn.log.exception") == raised
    gauges = [metric for metric in metrics if metric.name == "gunicorn.workers"]
    assert gauges, "the master's worker gauge"
    assert all(metric.type == "g" for metric in gauges)
    assert gauges[-1].value == 2


def status_counts(metrics: list[Metric]) -> Counter[int]:
    statuses: Counter[int] = Counter()
    for metric in metrics:
        if metric.name.startswith("gunicorn.request.status."):
            statuses[int(metric.name.rpartition(".")[2])] += int(metric.value)
    return statuses


@pytest.mark.parametrize(
    ("options", "prefix", "tags"),
    [
        ([], "", None),
        (
            ["--statsd-prefix", "web.app", "--dogstatsd-tags", "env:test,team:a"],
            "web.app.",
            "env:test,team:a",
        ),
    ],
    ids=["plain", "prefix-and-tags"],
)
def test_the_metrics_are_those_gunicorns_own_logger_sends(
    tmp_path: Path, options: list[str], prefix: str, tags: str | None
) -> None:
    """The same requests give the same metric names, types and counts under boundlog's
    logger class as under gunicorn's own, with the prefix and tags; and the access log
    still has its lines, written by boundlog."""
    exchanges = build_exchanges(REQUESTS, seed=15)
    log_path = tmp_path / "access.log"
    with statsd_listener() as listener:
        received, started, finished = serve(
            tmp_path, BOUNDLOG, listener, exchanges, "--access-logfile", str(log_path), *options
        )
    check_log(read_log_lines(log_path), exchanges, "combined", started, finished)
    assert {metric.tags for metric in received} == {tags}
    ours = unprefixed(received, prefix)
    check_request_metrics(ours, exchanges)

    gunicorn_log = tmp_path / "gunicorn-access.log"
    with statsd_listener() as listener:
        received, _, _ = serve(
            tmp_path, GUNICORN, listener, exchanges, "--access-logfile", str(gunicorn_log), *options
        )
    assert len(read_log_lines(gunicorn_log)) == REQUESTS, "gunicorn logs the health checks"
    assert {metric.tags for metric in received} == {tags}
    theirs = unprefixed(received, prefix)
    check_request_metrics(theirs, exchanges)
    assert summary(ours) == summary(theirs)


def test_without_an_access_log_the_metrics_are_still_sent(tmp_path: Path) -> None:
    """As gunicorn's own logger does, the logger class sends every request's metrics
    when there is no access log (and writes none)."""
    exchanges = build_exchanges(REQUESTS, seed=16)
    with statsd_listener() as listener:
        received, _, _ = serve(tmp_path, BOUNDLOG, listener, exchanges)
    check_request_metrics(received, exchanges)
    assert sorted(path.name for path in tmp_path.iterdir()) == [f"{BOUNDLOG}.out"]


# -- in process ---------------------------------------------------------------------------


class _Response:
    def __init__(self, status: str | int | None) -> None:
        self.status = status
        self.sent = 5
        self.headers: list[tuple[str, str]] = []


ENVIRON = {
    "REQUEST_METHOD": "GET",
    "RAW_URI": "/bytes/5?n=1",
    "PATH_INFO": "/bytes/5",
    "QUERY_STRING": "n=1",
    "SERVER_PROTOCOL": "HTTP/1.1",
    "REMOTE_ADDR": "127.0.0.1",
}


def statsd_config(address: str, access_log: Path | None, **settings: str) -> Any:
    cfg = Config()
    cfg.set("statsd_host", address)
    if access_log is not None:
        cfg.set("accesslog", str(access_log))
    for name, value in settings.items():
        cfg.set(name, value)
    return cfg


@contextmanager
def closing_logger(logger: Any) -> Iterator[Any]:
    try:
        yield logger
    finally:
        if getattr(logger, "boundlog", None) is not None:
            logger.boundlog.close()
        sock = getattr(logger, "sock", None)
        if sock is not None:
            sock.close()


def test_each_request_sends_the_datagrams_of_gunicorns_statsd_logger(tmp_path: Path) -> None:
    """Byte for byte what the installed gunicorn's Statsd sends for the same request, in
    the same order, while boundlog takes the record."""
    requests = [
        ("200 OK", timedelta(microseconds=1500)),
        ("404 Not Found", timedelta(seconds=2, microseconds=7)),
        ("299 Custom", timedelta(0)),
        (503, timedelta(milliseconds=40)),
    ]
    settings = {"statsd_prefix": "web", "dogstatsd_tags": "env:test"}
    with statsd_listener() as listener:
        # gunicorn's access line is no part of its metrics (and a second logger in one
        # process would take over the first one's handlers).
        cfg = statsd_config(listener.address, None, **settings)
        with closing_logger(Statsd(cfg)) as gunicorns:
            for status, elapsed in requests:
                gunicorns.access(_Response(status), [], ENVIRON, elapsed)
            expected = listener.wait_for(lambda got: len(got) == 3 * len(requests), "gunicorn's")
        cfg = statsd_config(listener.address, tmp_path / "access.log", **settings)
        with closing_logger(Logger(cfg)) as ours:
            assert isinstance(ours, Logger)
            assert isinstance(ours, Statsd)
            assert ours.boundlog is not None
            for status, elapsed in requests:
                ours.access(_Response(status), [], ENVIRON, elapsed)
            received = listener.wait_for(lambda got: len(got) == 6 * len(requests), "ours")
            stats = ours.boundlog.close()
    assert received[len(expected) :] == expected
    assert expected[0] == Metric("web.gunicorn.request.duration", 1.5, "ms", None, "env:test")
    assert stats.written == len(requests)
    assert len(read_log_lines(tmp_path / "access.log")) == len(requests)


def test_a_request_the_application_failed_counts_as_the_500_it_is_logged_as(
    tmp_path: Path,
) -> None:
    """A response with no status (the application raised before start_response) is
    logged as 500 and counted as 500 (gunicorn's own logger would raise there)."""
    with statsd_listener() as listener:
        cfg = statsd_config(listener.address, tmp_path / "access.log")
        with closing_logger(Logger(cfg)) as logger:
            logger.access(_Response(None), [], ENVIRON, timedelta(milliseconds=3))
            received = listener.wait_for(lambda got: len(got) == 3, "the request's metrics")
    assert [metric.name for metric in received] == [
        "gunicorn.request.duration",
        "gunicorn.requests",
        "gunicorn.request.status.500",
    ]


@pytest.mark.parametrize(
    ("status", "code"),
    [("200 OK", 200), ("299 Custom", 299), (b"201 Created", 201), (404, 404), (None, 500)],
)
def test_the_status_counter_is_named_by_the_code_of_any_status_a_worker_hands_over(
    status: str | bytes | int | None, code: int
) -> None:
    assert _status_code(status) == code


def test_log_levels_are_counted_as_gunicorns_statsd_logger_counts_them(tmp_path: Path) -> None:
    with statsd_listener() as listener:
        cfg = statsd_config(listener.address, tmp_path / "access.log", loglevel="critical")
        with closing_logger(Logger(cfg)) as logger:
            logger.warning("w")
            logger.error("e")
            logger.critical("c")
            logger.info("not counted")
            logger.debug(
                "gauge", extra={"metric": "gunicorn.workers", "value": 3, "mtype": "gauge"}
            )
            received = listener.wait_for(lambda got: len(got) == 4, "the counters and the gauge")
    assert [(metric.name, metric.value, metric.type) for metric in received] == [
        ("gunicorn.log.warning", 1, "c"),
        ("gunicorn.log.error", 1, "c"),
        ("gunicorn.log.critical", 1, "c"),
        ("gunicorn.workers", 3, "g"),
    ]


def test_a_statsd_server_that_is_not_there_changes_nothing_for_the_requests(
    tmp_path: Path,
) -> None:
    """Sending fails (the port refuses) as silently as gunicorn's: the requests are
    logged all the same, and no exception reaches the worker."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind((LOOPBACK, 0))
        address = "%s:%d" % probe.getsockname()
    cfg = statsd_config(address, tmp_path / "access.log")
    with closing_logger(Logger(cfg)) as logger:
        for _ in range(5):
            logger.access(_Response("200 OK"), [], ENVIRON, timedelta(milliseconds=1))
        stats = logger.boundlog.close()
    assert stats.written == 5
    assert len(read_log_lines(tmp_path / "access.log")) == 5


def test_without_a_statsd_host_the_logger_class_is_unchanged() -> None:
    """No --statsd-host: the instance is of the class gunicorn names, whose request
    path is the same method as without this feature."""
    logger = Logger(Config())
    assert type(logger) is Logger
    assert not isinstance(logger, Statsd)
    assert type(logger).access is Logger.access


class UtcLogger(Logger):  # type: ignore[misc]
    def log_options(self, cfg: Any) -> dict[str, Any]:
        return {**super().log_options(cfg), "utc": True}


def test_a_subclass_is_combined_once_and_keeps_its_overrides(tmp_path: Path) -> None:
    """A subclass of the logger class gets the metrics too, through one combined class
    that keeps its methods; a class that already is a Statsd logger is used as it is."""
    with statsd_listener() as listener:
        cfg = statsd_config(listener.address, None)
        first, second = UtcLogger(cfg), UtcLogger(cfg)
        with closing_logger(first), closing_logger(second):
            assert type(first) is type(second)
            assert isinstance(first, UtcLogger)
            assert isinstance(first, Statsd)
            assert type(first).log_options is UtcLogger.log_options

            class Already(Logger, Statsd):  # type: ignore[misc]
                pass

            with closing_logger(Already(cfg)) as already:
                assert type(already) is Already
