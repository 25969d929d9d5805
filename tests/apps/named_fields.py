"""A format of the tests' own that reads records only by name, as a user's format does.

``TESTAPP_FORMAT=named-fields`` gives it to the test applications' logs (see
``tests.apps.log_options``); tests/_servers.py parses its lines.  Its logger class makes
gunicorn's ``--logger-class`` write it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from boundlog import Record


class NamedFieldsFormat:
    """One JSON object per record, every value read as ``record.<field>``."""

    def format_batch(self, records: Sequence[Record]) -> bytes:
        return b"".join(map(self._line, records))

    @staticmethod
    def _line(record: Record) -> bytes:
        fields = {
            "time": record.time,
            "duration": record.duration,
            "client": record.client,
            "method": record.method,
            "path": record.path.decode("latin-1"),
            "query": record.query.decode("latin-1"),
            "protocol": record.protocol,
            "status": record.status,
            # As the built-in formats write it: the server sends no body for these.
            "bytes_sent": 0
            if record.method == "HEAD" or record.status < 200 or record.status in (204, 304)
            else record.bytes_sent,
        }
        return json.dumps(fields).encode() + b"\n"
