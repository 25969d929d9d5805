"""The ASGI test application with a LoggingSink: tests/e2e/test_e2e_logging.py serves it.

``TESTAPP_LOGGER`` names the logger and ``TESTAPP_MESSAGE`` the shape of its messages;
the server's ``--log-config`` configures that logger's handlers.  uvicorn serves the bare
``tests.apps.asgi_app:application`` for the reference lines its own access log writes.
"""

from __future__ import annotations

import os

from boundlog import LoggingSink
from boundlog.asgi import AccessLogMiddleware

from .asgi_app import application

app = AccessLogMiddleware(
    application,
    sink=LoggingSink(os.environ["TESTAPP_LOGGER"], message=os.environ.get("TESTAPP_MESSAGE")),
    flush_interval=0.01,
)
