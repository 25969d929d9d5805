"""boundlog: access logs for Python web servers that cost almost nothing.

The request path hands an immutable :class:`Record` to a bounded queue; a dedicated
writer thread formats and writes records in batches; memory stays bounded by policy;
every record is either written or counted.  Start with :class:`AccessLog`, or wrap an
application with :class:`boundlog.asgi.AccessLogMiddleware` or
:class:`boundlog.wsgi.AccessLogMiddleware`.
"""

from __future__ import annotations

from ._dev import DevFormat
from ._errors import AccessLogError, ConfigurationError, SinkError
from ._escape import escape, unescape
from ._formats import FORMATS, Format
from ._json import JsonFormat
from ._log import AccessLog
from ._logging import LoggingSink
from ._network import NetworkSink
from ._notes import add_fields
from ._queue import POLICIES
from ._record import Extras, Record
from ._redaction import DEFAULT_REDACTED_QUERY
from ._stats import Stats
from ._templates import Template
from ._version import __version__

__all__ = [
    "AccessLog",
    "AccessLogError",
    "ConfigurationError",
    "DEFAULT_REDACTED_QUERY",
    "DevFormat",
    "Extras",
    "FORMATS",
    "Format",
    "JsonFormat",
    "LoggingSink",
    "NetworkSink",
    "POLICIES",
    "Record",
    "SinkError",
    "Stats",
    "Template",
    "__version__",
    "add_fields",
    "escape",
    "unescape",
]
