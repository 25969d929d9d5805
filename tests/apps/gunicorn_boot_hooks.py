"""gunicorn server hooks that let a test see, and hold, a worker's start (``-c
python:tests.apps.gunicorn_boot_hooks``; tests/integrations/test_integration_gunicorn.py).

``post_fork`` runs in a new worker before it installs its signal handlers: a signal the
master forwards then runs the master's handler, inherited through fork, and is lost to
the worker.  With ``BOOT_GATE_FD`` set, it reads one byte from that descriptor (a pipe
the test writes to), holding the worker in that window until the test lets it go.

``post_worker_init`` runs once the worker has its handlers and its application: it
creates a file named by the worker's pid in ``READY_DIR`` when that is set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def post_fork(server: Any, worker: Any) -> None:
    gate = os.environ.get("BOOT_GATE_FD")
    if gate is not None:
        os.read(int(gate), 1)


def post_worker_init(worker: Any) -> None:
    ready = os.environ.get("READY_DIR")
    if ready is not None:
        Path(ready, str(os.getpid())).touch()
