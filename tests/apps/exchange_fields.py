"""What tests/unit/capture/test_completed.py reads of the records its servers log: a format that
writes each record as a JSON object of the path, status, bytes sent and the extras
``completed`` and ``bytes_received``, and the chunks the applications send
(tests/apps/exchange_asgi.py and exchange_wsgi.py).

Routes, under both applications:

* ``/upload``: reads the whole request body and answers 200 with its length in decimal;
* ``/stream``: 200 streamed as ``STREAM_CHUNKS`` chunks of ``CHUNK`` bytes;
* ``/abandoned``: 200, sends one ``CHUNK``, then waits for the client to go away and
  ends there (ASGI: at ``http.disconnect``) or goes on sending (WSGI) until the server
  stops taking chunks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from boundlog import Record

from . import FORMAT_VARIABLE

CHUNK = b"x" * 1000
STREAM_CHUNKS = 5
# The format name (TESTAPP_FORMAT) of a log that reads ``completed`` only, which keeps
# the C request paths.
COMPLETED_ONLY = "completed-only"


class ExchangeFieldsFormat:
    """One JSON object a record: what tests/unit/capture/test_completed.py checks; the log reads
    ``completed`` only when TESTAPP_FORMAT says ``completed-only``."""

    def __init__(self) -> None:
        self.reads_extras = (
            frozenset({"completed"})
            if os.environ.get(FORMAT_VARIABLE) == COMPLETED_ONLY
            else frozenset({"completed", "bytes_received"})
        )

    def format_batch(self, records: Sequence[Record]) -> bytes:
        return b"".join(
            json.dumps(
                {
                    "path": record.path.decode(),
                    "status": record.status,
                    "bytes_sent": record.bytes_sent,
                    "completed": None if record.extras is None else record.extras.completed,
                    "bytes_received": None
                    if record.extras is None
                    else record.extras.bytes_received,
                }
            ).encode()
            + b"\n"
            for record in records
        )
