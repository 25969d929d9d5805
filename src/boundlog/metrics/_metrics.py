"""The log's counters as Prometheus metrics (``AccessLog(..., metrics=True)``).

The monitor thread (``_health``) brings them up to date once a second, even while the
writer is stuck in a write, and ``close()`` once more with the final counts: neither
the request path nor the writer pays for them.  They are prometheus_client's
own Counter and Gauge objects in its default registry, not a custom collector,
because its multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, what gunicorn and
uvicorn ``--workers`` need) reads only those: there each worker's values live in files
of their own and a scrape of any worker sums them, and a recycled worker's counts stay
in its file, so the totals never go backwards.

Each counter moves by the difference between the log's counts now and at the last
update: a forked child (gunicorn ``--preload``) starts its own log's counts at zero,
and so its differences, on top of whatever its registry held.

The ``sink`` label names the sink as ``Stats`` users see it, without the credentials
a URL may hold.
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .._errors import ConfigurationError
from ._stats import Stats

#: The counters: their names (prometheus_client adds ``_total``), the Stats field each
#: follows, and their help text.
COUNTERS = (
    ("boundlog_records_submitted", "submitted", "Records handed to the access log."),
    ("boundlog_records_written", "written", "Records written to the sink."),
    ("boundlog_records_dropped", "dropped", "Records refused because the queue was full."),
    ("boundlog_records_filtered", "filtered", "Records skipped by the log's filters."),
    ("boundlog_records_failed", "failed", "Records lost to a failed write or format."),
    ("boundlog_write_errors", "write_errors", "Writes to the sink that failed."),
    ("boundlog_bytes_written", "bytes_written", "Bytes written to the sink."),
    ("boundlog_batches", "batches", "Batches written to the sink."),
)
#: The gauges, summed over the live processes in multiprocess mode.
QUEUE_RECORDS = "boundlog_queue_records"
QUEUE_CAPACITY = "boundlog_queue_capacity"

_families: dict[str, Any] = {}
_families_lock = threading.Lock()


def require_client() -> Any:
    """prometheus_client, ready to keep our metrics, or a ConfigurationError saying why not.

    Called before the log opens its sink: a log that cannot be built must leave nothing
    behind, and prometheus_client would otherwise fail only when the first metric is
    made, with an OSError that names neither the variable nor the fix.
    """
    try:
        client = importlib.import_module("prometheus_client")
    except ImportError as error:
        raise ConfigurationError(
            "metrics=True needs prometheus_client, which is not installed: "
            "pip install 'boundlog[prometheus]'"
        ) from error
    check_multiprocess_dir(os.environ)
    return client


def check_multiprocess_dir(environ: Any) -> None:
    """A ConfigurationError if prometheus_client's multiprocess directory is unusable.

    In multiprocess mode each process keeps its values in files of that directory,
    which prometheus_client opens when a metric is made: a directory that is missing,
    not a directory, or not writable fails there.  Its old lower-case name is read as
    prometheus_client reads it, when the upper-case one is not set.
    """
    name = "PROMETHEUS_MULTIPROC_DIR"
    if name not in environ and "prometheus_multiproc_dir" in environ:
        name = "prometheus_multiproc_dir"
    directory = environ.get(name)
    if directory is None:
        return
    fix = (
        f"create it before the server starts (mkdir -p {directory!r}, and empty it at each "
        f"start), or unset {name} for a single process's metrics"
    )
    if not directory:
        raise ConfigurationError(f"metrics=True: {name} is set but empty: {fix}")
    if not os.path.isdir(directory):
        what = "does not exist" if not os.path.exists(directory) else "is not a directory"
        raise ConfigurationError(f"metrics=True: {name}={directory!r} {what}: {fix}")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigurationError(
            f"metrics=True: {name}={directory!r} is not writable by this process "
            f"(uid {os.getuid()}): prometheus_client keeps each process's values in files "
            "there; make it writable, or unset the variable"
        )


def _family(name: str, make: Any) -> Any:
    # Once per process: the registry refuses a second metric of a name.
    with _families_lock:
        family = _families.get(name)
        if family is None:
            family = _families[name] = make()
        return family


def _gauge(client: Any, name: str, text: str, label: str) -> Any:
    # Summed over the live processes in multiprocess mode (mark_process_dead on exit).
    return _family(
        name, lambda: client.Gauge(name, text, ["sink"], multiprocess_mode="livesum")
    ).labels(sink=label)


def sink_label(name: str) -> str:
    """The sink's name for the ``sink`` label: a URL without its user and password."""
    parts = urlsplit(name)
    if parts.scheme and parts.netloc and "@" in parts.netloc:
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=host))
    return name


class PrometheusMetrics:
    """One log's counters in prometheus_client's registry, labelled with its sink."""

    __slots__ = ("_capacity", "_capacity_gauge", "_counters", "_last", "_lock", "_queue")

    def __init__(self, sink_name: str, capacity: int) -> None:
        client = require_client()
        label = sink_label(sink_name)
        self._counters = [
            _family(name, lambda n=name, h=text: client.Counter(n, h, ["sink"])).labels(sink=label)
            for name, _, text in COUNTERS
        ]
        self._queue = _gauge(client, QUEUE_RECORDS, "Records waiting in the queue.", label)
        self._capacity_gauge = _gauge(
            client, QUEUE_CAPACITY, "Records the queue holds at most (max_queue).", label
        )
        self._capacity = capacity
        self._capacity_gauge.set(capacity)
        self._last = [0] * len(COUNTERS)
        # The monitor and close() may both update.
        self._lock = threading.Lock()

    def update(self, stats: Stats) -> None:
        """Move the metrics to ``stats``, the log's counts now."""
        with self._lock:
            for index, (counter, (_, field, _)) in enumerate(
                zip(self._counters, COUNTERS, strict=True)
            ):
                value = getattr(stats, field)
                if value > self._last[index]:
                    counter.inc(value - self._last[index])
                    self._last[index] = value
            self._queue.set(stats.queued)

    def serves_no_requests(self) -> None:
        """In a process that hands requests to others (gunicorn's master): its queue is
        no capacity of the server's, which the gauge sums over processes."""
        self._capacity_gauge.set(0)

    def restart_after_fork(self) -> None:
        """In a forked child, whose log counts from zero again."""
        self._lock = threading.Lock()
        self._last = [0] * len(COUNTERS)
        # In multiprocess mode the child's values start afresh, in a file of its own.
        self._capacity_gauge.set(self._capacity)
