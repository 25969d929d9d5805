"""``metrics="opentelemetry"`` and ``metrics=<a Meter>``: the log's counters as
OpenTelemetry observable instruments (src/boundlog/metrics/_otel.py), read by the SDK's own
``InMemoryMetricReader``.

What the reader collects equals ``stats()`` after a flush and after ``close()``, through
drops and a close that gives up on a stalled pipe; logs of one sink sum; a closed log
keeps its counts and is not kept alive; a forked child counts its own; the global
MeterProvider is used, set before the log or after; ``BOUNDLOG_METRICS=opentelemetry``
works under gunicorn, whose master builds the log before forking its worker.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import REGISTRY

from _helpers import stalled_fifo
from _records import make_record
from _servers import LOOPBACK, PYTHON, read_log_lines, running_server
from boundlog import AccessLog, ConfigurationError, Stats
from boundlog.metrics import _otel

DEADLINE = 60.0
Points = dict[tuple[str, tuple[tuple[str, Any], ...]], float]


class Otel:
    """A MeterProvider of its own with an in-memory reader, and a meter of it."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])
        self.meter = self.provider.get_meter("test")

    def collected(self) -> Points:
        return collected(self.reader)


@pytest.fixture
def otel() -> Iterator[Otel]:
    # Each test gets new instruments, counting from nothing.
    otel = Otel()
    yield otel
    otel.provider.shutdown()


def collected(reader: InMemoryMetricReader) -> Points:
    """Each data point the reader collects now: (name, sorted attributes) -> value."""
    points: Points = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, tuple(sorted((point.attributes or {}).items())))
                    points[key] = point.value  # type: ignore[union-attr]
    return points


def expected(sink: str, stats: Stats, capacity: int) -> Points:
    """The points a sink's counts ``stats`` and ``capacity`` are collected as."""
    points: Points = {}
    for name, field, _, _ in _otel.COUNTERS:
        points[(name, ((_otel.SINK, sink),))] = getattr(stats, field)
    for outcome in _otel.OUTCOMES:
        key = (_otel.PROCESSED, tuple(sorted({_otel.SINK: sink, _otel.OUTCOME: outcome}.items())))
        points[key] = getattr(stats, outcome)
    points[(_otel.QUEUE_SIZE, ((_otel.SINK, sink),))] = stats.queued
    points[(_otel.QUEUE_CAPACITY, ((_otel.SINK, sink),))] = capacity
    return points


def test_the_instruments_follow_the_counters_after_flush_and_close(
    tmp_path: Path, otel: Otel
) -> None:
    sink = str(tmp_path / "access.log")
    log = AccessLog(sink, metrics=otel.meter, max_queue=100, skip_paths=["/healthz"])
    for index in range(10):
        log.submit(make_record(path=b"/healthz" if index % 5 == 0 else b"/item"))
    assert log.flush(timeout=10)
    stats = log.stats()
    assert (stats.written, stats.filtered, stats.queued) == (8, 2, 0)
    assert otel.collected() == expected(sink, stats, 100)
    log.submit(make_record())
    final = log.close()
    assert final.written == 9
    # A closed log's counts stay; its queue is gone, and so is its capacity.
    assert otel.collected() == expected(sink, final, 0)
    assert otel.collected() == expected(sink, final, 0)  # and stay at every collection


def test_the_instruments_follow_drops_and_a_close_that_gives_up(tmp_path: Path, otel: Otel) -> None:
    """Behind a stalled pipe: the queue fills, the rest drops, close() fails the rest."""
    with stalled_fifo(tmp_path) as fifo:
        log = AccessLog(str(fifo), metrics=otel.meter, max_queue=50, flush_interval=0)
        for _ in range(2000):
            log.submit(make_record())
        during = otel.collected()
        stats = log.close(timeout=0.5)
    assert stats.submitted == 2000
    assert stats.dropped > 0
    assert stats.failed > 0
    assert otel.collected() == expected(str(fifo), stats, 0)
    # While the log was stalled, its queue showed, and nothing had gone backwards since.
    queue_key = (_otel.QUEUE_SIZE, ((_otel.SINK, str(fifo)),))
    capacity_key = (_otel.QUEUE_CAPACITY, ((_otel.SINK, str(fifo)),))
    assert during[capacity_key] == 50
    assert 0 <= during[queue_key] <= 50
    after = otel.collected()
    for key, value in during.items():
        if key[0] not in (_otel.QUEUE_SIZE, _otel.QUEUE_CAPACITY):
            assert after[key] >= value, key


class _NamedFile:
    """A sink object whose name is a URL with credentials, as a network sink's could be."""

    def __init__(self, path: Path, name: str) -> None:
        self._file = path.open("ab")
        self.name = name

    def fileno(self) -> int:
        return self._file.fileno()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def test_the_sink_attribute_keeps_no_credentials(tmp_path: Path, otel: Otel) -> None:
    target = _NamedFile(tmp_path / "access.log", "https://user:secret@collector.example/in")
    try:
        with AccessLog(target, metrics=otel.meter) as log:  # type: ignore[arg-type]
            log.submit(make_record())
        sinks = {dict(attributes)[_otel.SINK] for _, attributes in otel.collected()}
        assert sinks == {"https://collector.example/in"}
        assert "secret" not in repr(otel.collected())
    finally:
        target.close()


def test_two_logs_of_one_sink_sum_and_a_closed_one_keeps_its_counts(
    tmp_path: Path, otel: Otel
) -> None:
    sink = str(tmp_path / "access.log")
    other = str(tmp_path / "other.log")
    first = AccessLog(sink, metrics=otel.meter, max_queue=100)
    second = AccessLog(sink, metrics=otel.meter, max_queue=200)
    apart = AccessLog(other, metrics=otel.meter, max_queue=300)
    for _ in range(3):
        first.submit(make_record())
    for _ in range(4):
        second.submit(make_record())
    apart.submit(make_record())
    for log in (first, second, apart):
        assert log.flush(timeout=10)
    summed = Stats(*(a + b for a, b in zip(first.stats(), second.stats(), strict=True)))
    assert summed.written == 7
    assert otel.collected() == expected(sink, summed, 300) | expected(other, apart.stats(), 300)
    first_final = first.close()
    second.submit(make_record())
    assert second.flush(timeout=10)
    summed = Stats(*(a + b for a, b in zip(first_final, second.stats(), strict=True)))
    assert summed.written == 8
    assert otel.collected() == expected(sink, summed, 200) | expected(other, apart.stats(), 300)
    second.close()
    apart.close()


def test_many_logs_closed_are_not_kept_alive_and_their_counts_stay(
    tmp_path: Path, otel: Otel
) -> None:
    sink = str(tmp_path / "access.log")
    references = []
    for _ in range(50):
        log = AccessLog(sink, metrics=otel.meter)
        log.submit(make_record())
        log.close()
        references.append(weakref.ref(log))
        del log
    gc.collect()
    assert [reference for reference in references if reference() is not None] == []
    points = otel.collected()
    assert points[(_otel.PROCESSED, ((_otel.OUTCOME, "written"), (_otel.SINK, sink)))] == 50
    assert points[("boundlog.records.submitted", ((_otel.SINK, sink),))] == 50
    assert points[(_otel.QUEUE_CAPACITY, ((_otel.SINK, sink),))] == 0


def test_the_instruments_are_registered_once_per_meter(tmp_path: Path, otel: Otel) -> None:
    """The SDK would hand back the first instrument of a name, and drop new callbacks."""
    with AccessLog(str(tmp_path / "a.log"), metrics=otel.meter) as first:
        first.submit(make_record())
    with AccessLog(str(tmp_path / "b.log"), metrics=otel.meter) as second:
        second.submit(make_record())
        second.submit(make_record())
    data = otel.reader.get_metrics_data()
    assert data is not None
    names = [metric.name for metric in data.resource_metrics[0].scope_metrics[0].metrics]
    assert sorted(names) == sorted(
        [name for name, _, _, _ in _otel.COUNTERS]
        + [_otel.PROCESSED, _otel.QUEUE_SIZE, _otel.QUEUE_CAPACITY]
    )
    written = {
        dict(attributes)[_otel.SINK]: value
        for (name, attributes), value in collected(otel.reader).items()
        if name == _otel.PROCESSED and dict(attributes)[_otel.OUTCOME] == "written"
    }
    assert written == {str(tmp_path / "a.log"): 1, str(tmp_path / "b.log"): 2}


def test_the_units_and_kinds(otel: Otel) -> None:
    AccessLog(os.devnull, metrics=otel.meter).close()
    data = otel.reader.get_metrics_data()
    assert data is not None
    metrics = {m.name: m for m in data.resource_metrics[0].scope_metrics[0].metrics}
    assert metrics[_otel.PROCESSED].unit == "{record}"
    assert metrics["boundlog.sink.bytes"].unit == "By"
    assert metrics[_otel.PROCESSED].data.is_monotonic  # type: ignore[union-attr]
    assert not metrics[_otel.QUEUE_SIZE].data.is_monotonic  # type: ignore[union-attr]
    assert not metrics[_otel.QUEUE_CAPACITY].data.is_monotonic  # type: ignore[union-attr]


@pytest.mark.parametrize("value", [True, "prometheus"])
def test_true_and_prometheus_stay_prometheus(tmp_path: Path, value: object) -> None:
    sink = str(tmp_path / "access.log")
    with AccessLog(sink, metrics=value) as log:  # type: ignore[arg-type]
        log.submit(make_record())
    assert REGISTRY.get_sample_value("boundlog_records_written_total", {"sink": sink}) == 1


@pytest.mark.parametrize("value", ["yes", "otel", 1, 0, None, "", object()])
def test_any_other_value_is_refused_naming_the_valid_ones(tmp_path: Path, value: object) -> None:
    sink = tmp_path / "access.log"
    message = (
        "metrics must be False, True, 'prometheus', 'opentelemetry' or an "
        "opentelemetry.metrics.Meter, not "
    )
    with pytest.raises(ConfigurationError, match="^" + message.replace(".", r"\.")):
        AccessLog(str(sink), metrics=value)  # type: ignore[arg-type]
    assert not sink.exists()  # checked before the sink is opened


def _run(script: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *arguments],
        capture_output=True, text=True, timeout=DEADLINE, check=False,
    )  # fmt: skip


def test_without_opentelemetry_the_error_names_the_extra(tmp_path: Path) -> None:
    sink = tmp_path / "access.log"
    script = """
        import sys
        sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
        from boundlog import AccessLog, ConfigurationError
        try:
            AccessLog(sys.argv[1], metrics="opentelemetry")
        except ConfigurationError as error:
            print(error)
        try:
            AccessLog(sys.argv[1], metrics=object())
        except ConfigurationError as error:
            print(error)
        AccessLog("/dev/null", metrics=False).close()  # nothing else needs it
    """
    result = _run(script, str(sink))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "metrics='opentelemetry' needs opentelemetry-api, which is not installed: "
        "pip install 'boundlog[opentelemetry]'"
    )
    assert lines[1].startswith("metrics must be False, True, 'prometheus', 'opentelemetry'")
    assert not sink.exists()


def test_opentelemetry_uses_the_global_meter_provider_set_before_or_after(
    tmp_path: Path,
) -> None:
    """Before a provider is set, the API's proxy meter, which follows the one set later."""
    script = """
        import json, sys
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from boundlog import AccessLog, Record

        early = AccessLog(sys.argv[1], metrics="opentelemetry")
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        late = AccessLog(sys.argv[2], metrics="opentelemetry")
        record = Record(0.0, 0.0, "127.0.0.1", "GET", b"/", b"", "HTTP/1.1", 200, 2, [], [])
        early.submit(record)
        late.submit(record)
        late.submit(record)
        early.close()
        late.close()
        written = {}
        for scope in reader.get_metrics_data().resource_metrics[0].scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    if metric.name == "boundlog.records.processed" and (
                        point.attributes["boundlog.outcome"] == "written"
                    ):
                        written[point.attributes["boundlog.sink"]] = point.value
            print(json.dumps([scope.scope.name, scope.scope.version, written]))
    """
    early, late = str(tmp_path / "early.log"), str(tmp_path / "late.log")
    result = _run(script, early, late)
    assert result.returncode == 0, result.stderr
    from boundlog import __version__

    assert json.loads(result.stdout) == ["boundlog", __version__, {early: 1, late: 2}]


def test_a_forked_child_counts_its_own(tmp_path: Path) -> None:
    """As under gunicorn --preload: the child's log counts from zero, without the
    parent's closed logs; the parent's counts go on."""
    script = """
        import json, os, sys
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from boundlog import AccessLog, Record

        def written(reader):
            for scope in reader.get_metrics_data().resource_metrics[0].scope_metrics:
                for metric in scope.metrics:
                    if metric.name == "boundlog.records.processed":
                        return sum(
                            point.value for point in metric.data.data_points
                            if point.attributes["boundlog.outcome"] == "written"
                        )

        reader = InMemoryMetricReader()
        meter = MeterProvider(metric_readers=[reader]).get_meter("test")
        record = Record(0.0, 0.0, "127.0.0.1", "GET", b"/", b"", "HTTP/1.1", 200, 2, [], [])
        closed = AccessLog(sys.argv[1], metrics=meter)
        for _ in range(5):
            closed.submit(record)
        closed.close()
        log = AccessLog(sys.argv[1], metrics=meter)
        for _ in range(3):
            log.submit(record)
        assert log.flush(timeout=10)
        before = written(reader)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            log.submit(record)
            log.submit(record)
            assert log.flush(timeout=10)
            os.write(write_end, json.dumps(written(reader)).encode())
            os._exit(0)
        os.close(write_end)
        child = json.loads(os.read(read_end, 1000))
        assert os.waitpid(pid, 0)[1] == 0
        log.submit(record)
        log.close()
        print(json.dumps([before, child, written(reader)]))
    """
    result = _run(script, str(tmp_path / "access.log"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [8, 2, 9]


@pytest.mark.parametrize(
    ("text", "option"),
    [
        ("1", True),
        ("true", True),
        ("prometheus", "prometheus"),
        ("OpenTelemetry", "opentelemetry"),
        ("0", False),
        ("off", False),
    ],
)
def test_boundlog_metrics_chooses_the_metrics(
    monkeypatch: pytest.MonkeyPatch, text: str, option: object
) -> None:
    from gunicorn.config import Config  # type: ignore[import-untyped]

    from boundlog.gunicorn import Logger

    for name in [name for name in os.environ if name.startswith("BOUNDLOG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BOUNDLOG_METRICS", text)
    cfg = Config()
    assert Logger(cfg).log_options(cfg) == {"metrics": option}


def test_gunicorn_with_boundlog_metrics_opentelemetry(tmp_path: Path) -> None:
    """The master builds the log (a proxy meter); the worker sets the provider and counts."""
    sink = tmp_path / "access.log"
    environment = {"BOUNDLOG_METRICS": "opentelemetry", "BOUNDLOG_SKIP_PATHS": "/otel"}

    def gunicorn(port: int) -> list[str]:
        return [PYTHON, "-m", "gunicorn", "--bind", f"{LOOPBACK}:{port}", "--workers", "1",
                "--logger-class", "boundlog.gunicorn.Logger", "--access-logfile", str(sink),
                "tests.apps.otel_app:app"]  # fmt: skip

    def written(client: httpx.Client) -> dict[str, float]:
        return {
            point["attributes"][_otel.OUTCOME]: point["value"]
            for point in client.get("/otel").json()
            if point["name"] == _otel.PROCESSED and point["attributes"][_otel.SINK] == str(sink)
        }

    requests = 20
    with (
        running_server(gunicorn, environment, tmp_path / "gunicorn.out") as server,
        httpx.Client(base_url=server.base_url, timeout=10) as client,
    ):
        for index in range(requests):
            assert client.get(f"/item/{index}").status_code == 200
        deadline = time.monotonic() + DEADLINE
        # An /otel request's own record is filtered after its answer: the first answer
        # that sees every item written may see no /otel record filtered yet.
        while (outcomes := written(client)).get("written") != requests or not outcomes.get(
            "filtered"
        ):
            assert time.monotonic() < deadline, outcomes
            time.sleep(0.05)
    # Each /otel request was filtered; none dropped or failed.
    assert outcomes["dropped"] == outcomes["failed"] == 0
    assert len(read_log_lines(sink)) == requests
