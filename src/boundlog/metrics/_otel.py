"""The log's counters as OpenTelemetry instruments (``AccessLog(..., metrics=...)``).

``metrics="opentelemetry"`` uses the global MeterProvider's ``boundlog`` meter,
``metrics=<a Meter>`` that meter (opentelemetry-api, the ``opentelemetry`` extra).
Every instrument is *observable*: its callback reads the logs' counts when the SDK
collects (a PeriodicExportingMetricReader's thread, a pull exporter's scrape), so there
is no thread of boundlog's own, and the request path and the writer pay nothing.

The names follow the SDK's own ``otel.sdk.processor.log.*`` conventions
(https://opentelemetry.io/docs/specs/semconv/otel/sdk-metrics/), boundlog being a log
record processor with a queue of its own:

=============================  ===================  ========  =============================
instrument                     kind                 unit      ``Stats``
=============================  ===================  ========  =============================
``boundlog.records.submitted``  counter             {record}  ``submitted``
``boundlog.records.processed``  counter             {record}  ``written``, ``filtered``,
                                                              ``dropped``, ``failed``, by
                                                              ``boundlog.outcome``
``boundlog.queue.size``        up-down counter      {record}  ``queued``
``boundlog.queue.capacity``    up-down counter      {record}  ``max_queue``
``boundlog.sink.errors``       counter              {error}   ``write_errors``
``boundlog.sink.bytes``        counter              By        ``bytes_written``
``boundlog.sink.batches``      counter              {batch}   ``batches``
=============================  ===================  ========  =============================

Why one ``processed`` counter with an outcome rather than a counter per outcome: it is
the shape of ``otel.sdk.processor.log.processed`` (a record is processed once its
processing has finished, whatever the outcome; records still queued are not), so that
a dashboard built for the SDK's processor reads boundlog's the same way, and so that
``sum(processed) + queue.size`` is ``submitted`` (up to the batch the writer holds),
and the loss rate is one query (``boundlog.outcome`` in ``dropped``, ``failed``).  The
outcome is an attribute of boundlog's own, ``boundlog.outcome``, not the convention's
``error.type``: that must name the cause of a failure, which boundlog's counts do not
carry (``dropped`` is a full queue, a closed log or a submitter that stopped waiting;
``failed`` is the sink, the format or a ``close()`` that gave up), and a ``filtered``
record is no failure at all.  The queue instruments are up-down counters, as the
convention's ``queue.size`` and ``queue.capacity`` are.

Every observation has a ``boundlog.sink`` attribute: the sink's name as ``Stats`` users
see it, without the credentials a URL may hold (``_metrics.sink_label``).  Logs with the
same sink on the same meter sum.

The SDK refuses a second instrument of a name on a meter (it hands back the first, and
drops the new callbacks), so each meter gets the instruments once, with callbacks that
read a ``_Registry`` of its logs.  The registry holds an open log by a weak reference to
its snapshot method only, and ``close()`` moves the log's final counts into totals kept
per sink: a closed log is forgotten (many logs created and closed leak nothing) and its
counts stay, so cumulative counters never go backwards.  A forked child (gunicorn
``--preload``) starts its own counts: its logs count from zero again
(``AccessLog._restart_after_fork``), and the totals of logs the parent closed are the
parent's.
"""

from __future__ import annotations

import importlib
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._errors import ConfigurationError
from .._version import __version__
from ._metrics import sink_label
from ._stats import Stats

#: The meter's name for ``metrics="opentelemetry"`` (``get_meter(METER_NAME, version)``).
METER_NAME = "boundlog"
#: The attribute naming the sink, and the one naming a processed record's outcome.
SINK = "boundlog.sink"
OUTCOME = "boundlog.outcome"
#: The outcomes of ``boundlog.records.processed``: each is the Stats field of its name.
OUTCOMES = ("written", "filtered", "dropped", "failed")
#: The counters besides ``processed``: name, Stats field, unit, description.
COUNTERS = (
    ("boundlog.records.submitted", "submitted", "{record}", "Records handed to the access log."),
    ("boundlog.sink.errors", "write_errors", "{error}", "Writes to the sink that failed."),
    ("boundlog.sink.bytes", "bytes_written", "By", "Bytes written to the sink."),
    ("boundlog.sink.batches", "batches", "{batch}", "Batches written to the sink."),
)
PROCESSED = "boundlog.records.processed"
QUEUE_SIZE = "boundlog.queue.size"
QUEUE_CAPACITY = "boundlog.queue.capacity"
#: What ``metrics`` may be, for the errors.
CHOICES = "False, True, 'prometheus', 'opentelemetry' or an opentelemetry.metrics.Meter"


def require_api() -> Any:
    """``opentelemetry.metrics``, or a ConfigurationError naming the extra that installs it."""
    try:
        return importlib.import_module("opentelemetry.metrics")
    except ImportError as error:
        raise ConfigurationError(
            "metrics='opentelemetry' needs opentelemetry-api, which is not installed: "
            "pip install 'boundlog[opentelemetry]'"
        ) from error


def metrics_option(value: object) -> tuple[bool, Any]:
    """What ``metrics=value`` asks for: (Prometheus?, the OpenTelemetry meter or None)."""
    if value is False:
        return False, None
    if value is True or value == "prometheus":
        return True, None
    meter = None
    if value == "opentelemetry":
        meter = _global_meter(require_api())
    elif not isinstance(value, str | bool | int | float | None):
        try:
            api = importlib.import_module("opentelemetry.metrics")
        except ImportError:
            api = None
        if api is not None and isinstance(value, api.Meter):
            meter = value
    if meter is None:
        raise ConfigurationError(f"metrics must be {CHOICES}, not {value!r}")
    # The instruments, now: before the log opens its sink, which a meter that raises
    # would otherwise leave open.
    _registry(meter)
    return False, meter


_global_lock = threading.Lock()
_global: list[Any] = []


def _global_meter(api: Any) -> Any:
    # One meter for every log of the process: without a MeterProvider set yet, the API
    # hands out a new proxy meter each call, and each would register the instruments
    # again on the real meter once one is set.  A proxy follows the provider set later.
    with _global_lock:
        if not _global:
            _global.append(api.get_meter(METER_NAME, __version__))
        return _global[0]


class _Registry:
    """One meter's logs: the open ones by weak reference, the closed ones' totals."""

    def __init__(self, meter: Any) -> None:
        self.lock = threading.Lock()
        # Each open log: its sink label, max_queue, and a weak reference to its snapshot.
        self.open: dict[int, tuple[str, int, weakref.WeakMethod[Callable[[], Stats]]]] = {}
        # The final counts of the closed logs, summed by sink label.
        self.closed: dict[str, Stats] = {}
        self._next = 0
        for name, field, unit, text in COUNTERS:
            meter.create_observable_counter(
                name, [self._counter(field)], unit=unit, description=text
            )
        meter.create_observable_counter(
            PROCESSED,
            [self._processed],
            unit="{record}",
            description="Records the log has finished with, by outcome "
            "(written, filtered, dropped, failed).",
        )
        meter.create_observable_up_down_counter(
            QUEUE_SIZE, [self._queue_size], unit="{record}", description="Records in the queue."
        )
        meter.create_observable_up_down_counter(
            QUEUE_CAPACITY,
            [self._queue_capacity],
            unit="{record}",
            description="Records the queue holds at most (max_queue).",
        )

    def add(self, label: str, capacity: int, snapshot: Callable[[], Stats]) -> int:
        with self.lock:
            key = self._next
            self._next += 1
            self.open[key] = (label, capacity, weakref.WeakMethod(snapshot))
            return key

    def retire(self, key: int, final: Stats) -> None:
        with self.lock:
            label = self.open.pop(key)[0]  # once: close() retires a log once
            before = self.closed.get(label)
            self.closed[label] = final if before is None else _sum(before, final)

    def restart_after_fork(self) -> None:
        # The parent may have been collecting: its lock, and its closed logs, are its own.
        self.lock = threading.Lock()
        self.closed.clear()

    def _totals(self) -> tuple[dict[str, Stats], dict[str, int]]:
        """Counts by sink label, open and closed logs together; capacities of open ones."""
        with self.lock:
            totals = dict(self.closed)
            capacities: dict[str, int] = dict.fromkeys(totals, 0)
            for key, (label, capacity, reference) in list(self.open.items()):
                snapshot = reference()
                if snapshot is None:  # a log that never started (its constructor failed)
                    del self.open[key]
                    continue
                stats = snapshot()
                before = totals.get(label)
                totals[label] = stats if before is None else _sum(before, stats)
                capacities[label] = capacities.get(label, 0) + capacity
            return totals, capacities

    def _counter(self, field: str) -> Callable[[Any], Iterable[Any]]:
        def observe(options: Any) -> Iterator[Any]:
            observation = _observation()
            for label, stats in self._totals()[0].items():
                yield observation(getattr(stats, field), {SINK: label})

        return observe

    def _processed(self, options: Any) -> Iterator[Any]:
        observation = _observation()
        for label, stats in self._totals()[0].items():
            for outcome in OUTCOMES:
                yield observation(getattr(stats, outcome), {SINK: label, OUTCOME: outcome})

    def _queue_size(self, options: Any) -> Iterator[Any]:
        observation = _observation()
        for label, stats in self._totals()[0].items():
            yield observation(stats.queued, {SINK: label})

    def _queue_capacity(self, options: Any) -> Iterator[Any]:
        observation = _observation()
        for label, capacity in self._totals()[1].items():
            yield observation(capacity, {SINK: label})


def _observation() -> Any:
    return importlib.import_module("opentelemetry.metrics").Observation


def _sum(one: Stats, other: Stats) -> Stats:
    summed = Stats(*(a + b for a, b in zip(one, other, strict=True)))
    # A closed log's queue is empty; its peak is no count to add up.
    return summed._replace(queue_peak=max(one.queue_peak, other.queue_peak))


_registries_lock = threading.Lock()
# Weak by meter (every opentelemetry.metrics.Meter can be referred to weakly): a meter,
# and its provider, thrown away take their registry along.
_registries: weakref.WeakKeyDictionary[Any, _Registry] = weakref.WeakKeyDictionary()


def _registry(meter: Any) -> _Registry:
    with _registries_lock:
        registry = _registries.get(meter)
        if registry is None:
            registry = _registries[meter] = _Registry(meter)
        return registry


class OpenTelemetryMetrics:
    """One log's place among its meter's instruments, labelled with its sink."""

    __slots__ = ("_key", "_registry")

    def __init__(
        self, meter: Any, sink_name: str, capacity: int, snapshot: Callable[[], Stats]
    ) -> None:
        self._registry = _registry(meter)
        self._key = self._registry.add(sink_label(sink_name), capacity, snapshot)

    def close(self, final: Stats) -> None:
        """The log is closed with these counts: keep them, and let go of the log."""
        self._registry.retire(self._key, final)


def _restart_in_child() -> None:
    # A thread of the parent may have held these at the fork.
    global _global_lock, _registries_lock
    _global_lock = threading.Lock()
    _registries_lock = threading.Lock()
    for registry in list(_registries.values()):
        registry.restart_after_fork()


os.register_at_fork(after_in_child=_restart_in_child)
