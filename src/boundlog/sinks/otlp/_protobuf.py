"""The protobuf wire format, as far as OTLP's log messages need it, both ways.

A message is a run of fields, each a key (``field_number << 3 | wire_type``, a varint)
then its value: a varint (wire type 0: ints, bools, enums), eight bytes little-endian
(1: fixed64, double), a length-prefixed run of bytes (2: strings, bytes, messages,
packed lists) or four bytes (5: fixed32).  proto3 leaves a field at its default (0,
``""``, ``b""``) out, and an encoder writes fields in their numbers' order: both are
what the reference encoder (protobuf's, behind the OpenTelemetry SDK) does, so that the
bytes here equal its bytes for the same message (tests/unit/sinks/test_otlp_protobuf.py).

No dependency: boundlog has none at run time, and the few messages OTLP's logs need are
written here in a few dozen lines.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
FIXED32 = 5

DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")


# The varints of 0 to 16383 (one or two bytes): lengths, keys and most numbers are.
_SMALL = [bytes((value,)) for value in range(0x80)] + [
    bytes(((value & 0x7F) | 0x80, value >> 7)) for value in range(0x80, 0x4000)
]


def varint(value: int) -> bytes:
    """``value`` (0 <= value < 2**64; a negative int64 as its two's complement) as a varint."""
    if 0 <= value < 0x4000:
        return _SMALL[value]
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def length_delimited(number: int, payload: bytes) -> bytes:
    """A string, bytes or message field (written even when empty: callers leave out a
    default they must not write)."""
    return _SMALL[number << 3 | LENGTH_DELIMITED] + varint(len(payload)) + payload


def varint_field(number: int, value: int) -> bytes:
    return key(number, VARINT) + varint(value) if value else b""


def fixed64_field(number: int, value: int) -> bytes:
    return key(number, FIXED64) + _FIXED64.pack(value) if value else b""


def double_field(number: int, value: float) -> bytes:
    # proto3 leaves out 0.0 only, not -0.0: its bytes differ.
    if value == 0 and DOUBLE.pack(value) == DOUBLE.pack(0.0):
        return b""
    return key(number, FIXED64) + DOUBLE.pack(value)


def string_field(number: int, text: str) -> bytes:
    """A string field: its UTF-8 bytes, which protobuf requires valid (a lone surrogate,
    which UTF-8 cannot hold, is written as its ``\\udxxx`` escape)."""
    if not text:
        return b""
    return length_delimited(number, text.encode("utf-8", "backslashreplace"))


def bytes_field(number: int, value: bytes) -> bytes:
    return length_delimited(number, value) if value else b""


def message_field(number: int, payload: bytes) -> bytes:
    """A message field: written even when empty (an empty message is still present)."""
    return length_delimited(number, payload)


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Each field of a message: its number, wire type and value (an int, or the bytes of a
    length-delimited or fixed value).  Raises ValueError on a message cut short."""
    position = 0
    end = len(data)
    while position < end:
        tag, position = _read_varint(data, position)
        number, wire_type = tag >> 3, tag & 7
        value: int | bytes
        if wire_type == VARINT:
            value, position = _read_varint(data, position)
        elif wire_type == FIXED64:
            value, position = data[position : position + 8], position + 8
        elif wire_type == LENGTH_DELIMITED:
            size, position = _read_varint(data, position)
            value, position = data[position : position + size], position + size
        elif wire_type == FIXED32:
            value, position = data[position : position + 4], position + 4
        else:
            raise ValueError(f"wire type {wire_type} of field {number} is not one OTLP uses")
        if position > end:
            raise ValueError("a protobuf message cut short")
        yield number, wire_type, value


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("a protobuf varint cut short or too long")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
