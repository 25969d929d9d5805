"""``metrics=True``: the log's counters in Prometheus (src/boundlog/metrics/_metrics.py).

In one process they equal ``stats()`` once the writer has caught up (and after
``close()``, its final counts); a real Prometheus server scraping a real uvicorn app
sees ``boundlog_records_written_total`` reach the number of requests served; under
gunicorn with three workers in prometheus_client's multiprocess mode, every scrape,
whichever worker answers it, shows the sum of all of them.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from _helpers import BlockedPipe, stalled_fifo
from _records import make_record
from _servers import LOOPBACK, PYTHON, free_port, read_log_lines, running_server
from boundlog import AccessLog, ConfigurationError
from boundlog._options import DEFAULT_MAX_QUEUE
from boundlog.metrics import _metrics

PROMETHEUS = shutil.which("prometheus")
DEADLINE = 60.0


def _value(name: str, sink: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"sink": sink})


def test_the_metrics_follow_the_counters(tmp_path: Path) -> None:
    """Through drops behind a stalled pipe and a close() that gives up on it."""
    with stalled_fifo(tmp_path) as fifo:
        log = AccessLog(str(fifo), metrics=True, max_queue=50, flush_interval=0)
        # Nobody reads: the writer blocks in a write, the queue fills, the rest drops.
        for _ in range(2000):
            log.submit(make_record())
        stats = log.close(timeout=0.5)
    assert stats.submitted == 2000
    assert stats.dropped > 0
    assert stats.failed > 0
    for name, field, _ in _metrics.COUNTERS:
        assert _value(f"{name}_total", str(fifo)) == getattr(stats, field), name
    assert _value("boundlog_queue_capacity", str(fifo)) == 50


def test_the_monitor_brings_them_up_to_date_while_the_sink_is_stalled() -> None:
    """The writer is stuck in a write, and the drops still reach the metrics."""
    pipe = BlockedPipe()
    sink = f"file descriptor {pipe.write_fd}"
    try:
        log = AccessLog(pipe.write_fd, metrics=True, max_queue=10, flush_interval=0)
        # The writer takes the first record alone and blocks writing it: then the
        # queue holds 10 of the next 99 and refuses the rest.  (Submitted together,
        # the writer could wake to a batch of any size.)
        log.submit(make_record())
        deadline = time.monotonic() + DEADLINE
        while log.stats().queued:
            assert time.monotonic() < deadline, log.stats()
            time.sleep(0.01)
        for _ in range(99):
            log.submit(make_record())
        dropped = log.stats().dropped
        assert dropped == 89
        deadline = time.monotonic() + DEADLINE
        while _value("boundlog_records_dropped_total", sink) != dropped:
            assert time.monotonic() < deadline, _value("boundlog_records_dropped_total", sink)
            time.sleep(0.01)
        assert log.stats().written == 0  # still stuck: the writer did not update them
        assert _value("boundlog_queue_records", sink) == log.stats().queued
    finally:
        pipe.release()
        log.close()
        pipe.close()


def test_the_monitor_brings_them_up_to_date(tmp_path: Path) -> None:
    sink = str(tmp_path / "access.log")
    with AccessLog(sink, metrics=True) as log:
        for _ in range(10):
            log.submit(make_record())
        assert log.flush(timeout=10)
        # Within a second of the write.
        deadline = time.monotonic() + DEADLINE
        while _value("boundlog_records_written_total", sink) != 10:
            assert time.monotonic() < deadline, _value("boundlog_records_written_total", sink)
            time.sleep(0.01)
        assert _value("boundlog_bytes_written_total", sink) == log.stats().bytes_written


def test_the_sink_label_keeps_no_credentials() -> None:
    assert _metrics.sink_label("tcp://user:secret@10.0.0.5:514") == "tcp://10.0.0.5:514"
    assert _metrics.sink_label("/var/log/app/access.log") == "/var/log/app/access.log"
    assert _metrics.sink_label("stdout") == "stdout"


def test_without_prometheus_client_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.import_module

    def without_client(name: str, *args: Any) -> Any:
        if name == "prometheus_client":
            raise ImportError("No module named 'prometheus_client'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_client)
    sink = tmp_path / "access.log"
    with pytest.raises(ConfigurationError, match=r"pip install 'boundlog\[prometheus\]'"):
        AccessLog(str(sink), metrics=True)
    assert not sink.exists()  # checked before the sink is opened


def test_metrics_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="metrics"):
        AccessLog(str(tmp_path / "access.log"), metrics="yes")  # type: ignore[arg-type]


def _open_descriptors() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


@pytest.mark.parametrize("unusable", ["missing", "a file"])
def test_an_unusable_multiprocess_dir_is_refused_before_the_sink_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unusable: str
) -> None:
    """50 failed builds leave no descriptor and no sink file, and the error says what to do."""
    directory = tmp_path / "prometheus-multiproc"
    if unusable == "a file":
        directory.write_text("")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    sink = tmp_path / "access.log"
    before = _open_descriptors()
    for _ in range(50):
        with pytest.raises(ConfigurationError) as caught:
            AccessLog(str(sink), metrics=True)
    message = str(caught.value)
    assert "PROMETHEUS_MULTIPROC_DIR" in message
    assert str(directory) in message
    assert ("does not exist" if unusable == "missing" else "is not a directory") in message
    assert "mkdir -p" in message
    assert _open_descriptors() == before
    assert not sink.exists()


def test_the_old_lower_case_variable_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    monkeypatch.setenv("prometheus_multiproc_dir", str(tmp_path / "missing"))
    with pytest.raises(ConfigurationError, match="prometheus_multiproc_dir"):
        AccessLog(str(tmp_path / "access.log"), metrics=True)


# -- a real Prometheus server -----------------------------------------------------------


@contextmanager
def _prometheus(tmp_path: Path, target_port: int) -> Iterator[str]:
    """Prometheus scraping 127.0.0.1:target_port every second; yields its base URL."""
    assert PROMETHEUS is not None
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: app\n    static_configs:\n"
        f"      - targets: ['{LOOPBACK}:{target_port}']\n"
    )
    port = free_port()
    output = (tmp_path / "prometheus.out").open("wb")
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address={LOOPBACK}:{port}"],
        stdout=output, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://{LOOPBACK}:{port}"
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            assert process.poll() is None, (tmp_path / "prometheus.out").read_text()
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "prometheus.out").read_text()
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(30)
        output.close()


def _queried(url: str, query: str) -> float | None:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=5).json()
    results = answer["data"]["result"]
    return float(results[0]["value"][1]) if results else None


@pytest.mark.skipif(PROMETHEUS is None, reason="needs prometheus (apt-get install prometheus)")
def test_prometheus_scraping_uvicorn_sees_every_request_written(tmp_path: Path) -> None:
    sink = tmp_path / "access.log"
    environment = {"BOUNDLOG_SINK": str(sink)}

    def uvicorn(port: int) -> list[str]:
        return [PYTHON, "-m", "uvicorn", "tests.apps.metrics_app:asgi_app", "--host", LOOPBACK,
                "--port", str(port), "--no-access-log", "--lifespan", "off"]  # fmt: skip

    requests = 40
    with running_server(uvicorn, environment, tmp_path / "uvicorn.out") as server:
        with httpx.Client(base_url=server.base_url, timeout=10) as client:
            for index in range(requests):
                assert client.get(f"/item/{index}").status_code == 200
        with _prometheus(tmp_path, server.port) as url:
            query = f'boundlog_records_written_total{{sink="{sink}"}}'
            deadline = time.monotonic() + DEADLINE
            while _queried(url, query) != requests:
                assert time.monotonic() < deadline, _queried(url, query)
                time.sleep(0.2)
            assert _queried(url, f'boundlog_records_dropped_total{{sink="{sink}"}}') == 0
    assert len(read_log_lines(sink)) == requests


# -- gunicorn workers in multiprocess mode ----------------------------------------------


def _scraped(
    base_url: str, sink: str, name: str = "boundlog_records_written_total"
) -> float | None:
    """The sample ``name`` of one scrape, on a connection of its own."""
    text = httpx.get(f"{base_url}/metrics", timeout=10, headers={"Connection": "close"}).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == {"sink": sink}:
                return float(sample.value)
    return None


def test_gunicorn_workers_in_multiprocess_mode_show_the_sum_on_every_scrape(
    tmp_path: Path,
) -> None:
    sink = tmp_path / "access.log"
    multiprocess_dir = tmp_path / "prometheus-multiproc"
    multiprocess_dir.mkdir()
    environment = {
        "PROMETHEUS_MULTIPROC_DIR": str(multiprocess_dir),
        "BOUNDLOG_METRICS": "1",
        "BOUNDLOG_SKIP_PATHS": "/metrics",
    }

    def gunicorn(port: int) -> list[str]:
        return [PYTHON, "-m", "gunicorn", "--bind", f"{LOOPBACK}:{port}", "--workers", "3",
                "--logger-class", "boundlog.gunicorn.Logger", "--access-logfile", str(sink),
                "tests.apps.metrics_app:wsgi_app"]  # fmt: skip

    requests = 60
    with running_server(gunicorn, environment, tmp_path / "gunicorn.out") as server:
        # A connection each, so that the workers share them.
        for index in range(requests):
            response = httpx.get(
                f"{server.base_url}/item/{index}", timeout=10, headers={"Connection": "close"}
            )
            assert response.status_code == 200
        deadline = time.monotonic() + DEADLINE
        while _scraped(server.base_url, str(sink)) != requests:
            assert time.monotonic() < deadline, _scraped(server.base_url, str(sink))
            time.sleep(0.05)
        # Whichever worker answers, the sum of all three.
        assert [_scraped(server.base_url, str(sink)) for _ in range(12)] == [requests] * 12
        # The sum is of several workers' files (the master's own log has one too).
        pids = {path.stem.split("_")[-1] for path in multiprocess_dir.glob("counter_*.db")}
        assert len(pids - {str(server.process.pid)}) >= 2, sorted(multiprocess_dir.iterdir())
        # The queues that serve: the three workers', not the master's (it was a fourth).
        capacity = _scraped(server.base_url, str(sink), "boundlog_queue_capacity")
        assert capacity == 3 * DEFAULT_MAX_QUEUE
    assert len(read_log_lines(sink)) == requests
