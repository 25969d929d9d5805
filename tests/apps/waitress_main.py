"""waitress started from Python, as docs/wsgi.md shows: ``python -m tests.apps.waitress_main PORT``.

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
    # boundlog's trusted_proxies reads the forwarding headers, which waitress would
    # otherwise remove from a proxy it was not told to trust.
    waitress.serve(app, listen=f"127.0.0.1:{sys.argv[1]}", clear_untrusted_proxy_headers=False)
