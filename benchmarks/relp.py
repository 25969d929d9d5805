"""RELP to a real rsyslogd, in one process: lines a second and the writer's CPU a line.

An AccessLog with ``sink="relp://..."`` and ``policy="wait"`` takes ``COUNT`` records
submitted as fast as the main thread can, to an rsyslogd on loopback
(tests/_collectors.py, writing each message to a file); the figure is from the first
submit to flush() returning (every record answered), and the writer thread's user and
system CPU from /proc (in clock ticks: about 0.1 µs a line at this count).  Run from
the repository's root: ``python benchmarks/relp.py [rounds]``; BOUNDLOG_NO_EXTENSIONS=1
for the pure-Python core.  The machine's other load moves the lines a second a lot:
compare two trees in alternation (``PYTHONPATH=other/src``), not across hours.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _collectors import Rsyslogd
from _records import make_record
from boundlog import AccessLog, NetworkSink, _core

COUNT = 100_000


def writer_cpu_seconds(log: AccessLog) -> float:
    """The writer thread's user and system CPU so far."""
    task = Path(f"/proc/self/task/{log._writer.thread.native_id}/stat")
    fields = task.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    records = [make_record(path=f"/p/{i}".encode()) for i in range(1000)]
    core = "C core" if _core.relp_await is not None else "pure-Python core"
    print(f"{COUNT:,} records a round, {core}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        daemon = Rsyslogd(Path(folder)).start()
        try:
            for _ in range(rounds):
                sink = NetworkSink(f"relp://127.0.0.1:{daemon.relp_port}")
                log = AccessLog(sink, policy="wait")
                log.submit(records[0])  # the session opened before the clock starts
                assert log.flush(timeout=30)
                cpu = writer_cpu_seconds(log)
                start = time.perf_counter()
                for index in range(COUNT):
                    log.submit(records[index % len(records)])
                assert log.flush(timeout=60)
                elapsed = time.perf_counter() - start
                cpu = writer_cpu_seconds(log) - cpu
                stats = log.close()
                assert stats.written == COUNT + 1, stats
                print(
                    f"{COUNT / elapsed / 1000:.1f}k lines/s, "
                    f"writer {cpu / COUNT * 1e6:.2f} µs a line",
                    flush=True,
                )
        finally:
            daemon.stop()


if __name__ == "__main__":
    main()
