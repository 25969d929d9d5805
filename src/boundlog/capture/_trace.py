"""Trace context: the trace and span ids a line shows, and where they come from.

Two sources, in order:

* the record's ``extras.trace``: the ids of the OpenTelemetry span that was current in
  the request's context (``_extras``), when boundlog runs inside OpenTelemetry's
  middleware.  The span is the server's own: its span id is the one the server's
  telemetry reports for the request.
* else the request's W3C ``traceparent`` header (Trace Context, level 1, section 3.2),
  read here, on the writer thread, so that the request path pays nothing for it.  Its
  span id is the caller's (``parent-id``): the server made no span of its own.

A header that does not follow the specification gives no ids, as the specification
tells a receiver to treat it: ``version`` two lower-case hex digits other than ``ff``;
for version ``00`` exactly ``00-<32 hex>-<16 hex>-<2 hex>``, for a later version at
least that much followed by nothing or by ``-``; ids not all zeros; hex in lower case
only.  A request with two ``traceparent`` fields is read as one joined value, which is
then too long for version ``00`` and gives no ids either, as it should (the
specification lets a receiver take no side).
"""

from __future__ import annotations

import re

# version "-" trace-id "-" parent-id "-" trace-flags, then, for a later version than
# 00 only, anything that starts with "-".
_TRACEPARENT = re.compile(rb"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?\Z", re.S)
_ZERO_TRACE = b"0" * 32
_ZERO_SPAN = b"0" * 16
#: The largest ids: 16 and 8 bytes.
_TRACE_LIMIT = 1 << 128
_SPAN_LIMIT = 1 << 64


def trace_ids(trace: object, traceparent: bytes | str | None) -> tuple[str, str] | None:
    """The trace and span ids a line shows, as lower-case hex (32 and 16 digits), from
    a record's ``extras.trace`` if it holds valid ids, else from its ``traceparent``
    header's value (bytes, or latin-1 text from a WSGI environ); None if neither has
    any."""
    if type(trace) is tuple and len(trace) == 2:
        trace_id, span_id = trace
        if (
            type(trace_id) is int
            and type(span_id) is int
            and 0 < trace_id < _TRACE_LIMIT
            and 0 < span_id < _SPAN_LIMIT
        ):
            return "%032x" % trace_id, "%016x" % span_id
    if traceparent is None:
        return None
    if isinstance(traceparent, str):
        try:
            traceparent = traceparent.encode("latin-1")
        except UnicodeEncodeError:
            return None
    match = _TRACEPARENT.match(traceparent)
    if match is None:
        return None
    version, trace_id_hex, span_id_hex, rest = match.groups()
    if version == b"ff" or (version == b"00" and rest is not None):
        return None
    if trace_id_hex == _ZERO_TRACE or span_id_hex == _ZERO_SPAN:
        return None
    return trace_id_hex.decode("ascii"), span_id_hex.decode("ascii")
