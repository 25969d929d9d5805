"""A format of the tests' own that writes the server variables a record carries
(tests/unit/capture/test_environ_extras.py).

It names its variables (``environ_names``) and reads only them of a record's extras,
as a format with ``%{NAME}e`` directives does: one JSON array a line,
``[method, path, environ]``, the environ null when the record has none and any value
that is not JSON written with ``str()``, as the writer's formats do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from boundlog import Record

from . import SINK_VARIABLE

#: The variables the format names: what the test applications set (a user and a
#: tenant), one the server fills (the request's User-Agent in a WSGI environ) and one
#: nothing sets.
NAMES = frozenset({"user", "boundlog.tenant", "HTTP_USER_AGENT", "absent"})


class EnvironLines:
    reads_extras = frozenset({"environ"})
    environ_names = NAMES

    def format_batch(self, records: Sequence[Record]) -> bytes:
        return b"".join(map(self._line, records))

    @staticmethod
    def _line(record: Record) -> bytes:
        environ = None if record.extras is None else record.extras.environ
        fields = [record.method, record.path.decode("latin-1"), environ]
        return json.dumps(fields, default=str).encode() + b"\n"


def environ_log_options() -> dict[str, Any]:
    """The options of an application's own log: the test's sink, the lines above."""
    return {"sink": os.environ[SINK_VARIABLE], "format": EnvironLines(), "flush_interval": 0.01}
