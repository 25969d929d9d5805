"""waitress started from Python, as docs/integrations.md shows: ``python -m tests.apps.waitress_main PORT``.

waitress stops gracefully on KeyboardInterrupt but installs no SIGTERM handler, and
Python's default SIGTERM action ends the process without running exit handlers.
Raising KeyboardInterrupt on SIGTERM too makes both signals a graceful stop, after which
the exit handlers drain the log of tests/apps/wsgi_app.py.
"""

from __future__ import annotations

import signal
import sys

import waitress

from .wsgi_app import app

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    waitress.serve(app, listen=f"127.0.0.1:{sys.argv[1]}")
