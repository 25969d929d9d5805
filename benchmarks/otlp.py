"""The OTLP sink's cost on the writer thread, against a file sink's, in one process.

Per line, in µs of the writer's own CPU (``time.thread_time``): formatting a batch of
512 combined lines and writing them to /dev/null, against the OTLP sink's format step
(each record's LogRecord) and its write (one POST of the batch to a collector on
loopback, tests/_collectors.py, whose own CPU is not counted), in protobuf and in JSON.
Each figure is the median of 15 rounds.  Run from the repository's root:
``python benchmarks/otlp.py``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _collectors import otlp_collector
from _records import make_record
from boundlog.formats._apache import make_format
from boundlog.sinks._files import open_sink
from boundlog.sinks.otlp._sink import OtlpSink

BATCH = 512


def per_line(step: Callable[[], None], rounds: int = 15) -> float:
    samples = []
    for _ in range(rounds):
        start = time.thread_time()
        for _ in range(4):
            step()
        samples.append((time.thread_time() - start) / 4 / BATCH * 1e6)
    return statistics.median(samples)


def main() -> None:
    records = [
        make_record(path=b"/items/%d" % n, query=b"page=2", referer=b"https://example.test/")
        for n in range(BATCH)
    ]
    combined = make_format("combined", utc=True)
    devnull = open_sink("/dev/null")
    results = {
        "file sink, combined": per_line(lambda: devnull.write(combined.format_batch(records)))
    }
    with otlp_collector() as collector:
        for protocol in ("http/protobuf", "http/json"):
            os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
            sink = OtlpSink(f"otlp+http://127.0.0.1:{collector.port}")
            encode = sink.messages(None)
            results[f"OTLP sink, {protocol}"] = per_line(
                lambda: sink.write(encode.format_batch(records))  # noqa: B023
            )
    base = results["file sink, combined"]
    for name, micros in results.items():
        print(f"{name:26s} {micros:6.2f} µs/line  {micros / base:6.1f}x")


if __name__ == "__main__":
    main()
