"""A format of the tests' own that writes each record's route (tests/unit/capture/test_routes.py).

It reads only the route of a record's extras (``reads_extras``), as a user's format
would, while the built-in formats learn to write it: one JSON array a line,
``[method, path, status, route]``, the route null when the record has none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from boundlog import Record

from . import SINK_VARIABLE


class RouteLines:
    reads_extras = frozenset({"route"})

    def format_batch(self, records: Sequence[Record]) -> bytes:
        return b"".join(map(self._line, records))

    @staticmethod
    def _line(record: Record) -> bytes:
        route = None if record.extras is None else record.extras.route
        fields = [record.method, record.path.decode("latin-1"), record.status, route]
        return json.dumps(fields).encode() + b"\n"


def route_log_options() -> dict[str, Any]:
    """The options of an application's own log: the test's sink, the lines above."""
    return {"sink": os.environ[SINK_VARIABLE], "format": RouteLines(), "flush_interval": 0.01}
