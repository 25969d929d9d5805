"""The http.server of tests/integrations/test_integration_http_server.py: ``python -m tests.apps.http_server_app PORT``.

A ``ThreadingHTTPServer`` whose handler is ``SimpleHTTPRequestHandler`` with
:class:`boundlog.http_server.AccessLogMixin`, serving the directory named by
``TESTAPP_DIRECTORY`` over keep-alive HTTP/1.1.  ``GET /raise`` raises before
responding.  The log comes from the shared variables (see ``tests.apps``): with
``TESTAPP_LOG_AS=attribute`` the handler class is given an AccessLog, otherwise it
builds one from ``access_log_options`` on first use.  SIGTERM stops the server, and the
exit handlers drain the log.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

from boundlog import AccessLog
from boundlog.http_server import AccessLogMixin

from . import log_options

DIRECTORY_VARIABLE = "TESTAPP_DIRECTORY"
LOG_AS_VARIABLE = "TESTAPP_LOG_AS"
LOOPBACK = "127.0.0.1"


class Handler(AccessLogMixin, SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    access_log_options = log_options()

    def do_GET(self) -> None:
        if self.path == "/raise":
            raise RuntimeError("the test handler raises before responding, on purpose")
        super().do_GET()


def main(port: int) -> None:
    if os.environ.get(LOG_AS_VARIABLE) == "attribute":
        Handler.access_log = AccessLog(**log_options())
    handler = functools.partial(Handler, directory=os.environ[DIRECTORY_VARIABLE])
    server = ThreadingHTTPServer((LOOPBACK, port), handler)
    # serve_forever returns once shutdown() is called from another thread.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    with server:
        server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]))
