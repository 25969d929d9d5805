"""Building records for tests without repeating every field."""

from __future__ import annotations

from typing import Any

from boundlog import Record

_DEFAULTS: dict[str, Any] = {
    "time": 1_700_000_000.25,
    "duration": 0.0042,
    "client": "127.0.0.1",
    "method": "GET",
    "path": b"/hello",
    "query": b"",
    "protocol": "HTTP/1.1",
    "status": 200,
    "bytes_sent": 1024,
    "referer": None,
    "user_agent": b"test-agent/1.0",
}


def make_record(**fields: Any) -> Record:
    """A realistic record, with ``fields`` replacing the defaults."""
    unknown = set(fields) - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"Record has no field(s) {sorted(unknown)}")
    return Record(**{**_DEFAULTS, **fields})
