"""What the fault-injection servers share: their log, built from the test's settings.

The fault tests (tests/e2e/test_faults_*.py) run uvicorn with ``tests.apps.fault_asgi:app``
and gunicorn with ``tests.apps.fault_wsgi:app``.  Both applications borrow one
:class:`~boundlog.AccessLog` built here from the JSON in ``TESTAPP_FAULT_CONFIG``:

* ``log``: the AccessLog options (sink, format, policy, max_queue, reopen_signal, ...);
* ``stats_dir``: where each process writes its final counters, as
  ``stats-PID.json``, when it closes the log on its way out (the counters die with the
  process otherwise, and the tests check them exactly);
* ``marker``: a request path to submit once, at import, before any request.  Under
  gunicorn ``--preload`` the import happens in the master, so that record waits in the
  master's queue while the workers are forked from it.

Routes: ``/_stats`` answers the process's pid, counters, ticker count and whether the GIL
is enabled as JSON and is never logged (it reads the log, it must not feed it); with
``PYTHONTRACEMALLOC`` set, also tracemalloc's current and peak bytes (``?reset-peak``
starts the peak anew first); every other path answers 200 with ``ok PID`` and is logged.
"""

from __future__ import annotations

import json
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from boundlog import AccessLog, Record

CONFIG_VARIABLE = "TESTAPP_FAULT_CONFIG"
STATS_PATH = "/_stats"

_config: dict[str, Any] = json.loads(os.environ[CONFIG_VARIABLE])

LOG = AccessLog(**_config["log"])

if _config.get("marker"):
    LOG.submit(
        Record(
            time=time.time(), duration=0.0, client="127.0.0.1", method="GET",
            path=_config["marker"].encode(), query=b"", protocol="HTTP/1.1", status=200,
            bytes_sent=0,
        )
    )  # fmt: skip


def answer() -> bytes:
    """The body of a logged request: which process served it."""
    return b"ok %d\n" % os.getpid()


#: The ``/_stats`` query that starts tracemalloc's peak anew before answering.
RESET_PEAK_QUERY = "reset-peak"


def stats_document(ticks: int = 0, query: str = "") -> bytes:
    """The ``/_stats`` body: pid, the log's counters, the event-loop ticker, the GIL, and
    tracemalloc's ``[current, peak]`` bytes when it traces (else null)."""
    traced = None
    if tracemalloc.is_tracing():
        if query == RESET_PEAK_QUERY:
            tracemalloc.reset_peak()
        traced = list(tracemalloc.get_traced_memory())
    document = {
        "pid": os.getpid(),
        "ticks": ticks,
        "stats": LOG.stats()._asdict(),
        # Whether this server process runs with the GIL (always, before Python 3.13).
        "gil": getattr(sys, "_is_gil_enabled", lambda: True)(),
        "traced": traced,
    }
    return json.dumps(document).encode()


def close_and_record() -> None:
    """Close the log and write its final counters where the test looks for them."""
    stats = LOG.close()
    stats_dir = _config.get("stats_dir")
    if stats_dir:
        final = Path(stats_dir, f"stats-{os.getpid()}.json")
        final.write_text(json.dumps({"pid": os.getpid(), "stats": stats._asdict()}))
