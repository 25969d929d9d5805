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
    "request_headers": (),
    "response_headers": (),
    "notes": None,
    "extras": None,
}
_HEADER_DEFAULTS: dict[str, bytes | None] = {"referer": None, "user_agent": b"test-agent/1.0"}


def make_record(**fields: Any) -> Record:
    """A realistic record, with ``fields`` replacing the defaults.

    ``referer`` and ``user_agent`` (bytes or None) go into the request headers, after
    the Host header, unless ``request_headers`` is given.
    """
    unknown = set(fields) - set(_DEFAULTS) - set(_HEADER_DEFAULTS)
    if unknown:
        raise TypeError(f"Record has no field(s) {sorted(unknown)}")
    headers = {name: fields.pop(name, default) for name, default in _HEADER_DEFAULTS.items()}
    if "request_headers" not in fields:
        fields["request_headers"] = [(b"host", b"example.test")] + [
            (name.replace("_", "-").encode(), value)
            for name, value in headers.items()
            if value is not None
        ]
    return Record(**{**_DEFAULTS, **fields})


def apache_record(*values: Any) -> Record:
    """A record from the fields of a combined line's record, Referer and User-Agent last."""
    *fields, referer, user_agent = values
    return make_record(**dict(zip(_DEFAULTS, fields, strict=False)), referer=referer,
                       user_agent=user_agent)  # fmt: skip


def request_header(record: Record, name: bytes) -> bytes | None:
    """The value of the request header ``name`` (lower case) in a record built here."""
    values = [value for key, value in record.request_headers if key == name]
    return values[0] if values else None


class CapturingFormat:
    """A format that keeps the records it is given and says which header fields it reads.

    ``None`` leaves an attribute out: the format does not say.
    """

    def __init__(
        self,
        request_names: frozenset[bytes] | None,
        response_names: frozenset[bytes] | None = frozenset(),
    ) -> None:
        self.records: list[Record] = []
        if request_names is not None:
            self.request_header_names = request_names
        if response_names is not None:
            self.response_header_names = response_names

    def format_batch(self, records: Any) -> bytes:
        # As they came: a format must be handed Records, never plain tuples.
        assert all(type(record) is Record for record in records), records
        self.records += records
        return b"x\n" * len(records)
