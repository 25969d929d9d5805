"""boundlog: access logs for Python web servers that cost almost nothing.

The request path hands an immutable :class:`Record` to a bounded queue; a dedicated
writer thread formats and writes records in batches; memory stays bounded by policy;
every record is either written or counted.  Start with :class:`AccessLog`, or wrap an
application with :class:`boundlog.asgi.AccessLogMiddleware` or
:class:`boundlog.wsgi.AccessLogMiddleware`.
"""

from __future__ import annotations

from ._errors import AccessLogError, ConfigurationError, SinkError
from ._options import DEFAULT_REDACTED_QUERY, POLICIES
from ._version import __version__
from .engine._log import AccessLog
from .formats._apache import FORMATS, Format
from .formats._dev import DevFormat
from .formats._escape import escape, unescape
from .formats._json import JsonFormat
from .formats._logfmt import LogfmtFormat
from .formats._schemas import SchemaFormat
from .formats._templates import Template
from .metrics._stats import Stats
from .record._notes import add_fields
from .record._record import Extras, Record
from .sinks._logging import LoggingSink
from .sinks._network import NetworkSink
from .sinks.otlp._sink import OtlpSink

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
    "LogfmtFormat",
    "LoggingSink",
    "NetworkSink",
    "OtlpSink",
    "POLICIES",
    "Record",
    "SchemaFormat",
    "SinkError",
    "Stats",
    "Template",
    "__version__",
    "add_fields",
    "escape",
    "unescape",
]
